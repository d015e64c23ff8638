"""Drain a cluster's pending Workloads through the admission core, and the status writes that follow.

Shared by the manager and the agent. The core decides one head per ClusterQueue per cycle (Kueue's scheduler);
draining runs cycles until every pending workload has a decision, applying each admission to the snapshot before
the next cycle, so one pass admits everything that fits in priority/creation order (a caller may stop it between
cycles, and its next pass goes on from what this one wrote). A ``StrictFIFO`` queue stops
at its first workload that does not fit; a ``BestEffortFIFO`` queue moves on to the next. A head that lost a race
inside a cycle is retried once in the next cycle.

What to write for a pending verdict (``QuotaReserved=False`` with Kueue's reason and the core's message) is here
too, and is returned only when it differs from what the workload already says, so an unchanged verdict costs no
API call. What to write for an admission differs by side (the agent admits; the manager reserves and dispatches).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import workload_key
from federation.admission.check_reset import without_reservation
from federation.admission.cycle import DEFAULT_CYCLE_CONFIG, CycleConfig, apply_admission, run_cycle
from federation.admission.decisions import Admit, Assignment, Decision, PendingReason, Preempt, Wait
from federation.admission.model import Workload
from federation.admission.parking import ParkingLot, Stamp, Verdict, tree_stamps
from federation.admission.pods_ready import BLOCK_ADMISSION_MESSAGE, REASON_WAITING_FOR_PODS_READY
from federation.admission.snapshot import ClusterQueueNode
from federation.api.workload import BLOCKED_ON_PREEMPTION_GATES, EVICTED, PREEMPTED, QUOTA_RESERVED
from federation.conditions import Conditions, conditions_of, find_condition, set_condition, workload_generation
from federation.protocol import REASON_QUOTA_RESERVED, REASON_WAITING_FOR_PREEMPTED
from federation.quantity import format_amount

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


ENDED_BY_RESERVATION = (EVICTED, PREEMPTED, BLOCKED_ON_PREEMPTION_GATES)
"""The conditions a new quota reservation ends, as Kueue's ``SetQuotaReservation`` does."""


def reserved_message(cluster_queue: str) -> str:
    """Kueue's ``QuotaReserved`` message (its Event starts with it too)."""
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def admitted_note(cluster_queue: str, *, reserved_seconds: float) -> str:
    """Kueue's ``Admitted`` Event: the ClusterQueue and the whole seconds since the quota was reserved (0 when both
    came in one write; since v0.20 the real wait when admission checks came between, #15829)."""
    return (
        f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was {max(0.0, reserved_seconds):.0f}s"
    )


def reserved_conditions(raw: Obj, *, cluster_queue: str, now: dt.datetime) -> Conditions:
    """The workload's conditions once it holds quota in ``cluster_queue``: ``QuotaReserved=True`` ("Quota reserved in
    ClusterQueue …"), and each condition of ``ENDED_BY_RESERVATION`` that was True turned False with reason
    ``QuotaReserved`` and its old message after "Previously: " (as Kueue shows what the last eviction was)."""
    generation = workload_generation(raw)
    conditions, _ = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=True,
        reason=REASON_QUOTA_RESERVED,
        message=reserved_message(cluster_queue),
        now=now,
        observed_generation=generation,
    )
    for ended in ENDED_BY_RESERVATION:
        previous = find_condition(raw, ended)
        if previous is not None and previous.get("status") == "True":
            conditions, _ = set_condition(
                conditions,
                condition_type=ended,
                status=False,
                reason=REASON_QUOTA_RESERVED,
                message=f"Previously: {previous.get('message', '')}",
                now=now,
                observed_generation=generation,
            )
    return conditions


def unadmitted_reason(decision: Wait | Preempt) -> str:
    """Kueue v0.20's ``QuotaReserved=False`` reason (and Warning Event reason) for a decision that keeps its
    workload pending: the wait's own, ``WaitingForPodsReady`` while ``waitForPodsReady.blockAdmission`` holds it, and
    ``WaitingForPreemptedWorkloads`` for a preemptor whose victims are being evicted."""
    if decision.message == BLOCK_ADMISSION_MESSAGE:
        return REASON_WAITING_FOR_PODS_READY
    if isinstance(decision, Preempt):
        return REASON_WAITING_FOR_PREEMPTED
    return decision.reason


def pending_update(
    raw: Obj, *, reason: str, message: str, now: dt.datetime, cluster_queue: str | None
) -> WorkloadUpdate | None:
    """``QuotaReserved=False`` with ``reason``/``message``, and ``Admitted=False`` ``NoReservation`` (Kueue v0.20
    writes it once a workload has a ``QuotaReserved`` condition); None when the workload already says exactly that."""
    generation = workload_generation(raw)
    conditions, changed = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=False,
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )
    if not changed:
        return None
    conditions = without_reservation(conditions, now=now, observed_generation=generation)
    events = (EventSpec(reason, message, "Warning"),)  # Kueue's scheduler records each as a Warning, by its reason
    return WorkloadUpdate(workload_key(raw), raw, {"conditions": conditions}, "pending", cluster_queue, message, events)


