"""One connection to a worker cluster, as the rest of kfed-manager reads it, and the MultiKueueCluster reasons.

:class:`WorkerConnection` holds what the pool (``manager.workers``) keeps per MultiKueueCluster: the API client, the
watch caches of kfed's copies and of the worker's capacity report, the connection's judged health, and why it cannot
take new workloads now (``unusable_reason``). Placement reads it through the two protocols here, so the scheduler
and the admission-check status depend on what they read, not on the pool that connects.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import anyio
import anyio.abc

from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import Forbidden, NotFound
from federation.kube.kubeconfig import KubeconfigError
from federation.kube.overlay import WriteOverlay
from federation.protocol import CAPACITY_STALE_SECONDS
from manager.decisions.capacity_view import ParsedReport, report_age
from manager.decisions.shared_servers import REASON_MANAGER_CLUSTER
from manager.decisions.worker_health import Health


class ReportedCapacity(Protocol):
    """One worker connection as placement reads it: its current capacity report (:class:`WorkerConnection`)."""

    @property
    def current(self) -> ParsedReport | None: ...

    @property
    def report(self) -> ParsedReport | None:
        """The kfed-agent's own report (None: a worker without an agent, probed through its queues)."""
        ...


class WorkerAvailability(Protocol):
    """What placement reads of the worker pool (:class:`WorkerPool`): the connections with their reports, why the
    ones without a connection have none, and whether a worker can take new workloads now."""

    @property
    def connections(self) -> Mapping[str, ReportedCapacity]: ...

    @property
    def problems(self) -> Mapping[str, str]: ...

    def unusable_reason(self, name: str, now: dt.datetime) -> str: ...


NO_REPORT_GRACE = 10.0
"""Seconds a worker may show no ClusterCapacity report (a starting kfed-agent publishes one within a second or two)
before it is taken for a worker without an agent and probed through its ClusterQueue status."""

# Kueue's reasons for the MultiKueueCluster Active condition.
REASON_ACTIVE = "Active"
REASON_BAD_KUBECONFIG = "BadKubeConfig"
"""The kubeconfig is missing (no Secret, key or file, or a path kfed must not read) or malformed."""
REASON_INSECURE_KUBECONFIG = "InsecureKubeConfig"
"""The kubeconfig uses a form refused as unsafe (plugins, file references, no TLS verification, basic auth)."""
REASON_CONNECTION_FAILED = "ClientConnectionFailed"
"""The worker's apiserver cannot be reached or stopped answering."""


def kubeconfig_reason(err: KubeconfigError) -> str:
    return REASON_INSECURE_KUBECONFIG if err.insecure else REASON_BAD_KUBECONFIG


@dataclass
class WorkerConnection:
    name: str
    fingerprint: str
    api: KubeApi
    workloads: WatchCache
    jobs: WatchCache
    capacity: WatchCache
    address: str
    """The API server address its kubeconfig names (``shared_servers``)."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    report: ParsedReport | None = None
    report_received_at: dt.datetime | None = None
    """When the current generation of ``report`` arrived (the manager's clock; ``capacity_view.report_age``)."""
    report_renewed: bool = False
    """``report`` replaced an earlier one on this connection (another generation or observedTime), so
    ``report_received_at`` is when the agent renewed it, not just when the connection first saw it."""
    report_error: str | None = None
    """Why the worker's last ClusterCapacity report could not be read (e.g. written by a kfed-agent of another
    version); the worker is then not used until a report can be read."""
    health: Health = field(default_factory=lambda: Health("connecting", "connecting"))
    """Judged by the connection's monitor from its liveness probe and its caches (see ``worker_health``)."""
    cluster_queues: WatchCache | None = None
    local_queues: WatchCache | None = None
    """Started only once the worker refuses the ClusterCapacity report: its capacity is then probed from these."""
    probed: ParsedReport | None = None
    """The capacity probed from ``cluster_queues`` and ``local_queues`` (None until both have listed)."""
    tg: anyio.abc.TaskGroup | None = None
    moved_from: tuple[str, dt.datetime] | None = None
    """The API server address this name's previous connection reached, when its kubeconfig now names another, and
    when that was seen: the copies sent before then are on that server, out of this connection's reach."""
    manager_cluster: str | None = None
    """Why this connection reaches the manager cluster itself (found at a copy's create); it then takes no copies."""
    empty_since: float | None = None
    """Monotonic time since when the ClusterCapacity list has held no report."""
    workload_view: WriteOverlay = field(init=False)
    """The Workload copies with the ones the manager just created and the cache does not list yet: a pass right
    after the create must not create it again (a 409 and a GET)."""
    job_view: WriteOverlay = field(init=False)

    def __post_init__(self) -> None:
        self.workload_view = WriteOverlay(self.workloads.store)
        self.job_view = WriteOverlay(self.jobs.store)

    @property
    def caches(self) -> tuple[tuple[str, WatchCache], ...]:
        probing = (
            (("ClusterQueue", self.cluster_queues), ("LocalQueue", self.local_queues))
            if self.cluster_queues is not None and self.local_queues is not None
            else ()
        )
        return (("Workload", self.workloads), ("Job", self.jobs), ("ClusterCapacity", self.capacity), *probing)

    @property
    def report_refused(self) -> bool:
        """The worker refuses the ClusterCapacity report (no permission, or no such resource there)."""
        return self.capacity.failing_for() is not None and isinstance(
            self.capacity.last_exception, (Forbidden, NotFound)
        )

    def report_missing(self, now: float) -> str | None:
        """Why the worker has no capacity report to go by (None: it has one, or may publish one any moment): refused,
        or none published for ``NO_REPORT_GRACE`` seconds (no kfed-agent there)."""
        if self.report_refused:
            return self.capacity.last_error or "refused"
        if self.capacity.synced and len(self.capacity.store) == 0:
            if self.empty_since is None:
                self.empty_since = now
            if now - self.empty_since >= NO_REPORT_GRACE:
                return "none published; is kfed-agent running there?"
        else:
            self.empty_since = None
        return None

    @property
    def current(self) -> ParsedReport | None:
        """The capacity dispatch reads: the agent's report, else the one probed through the ClusterQueues."""
        return self.report if self.report is not None else self.probed

    @property
    def connected(self) -> bool:
        return self.health.state == "healthy"

    def unusable_reason(self, now: dt.datetime) -> str:
        if self.manager_cluster is not None:
            return f"{REASON_MANAGER_CLUSTER}: {self.manager_cluster}"
        if self.health.state == "failed":
            return f"{REASON_CONNECTION_FAILED}: {self.health.message}"
        if self.health.state == "connecting":
            return f"not connected yet ({self.health.message})"
        if self.report is None:
            if self.report_error is not None:
                return self.report_error
            if self.probed is not None:
                return ""  # probed through its ClusterQueues, kept current by their watch
            if self.cluster_queues is not None:
                return "no capacity report; waiting for the first list of its ClusterQueues and LocalQueues"
            return "no capacity report yet (is kfed-agent running there?)"
        received = self.report_received_at or now
        age = report_age(self.report, now=now, received_at=received, renewed=self.report_renewed)
        if age > CAPACITY_STALE_SECONDS:
            return f"capacity report is {age:.0f}s old"
        return ""
