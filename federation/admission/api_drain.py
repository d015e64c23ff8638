"""Drain a cluster's pending Workloads through the admission core, and the status writes that follow.

Shared by the manager and the agent. The core decides one head per ClusterQueue per cycle (Kueue's scheduler);
draining runs cycles until every pending workload has a decision, applying each admission to the snapshot before
the next cycle, so one pass admits everything that fits in priority/creation order. A ``StrictFIFO`` queue stops
at its first workload that does not fit; a ``BestEffortFIFO`` queue moves on to the next. A head that lost a race
inside a cycle is retried once in the next cycle.

What to write for a pending verdict (``QuotaReserved=False`` with Kueue's reason and the core's message) is here
too, and is returned only when it differs from what the workload already says, so an unchanged verdict costs no
API call. What to write for an admission differs by side (the agent admits; the manager reserves and dispatches).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import workload_key
from federation.admission.cycle import CycleConfig, apply_admission, run_cycle
from federation.admission.decisions import Admit, Assignment, Decision, Wait
from federation.admission.flavors import format_amount
from federation.api.workload import QUOTA_RESERVED
from federation.conditions import conditions_of, set_condition
from federation.protocol import REASON_INADMISSIBLE, REASON_PENDING

Veto = Callable[[Admit], str | None]
Obj = dict[str, Any]
Outcome = Literal["admitted", "reserved", "pending", "preempted"]


@dataclass(frozen=True, slots=True)
class EventSpec:
    """A Kubernetes Event to record about the workload after the write succeeds."""

    reason: str
    message: str
    event_type: Literal["Normal", "Warning"] = "Normal"


@dataclass(frozen=True, slots=True)
class WorkloadUpdate:
    """One status write: merge ``status`` into the workload ``raw`` (at its resourceVersion), then ``events``."""

    key: str
    raw: Obj
    status: Obj
    outcome: Outcome
    cluster_queue: str | None
    message: str
    events: tuple[EventSpec, ...] = ()


def admission_status(assignment: Assignment) -> Obj:
    """``status.admission`` in Kueue's v1beta2 shape, quantities printed as Kubernetes prints them."""
    return {
        "clusterQueue": assignment.cluster_queue,
        "podSetAssignments": [
            {
                "name": psa.name,
                "flavors": dict(psa.flavors),
                "resourceUsage": {name: format_amount(name, amount) for name, amount in psa.resource_usage.items()},
                "count": psa.count,
            }
            for psa in assignment.pod_set_assignments
        ],
    }


def pending_update(
    raw: Obj, *, reason: str, message: str, now: dt.datetime, cluster_queue: str | None
) -> WorkloadUpdate | None:
    """``QuotaReserved=False`` with ``reason``/``message``, or None when the workload already says exactly that."""
    conditions, changed = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=False,
        reason=reason,
        message=message,
        now=now,
        observed_generation=workload_generation(raw),
    )
    if not changed:
        return None
    events = (EventSpec(REASON_PENDING, message, "Warning" if reason == REASON_INADMISSIBLE else "Normal"),)
    return WorkloadUpdate(workload_key(raw), raw, {"conditions": conditions}, "pending", cluster_queue, message, events)


def workload_generation(raw: Mapping[str, Any]) -> int | None:
    generation = (raw.get("metadata") or {}).get("generation")
    return int(generation) if isinstance(generation, int) else None


_DEFAULT_CONFIG = CycleConfig()


def drain(
    state: QuotaState, *, now_seconds: float, veto: Veto | None = None, config: CycleConfig = _DEFAULT_CONFIG
) -> list[Decision]:
    """Run scheduling cycles until every pending workload has a final decision (see the module docstring).

    ``config`` holds the scheduler-wide switches (fair sharing and its preemption strategies, Kueue's
    ``fairSharing`` configuration).

    ``veto(admit)`` may refuse an admission the core would make (the manager does when no worker has room): it
    returns why, the workload gets a ``Wait`` with that message, and its usage never enters the snapshot.
    """
    snapshot = state.snapshot
    queues = {name: deque(workload for workload, _ in items) for name, items in state.pending.items()}
    retried: set[str] = set()
    final: list[Decision] = []
    while True:
        heads = [queue.popleft() for queue in queues.values() if queue]
        if not heads:
            return final
        for proposed in run_cycle(snapshot, heads, config=config):
            workload = proposed.workload
            decision: Decision = proposed
            if isinstance(proposed, Admit):
                refused = veto(proposed) if veto is not None else None
                if refused is None:
                    apply_admission(snapshot, proposed, now=now_seconds)
                    final.append(proposed)
                    continue
                decision = Wait(workload=workload, reason="Pending", message=refused)
            if isinstance(decision, Wait) and decision.retry_immediately and workload.key not in retried:
                retried.add(workload.key)
                queues[workload.cluster_queue].appendleft(workload)
                continue
            final.append(decision)
            node = snapshot.cluster_queues.get(workload.cluster_queue)
            inactive = isinstance(decision, Wait) and decision.reason == "Inactive"
            if node is not None and node.spec.queueing_strategy == "StrictFIFO" and not inactive:
                queues[workload.cluster_queue].clear()  # nothing behind a StrictFIFO head is considered
