"""Local admission: run the shared admission core over the worker's pending Workloads and say what to write.

The core decides one head per ClusterQueue per cycle (Kueue's scheduler). The agent drains: it runs cycles until
every pending workload has a decision, applying each admission to the snapshot before the next cycle, so one pass
admits everything that fits in priority/creation order. A ``StrictFIFO`` queue stops at its first workload that
does not fit; a ``BestEffortFIFO`` queue moves on to the next. A head that lost a race inside a cycle is retried
once in the next cycle.

Each decision becomes one status write: ``status.admission`` plus ``QuotaReserved`` and ``Admitted`` (the worker
has no admission checks), or ``QuotaReserved=False`` with Kueue's reason and the core's message — the latter only
when it differs from what the workload already says, so an unchanged verdict costs no API call.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from federation.admission.cycle import apply_admission, run_cycle
from federation.admission.decisions import Admit, Assignment, Decision, Preempt, Wait
from federation.admission.flavors import format_amount
from federation.api.workload import ADMITTED, QUOTA_RESERVED
from federation.conditions import conditions_of, set_condition
from federation.protocol import REASON_ADMITTED, REASON_INADMISSIBLE, REASON_PENDING, REASON_QUOTA_RESERVED
from worker_agent.decisions.local_state import LocalState
from worker_agent.decisions.workloads import workload_key

Obj = dict[str, Any]
Outcome = Literal["admitted", "pending"]


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


def admit_update(raw: Obj, assignment: Assignment, *, now: dt.datetime, waited_seconds: float) -> WorkloadUpdate:
    queue = assignment.cluster_queue
    reserved_message = f"Quota reserved in ClusterQueue {queue}"
    generation = _generation(raw)
    conditions, _ = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=True,
        reason=REASON_QUOTA_RESERVED,
        message=reserved_message,
        now=now,
        observed_generation=generation,
    )
    conditions, _ = set_condition(
        conditions,
        condition_type=ADMITTED,
        status=True,
        reason=REASON_ADMITTED,
        message="The workload is admitted",
        now=now,
        observed_generation=generation,
    )
    events = (
        EventSpec(REASON_QUOTA_RESERVED, f"{reserved_message}, wait time since queued was {waited_seconds:.0f}s"),
        EventSpec(REASON_ADMITTED, f"Admitted by ClusterQueue {queue}, wait time since reservation was 0s"),
    )
    status = {"admission": admission_status(assignment), "conditions": conditions}
    return WorkloadUpdate(workload_key(raw), raw, status, "admitted", queue, reserved_message, events)


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
        observed_generation=_generation(raw),
    )
    if not changed:
        return None
    events = (EventSpec(REASON_PENDING, message, "Warning" if reason == REASON_INADMISSIBLE else "Normal"),)
    return WorkloadUpdate(workload_key(raw), raw, {"conditions": conditions}, "pending", cluster_queue, message, events)


def _generation(raw: Mapping[str, Any]) -> int | None:
    generation = (raw.get("metadata") or {}).get("generation")
    return int(generation) if isinstance(generation, int) else None


def plan_admissions(state: LocalState, *, now: dt.datetime) -> list[WorkloadUpdate]:
    """Decide every pending workload of ``state`` (its snapshot gains the admissions) and return the writes."""
    updates: list[WorkloadUpdate] = []
    for blocked in state.blocked:
        update = pending_update(
            blocked.raw, reason=blocked.reason, message=blocked.message, now=now, cluster_queue=None
        )
        if update is not None:
            updates.append(update)
    raw_of = {workload.key: raw for items in state.pending.values() for workload, raw in items}
    now_seconds = now.timestamp()
    for decision in drain(state, now_seconds=now_seconds):
        raw = raw_of[decision.workload.key]
        queue = decision.workload.cluster_queue
        if isinstance(decision, Admit):
            waited = max(0.0, now_seconds - decision.workload.creation_time)
            updates.append(admit_update(raw, decision.assignment, now=now, waited_seconds=waited))
            continue
        reason = REASON_INADMISSIBLE if isinstance(decision, Wait) and decision.reason == "Inactive" else REASON_PENDING
        message = decision.message
        if isinstance(decision, Preempt):
            message = f"{decision.message.split('. Pending the preemption')[0]}; the agent does not preempt locally"
        update = pending_update(raw, reason=reason, message=message, now=now, cluster_queue=queue)
        if update is not None:
            updates.append(update)
    return updates


def drain(state: LocalState, *, now_seconds: float) -> list[Decision]:
    """Run scheduling cycles until every pending workload has a final decision (see the module docstring)."""
    snapshot = state.snapshot
    queues = {name: deque(workload for workload, _ in items) for name, items in state.pending.items()}
    retried: set[str] = set()
    final: list[Decision] = []
    while True:
        heads = [queue.popleft() for queue in queues.values() if queue]
        if not heads:
            return final
        for decision in run_cycle(snapshot, heads):
            workload = decision.workload
            if isinstance(decision, Admit):
                apply_admission(snapshot, decision, now=now_seconds)
                final.append(decision)
                continue
            if isinstance(decision, Wait) and decision.retry_immediately and workload.key not in retried:
                retried.add(workload.key)
                queues[workload.cluster_queue].appendleft(workload)
                continue
            final.append(decision)
            node = snapshot.cluster_queues.get(workload.cluster_queue)
            inactive = isinstance(decision, Wait) and decision.reason == "Inactive"
            if node is not None and node.spec.queueing_strategy == "StrictFIFO" and not inactive:
                queues[workload.cluster_queue].clear()  # nothing behind a StrictFIFO head is considered
