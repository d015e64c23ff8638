"""Local admission on a worker: what the agent writes when the shared core admits a dispatched Workload.

Draining the pending workloads through the core is shared with the manager (``federation.admission.api_drain``);
here each admission becomes one status write: ``status.admission`` plus ``QuotaReserved`` and ``Admitted`` (the
worker has no admission checks). For TAS flavors the caller passes a veto that places the pod sets
(``worker_agent.decisions.tas_admission``); their ``topologyAssignment`` goes into the same write.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.admission.api_drain import (
    EventSpec,
    Veto,
    WorkloadUpdate,
    admission_status,
    drain,
    pending_update,
    workload_generation,
)
from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import workload_key
from federation.admission.decisions import Admit, Assignment, Preempt, Wait
from federation.api.workload import ADMITTED, QUOTA_RESERVED
from federation.conditions import conditions_of, set_condition
from federation.protocol import REASON_ADMITTED, REASON_INADMISSIBLE, REASON_PENDING, REASON_QUOTA_RESERVED

Obj = dict[str, Any]


def admit_update(
    raw: Obj,
    assignment: Assignment,
    *,
    now: dt.datetime,
    waited_seconds: float,
    topology: Mapping[str, Mapping[str, Any]] | None = None,
) -> WorkloadUpdate:
    """``topology``: pod set name → its ``topologyAssignment`` (TAS pod sets only)."""
    queue = assignment.cluster_queue
    reserved_message = f"Quota reserved in ClusterQueue {queue}"
    generation = workload_generation(raw)
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
    admission = admission_status(assignment)
    for item in admission["podSetAssignments"]:
        placed = (topology or {}).get(item["name"])
        if placed is not None:
            item["topologyAssignment"] = dict(placed)
    status = {"admission": admission, "conditions": conditions}
    return WorkloadUpdate(workload_key(raw), raw, status, "admitted", queue, reserved_message, events)


def plan_admissions(
    state: QuotaState,
    *,
    now: dt.datetime,
    veto: Veto | None = None,
    topology: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
) -> list[WorkloadUpdate]:
    """Decide every pending workload of ``state`` (its snapshot gains the admissions) and return the writes.

    ``veto`` may refuse an admission (a TAS pod set that does not fit); ``topology[workload key]`` holds the
    assignments the veto made, read after the drain.
    """
    updates: list[WorkloadUpdate] = []
    for blocked in state.blocked:
        update = pending_update(
            blocked.raw, reason=blocked.reason, message=blocked.message, now=now, cluster_queue=None
        )
        if update is not None:
            updates.append(update)
    raw_of = {workload.key: raw for items in state.pending.values() for workload, raw in items}
    now_seconds = now.timestamp()
    for decision in drain(state, now_seconds=now_seconds, veto=veto):
        raw = raw_of[decision.workload.key]
        queue = decision.workload.cluster_queue
        if isinstance(decision, Admit):
            waited = max(0.0, now_seconds - decision.workload.creation_time)
            placed = (topology or {}).get(decision.workload.key)
            updates.append(admit_update(raw, decision.assignment, now=now, waited_seconds=waited, topology=placed))
            continue
        reason = REASON_INADMISSIBLE if isinstance(decision, Wait) and decision.reason == "Inactive" else REASON_PENDING
        message = decision.message
        if isinstance(decision, Preempt):
            message = f"{decision.message.split('. Pending the preemption')[0]}; the agent does not preempt locally"
        update = pending_update(raw, reason=reason, message=message, now=now, cluster_queue=queue)
        if update is not None:
            updates.append(update)
    return updates