def drain(
    state: QuotaState,
    *,
    now_seconds: float,
    veto: Veto | None = None,
    veto_reason: PendingReason = "WaitingForQuota",
    config: CycleConfig = DEFAULT_CYCLE_CONFIG,
    parking: ParkingLot | None = None,
    workers: object = None,
    stop: Callable[[], bool] | None = None,
) -> list[Decision]:
    """Run scheduling cycles until every pending workload has a final decision (see the module docstring), or until
    ``stop()`` says so: it is asked before every cycle but the first, so a pass always decides something. The
    Workloads a stopped drain did not reach get no decision: neither parked nor written, they are the next pass's.

    ``config`` holds the scheduler-wide switches (fair sharing and its preemption strategies, Kueue's
    ``fairSharing`` configuration).

    ``veto(admit)`` may refuse an admission the core would make (the manager does when no worker has room): it
    returns why, the workload gets a ``Wait`` with that message and ``veto_reason``, and its usage never enters the
    snapshot.

    With ``parking`` (kept by the caller across passes), Workloads parked by an earlier pass get no decision unless
    something that could change their verdict happened (``federation.admission.parking``); ``workers`` is the
    caller's stamp of what a veto depends on (a vetoed Workload wakes when it changes).
    """
    snapshot = state.snapshot
    stamps: dict[str, Stamp] = {}
    if parking is not None:
        stamps = tree_stamps(snapshot)
        parking.wake(stamps=stamps, workers=workers, now=now_seconds)
    queues: dict[str, deque[Workload]] = {}
    for name, items in state.pending.items():
        if parking is None:
            queues[name] = deque(workload for workload, _ in items)
            continue
        node = snapshot.cluster_queues.get(name)
        strict = node is not None and node.spec.queueing_strategy == "StrictFIFO"
        queues[name] = deque(parking.active(name, items, strict=strict))
    retried: set[str] = set()
    final: list[Decision] = []
    verdicts: list[tuple[Wait, int, bool, bool]] = []
    admitted_roots: dict[int, tuple[ClusterQueueNode, int]] = {}
    cycle = 0
    while True:
        heads = [queue.popleft() for queue in queues.values() if queue]
        if not heads or (cycle and stop is not None and stop()):
            break
        cycle += 1
        for proposed in run_cycle(snapshot, heads, config=config):
            workload = proposed.workload
            decision: Decision = proposed
            vetoed = False
            if isinstance(proposed, Admit):
                refused = veto(proposed) if veto is not None else None
                if refused is None:
                    apply_admission(snapshot, proposed, now=now_seconds)
                    final.append(proposed)
                    node = snapshot.cluster_queues[workload.cluster_queue]
                    admitted_roots[id(snapshot.root_of(node))] = (node, cycle)
                    continue
                decision = Wait(workload=workload, reason=veto_reason, message=refused)
                vetoed = True
            if isinstance(decision, Wait) and decision.retry_immediately and workload.key not in retried:
                retried.add(workload.key)
                queues[workload.cluster_queue].appendleft(workload)
                continue
            final.append(decision)
            node = snapshot.cluster_queues.get(workload.cluster_queue)
            inactive = isinstance(decision, Wait) and decision.reason in ("Misconfigured", "Suspended")
            strict = node is not None and node.spec.queueing_strategy == "StrictFIFO" and not inactive
            if isinstance(decision, Wait):
                verdicts.append((decision, cycle, vetoed, strict))
            if strict:
                queues[workload.cluster_queue].clear()  # nothing behind a StrictFIFO head is considered
    if parking is not None:
        _settle(parking, state, verdicts, admitted_roots, stamps=stamps, now_seconds=now_seconds)
    return final


def _settle(
    parking: ParkingLot,
    state: QuotaState,
    verdicts: list[tuple[Wait, int, bool, bool]],
    admitted_roots: dict[int, tuple[ClusterQueueNode, int]],
    *,
    stamps: dict[str, Stamp],
    now_seconds: float,
) -> None:
    """Park the pass's verdicts under the trees' stamps as the pass left them (only trees it admitted into changed)."""
    snapshot = state.snapshot
    # Only a Cohort makes an admission matter to a parked Workload of another ClusterQueue or an earlier verdict:
    # it can turn its ClusterQueue into a borrower (its Workloads become reclaimable) or raise its fair share. In a
    # ClusterQueue of its own, a later admission only took quota that was free when the verdict was made.
    admitted_in_cycle = {
        member.name: cycle
        for node, cycle in admitted_roots.values()
        if snapshot.root_of(node) is not node
        for member in snapshot.tree_members(node)
    }
    queues = {decision.workload.cluster_queue for decision, *_ in verdicts}
    raw_of = {workload.key: raw for name in queues for workload, raw in state.pending.get(name, ())}
    parking.settle(
        pending=state.pending,
        verdicts=[
            Verdict(decision.workload, raw_of.get(decision.workload.key, {}), decision, cycle, vetoed, strict)
            for decision, cycle, vetoed, strict in verdicts
        ],
        admitted_in_cycle=admitted_in_cycle,
        stamps={**stamps, **tree_stamps(snapshot, only=[node.name for node, _ in admitted_roots.values()])},
        now=now_seconds,
    )
