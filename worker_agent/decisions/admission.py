"""Local admission on a worker: what the agent writes when the shared core admits a dispatched Workload.

Draining the pending workloads through the core is shared with the manager (``federation.admission.api_drain``);
here each admission becomes one status write: ``status.admission`` plus ``QuotaReserved`` and ``Admitted``, or,
behind admission checks, only ``QuotaReserved`` with the checks listed as Pending (``worker_agent.decisions.checks``
admits later). For TAS flavors the caller passes a veto that places the pod sets
(``worker_agent.decisions.tas_admission``); their ``topologyAssignment`` goes into the same write, unless it waits
for a ProvisioningRequest check (two-phase TAS: ``delayedTopologyRequest: Pending``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from federation.admission.api_drain import (
    EventSpec,
    Veto,
    WorkloadUpdate,
    admission_status,
    admitted_note,
    drain,
    pending_update,
    reserved_conditions,
    reserved_message,
    unadmitted_reason,
)
from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import workload_key
from federation.admission.cycle import DEFAULT_CYCLE_CONFIG, CycleConfig
from federation.admission.decisions import Admit, Assignment, Preempt
from federation.admission.pods_ready import admission_blocked
from federation.admission.queue_metrics import queued_wait_seconds
from federation.api.workload import ADMITTED
from federation.conditions import set_condition, workload_generation
from federation.protocol import REASON_ADMITTED, REASON_QUOTA_RESERVED
from worker_agent.decisions.checks import DELAYED_PENDING, pending_checks
from worker_agent.decisions.preemption import (
    gated_update,
    has_closed_preemption_gate,
    victim_update,
)

Obj = dict[str, Any]


def admit_update(
    raw: Obj,
    assignment: Assignment,
    *,
    now: dt.datetime,
    waited_seconds: float,
    topology: Mapping[str, Mapping[str, Any]] | None = None,
    checks: Sequence[str] = (),
    delayed: Collection[str] = (),
) -> WorkloadUpdate:
    """``topology``: pod set name → its ``topologyAssignment`` (TAS pod sets only). With ``checks`` (the
    ClusterQueue's admission checks for the assigned flavors) only quota is reserved and the checks are listed as
    Pending (``worker_agent.decisions.checks`` admits later); ``delayed``: TAS pod sets whose topology is assigned
    once the checks are Ready (``delayedTopologyRequest: Pending``)."""
    queue = assignment.cluster_queue
    reserved = reserved_message(queue)
    generation = workload_generation(raw)
    conditions = reserved_conditions(raw, cluster_queue=queue, now=now)
    events: tuple[EventSpec, ...] = (
        EventSpec(REASON_QUOTA_RESERVED, f"{reserved}, wait time since queued was {waited_seconds:.0f}s"),
    )
    if not checks:
        conditions, _ = set_condition(
            conditions,
            condition_type=ADMITTED,
            status=True,
            reason=REASON_ADMITTED,
            message="The workload is admitted",
            now=now,
            observed_generation=generation,
        )
        events += (EventSpec(REASON_ADMITTED, admitted_note(queue, reserved_seconds=0)),)
    admission = admission_status(assignment)
    for item in admission["podSetAssignments"]:
        placed = (topology or {}).get(item["name"])
        if placed is not None:
            item["topologyAssignment"] = dict(placed)
        elif item["name"] in delayed:
            item["delayedTopologyRequest"] = DELAYED_PENDING
    status: dict[str, Any] = {"admission": admission, "conditions": conditions}
    if checks:
        status["admissionChecks"] = pending_checks(raw, checks, now=now)
    if checks:
        return WorkloadUpdate(workload_key(raw), raw, status, "reserved", queue, reserved, events)
    return WorkloadUpdate(workload_key(raw), raw, status, "admitted", queue, reserved, events)


def blocking_veto(holders: Sequence[Obj], then: Veto | None = None) -> Veto:
    """Kueue's ``waitForPodsReady.blockAdmission`` on this worker: ``then`` (e.g. the TAS placement's veto), refused
    first while any of ``holders`` (the Workloads holding quota here whose pods are not ready,
    ``decisions.run_limits.unready_quota_holder``) is, and once one admission went ahead in the pass
    (``federation.admission.pods_ready.admission_blocked``). Checks' second passes and node replacements are not
    admissions, so it holds none of them back, as in Kueue."""
    admitted = 0

    def veto(admit: Admit) -> str | None:
        nonlocal admitted
        blocked = admission_blocked(holders, admitted_in_pass=admitted)
        if blocked is not None:
            return blocked
        refused = then(admit) if then is not None else None
        if refused is None:
            admitted += 1
        return refused

    return veto


def plan_admissions(
    state: QuotaState,
    *,
    now: dt.datetime,
    veto: Veto | None = None,
    topology: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    checks: Callable[[Admit], Sequence[str]] | None = None,
    delayed: Mapping[str, Collection[str]] | None = None,
    workload_of: Callable[[str], Obj | None] = lambda _key: None,
    config: CycleConfig = DEFAULT_CYCLE_CONFIG,
) -> list[WorkloadUpdate]:
    """Decide every pending workload of ``state`` (its snapshot gains the admissions) and return the writes.

    ``veto`` may refuse an admission (a TAS pod set that does not fit); ``topology[workload key]`` holds the
    assignments the veto made, read after the drain. ``checks(admit)``: the admission checks the admission must
    pass (only quota is reserved then); ``delayed[workload key]``: its TAS pod sets placed after the checks.
    A workload that fits only by preempting evicts its victims (``workload_of(key)`` gives a victim's object)
    unless a preemption gate holds it (``worker_agent.decisions.preemption``). ``config``: Kueue's scheduler-wide
    switches (``fairSharing``).
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
    # the veto here is the TAS placer's (blockAdmission's refusal has a reason of its own: unadmitted_reason)
    for decision in drain(
        state, now_seconds=now_seconds, veto=veto, veto_reason="TopologyPlacementFailed", config=config
    ):
        raw = raw_of[decision.workload.key]
        queue = decision.workload.cluster_queue
        if isinstance(decision, Admit):
            waited = queued_wait_seconds(raw, now_seconds=now_seconds)
            placed = (topology or {}).get(decision.workload.key)
            updates.append(
                admit_update(
                    raw,
                    decision.assignment,
                    now=now,
                    waited_seconds=waited,
                    topology=placed,
                    checks=checks(decision) if checks is not None else (),
                    delayed=(delayed or {}).get(decision.workload.key, ()),
                )
            )
            continue
        reason = unadmitted_reason(decision)
        if isinstance(decision, Preempt):
            if has_closed_preemption_gate(raw):
                gated = gated_update(raw, now=now, cluster_queue=queue)
                if gated is not None:
                    updates.append(gated)
                continue
            for victim in decision.victims:
                victim_raw = workload_of(victim.key)
                if victim_raw is None:
                    continue
                evict = victim_update(victim_raw, victim, preemptor=decision.workload.key, now=now)
                if evict is not None:
                    updates.append(evict)
        update = pending_update(raw, reason=reason, message=decision.message, now=now, cluster_queue=queue)
        if update is not None:
            updates.append(update)
    return updates
