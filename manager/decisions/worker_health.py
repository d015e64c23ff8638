"""Is a worker connection healthy, and when may the manager try to connect again: pure state, no I/O.

A worker whose apiserver stops answering keeps its TCP connections open, so its watches just go quiet (bookmarks
come only once a minute) and nothing fails by itself for minutes. The manager therefore probes each connection
(``GET /version`` with a short timeout, every few seconds) and judges it here from the probe's outcome and its
caches' states: a failed probe, or a cache whose list/watch has kept failing past a short grace, makes the
connection failed (Kueue's ``ClientConnectionFailed``); a connection whose caches have not listed yet is still
connecting; otherwise it is healthy.

A cache the worker refuses (``optional``: the ClusterCapacity report, which Kueue's documented permissions for the
manager do not cover and a stock Kueue worker does not serve) does not fail the connection: the worker is then
probed through its ClusterQueues, and the healthy message says so.

Connecting to a worker that does not answer is retried with Kueue's backoff (5 s doubling to 320 s). The backoff
counts connection attempts, not reconciles: a reconcile that comes before the next attempt is due (the
controller's own status write, a Secret event) just waits for the remaining time, so nothing but real failed
attempts advances it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

HealthState = Literal["connecting", "healthy", "failed"]


@dataclass(frozen=True, slots=True)
class CacheView:
    """What the health check needs to know about one of a connection's watch caches."""

    kind: str
    synced: bool
    failing_for: float | None = None
    """Seconds its list/watch has been failing without a successful (re)open; None when it is not failing."""
    error: str | None = None
    optional: bool = False
    """The worker may refuse this one (403, or 404 for a resource type it does not serve) and still be usable."""
    refused: bool = False
    """Its list/watch fails with such a refusal."""


@dataclass(frozen=True, slots=True)
class Health:
    state: HealthState
    message: str


CONNECTED = Health("healthy", "Connected")


def connection_health(
    *, probe_error: str | None, caches: Sequence[CacheView], grace: float, probe_status: int | None = None
) -> Health:
    """The health of one worker connection from its latest probe (None: it answered; ``probe_status``: the HTTP
    status it answered with, when it answered with an error) and its caches."""
    if probe_error is not None:
        return Health("failed", probe_failure_message(probe_error, probe_status))
    refused = [c for c in caches if c.optional and c.refused]
    caches = [c for c in caches if not (c.optional and c.refused)]
    failing = [c for c in caches if c.failing_for is not None and c.failing_for >= grace]
    if failing:
        return Health(
            "failed", "; ".join(f"list/watch of {c.kind} on the worker keeps failing: {c.error}" for c in failing)
        )
    waiting = [c.kind for c in caches if not c.synced]
    if waiting:
        return Health("connecting", "waiting for the first list of " + ", ".join(waiting))
    if refused:
        return Health("healthy", probed_message(refused[0]))
    return CONNECTED


def probe_failure_message(error: str, status: int | None) -> str:
    """Why a failed probe fails the connection. An apiserver that answers 401 or 403 is up but refuses the
    kubeconfig's credentials: saying it "does not answer" would send the operator after the network."""
    if status == 401:
        return (
            f"the worker's apiserver refuses the kubeconfig's credentials: {error} (a token or client certificate "
            "it no longer accepts: expired, revoked, or its ServiceAccount deleted; update the kubeconfig Secret)"
        )
    if status == 403:
        return f"the worker's apiserver refuses GET /version to the kubeconfig's user: {error}"
    return f"the worker's apiserver does not answer: {error}"


def workloads_looked_at_again(was: HealthState, now: HealthState) -> bool:
    """Whether every workload the worker holds, or with a copy there, is looked at again when its connection goes
    from ``was`` to ``now``: lost (its workloads start waiting for the worker-lost timeout), back (copies there may
    be stale), or connected at last (after a start or a leader change, the workloads looked at while it was
    connecting only wait for a recheck)."""
    return was != now and (now == "failed" or was in ("failed", "connecting"))


def probed_message(refused: CacheView) -> str:
    """The ``Active`` message of a worker without a capacity report."""
    return (
        f"Connected; no {refused.kind} report ({refused.error}): capacity is probed through the worker's "
        "ClusterQueue status"
    )


@dataclass
class ReconnectBackoff:
    """Kueue's reconnect backoff: after failed attempt n the next may start ``initial * 2**(n-1)`` (capped) later."""

    initial: float = 5.0
    maximum: float = 320.0
    failures: int = 0
    next_attempt: float = 0.0
    """Monotonic time before which no new attempt is made."""

    def remaining(self, now: float) -> float:
        """Seconds until the next attempt is due (0: now)."""
        return max(0.0, self.next_attempt - now)

    def failed(self, now: float) -> float:
        """Record a failed attempt made at ``now``; returns the delay before the next one."""
        self.failures += 1
        delay = float(min(self.maximum, self.initial * 2.0 ** min(self.failures - 1, 30)))
        self.next_attempt = now + delay
        return delay

    def reset(self) -> None:
        self.failures = 0
        self.next_attempt = 0.0


def reconnect_message(error: str, *, attempt: int, delay: float, now: dt.datetime, status: int | None = None) -> str:
    """The ``Active=False`` message after failed connection attempt ``attempt``: what failed (``status``: the HTTP
    status the apiserver refused with, if it answered), and when the next attempt is made (Kueue v0.20 names
    both)."""
    at = (now + dt.timedelta(seconds=delay)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    what = (
        probe_failure_message(error, status)
        if status in (401, 403)
        else f"cannot reach the worker's apiserver: {error}"
    )
    return f"{what}; attempt {attempt} failed, next at {at} (in {delay:.0f}s)"
