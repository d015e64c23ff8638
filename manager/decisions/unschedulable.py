"""What the manager Workload says of pods its worker cannot place (pure).

Why this module exists: the worker's kfed-agent marks a Workload copy ``kfed.io/PodsUnschedulable`` when the
kube-scheduler there cannot place its pods, or its Job controller cannot create them
(``worker_agent.decisions.unschedulable``; the copy's reason, ``Unschedulable`` or ``FailedCreate``, is kept).
Users look at the manager cluster, so the manager Workload carries the same condition, naming the worker, while the
Workload is sent there; once it finishes, a ``True`` one turns ``False``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.conditions import conditions_of, find_condition, set_condition
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION, REASON_SCHEDULED, REASON_UNSCHEDULABLE

Obj = Mapping[str, Any]
REASON_FINISHED = "WorkloadFinished"


@dataclass(frozen=True, slots=True)
class Shown:
    """The manager Workload's conditions to write, and whether the condition turned ``True`` (Warning Event)."""

    conditions: list[dict[str, Any]]
    unschedulable: bool
    message: str


def shown_unschedulable(
    manager_workload: Obj, remote_workload: Obj | None, *, worker: str, now: dt.datetime
) -> Shown | None:
    """The change the copy's condition calls for on the manager Workload, or None. A copy without it (or with it
    ``False``) clears a ``True`` one: the pods of this dispatch are placed, or none is known stuck."""
    if remote_workload is None:
        return None
    remote = find_condition(remote_workload, PODS_UNSCHEDULABLE_CONDITION)
    current = find_condition(manager_workload, PODS_UNSCHEDULABLE_CONDITION)
    stuck = remote is not None and remote.get("status") == "True"
    if not stuck and (current is None or current.get("status") != "True"):
        return None
    if stuck:
        assert remote is not None
        message = f"worker cluster {worker}: {remote.get('message') or ''}"
    else:
        message = f"no pod is unschedulable on worker cluster {worker}"
    conditions, changed = set_condition(
        conditions_of(manager_workload),
        condition_type=PODS_UNSCHEDULABLE_CONDITION,
        status=stuck,
        reason=str((remote or {}).get("reason") or REASON_UNSCHEDULABLE) if stuck else REASON_SCHEDULED,
        message=message,
        now=now,
    )
    return Shown(conditions=conditions, unschedulable=stuck, message=message) if changed else None


def cleared_on_finish(conditions: list[dict[str, Any]], *, now: dt.datetime) -> list[dict[str, Any]]:
    """``conditions`` with a ``True`` ``kfed.io/PodsUnschedulable`` turned ``False``: a finished Workload waits for
    no pod."""
    current = next((c for c in conditions if c.get("type") == PODS_UNSCHEDULABLE_CONDITION), None)
    if current is None or current.get("status") != "True":
        return conditions
    cleared, _ = set_condition(
        conditions,
        condition_type=PODS_UNSCHEDULABLE_CONDITION,
        status=False,
        reason=REASON_FINISHED,
        message="the workload finished",
        now=now,
    )
    return cleared
