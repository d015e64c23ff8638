"""Kueue's reset of a Workload's admission checks when its reservation goes (pure; manager and agent).

Why this module exists: both kfed-manager (its Workloads) and kfed-agent (the copies) release reservations, and a
user, a dashboard or an admission check controller reads what the checks say afterwards. Kueue (``evict.go``,
``resetChecksOnEviction``) leaves a ``Pending`` check as it is and turns every other one into ``Pending`` saying
what it was ("Reset to Pending after eviction. Previously: Rejected"), keeping ``requeueAfterSeconds``; a ``Retry``
counts one more retry (``retryCount``), and the others lose their count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.conditions import Conditions, format_time, set_condition
from federation.protocol import REASON_PENDING_EVALUATION

PENDING, RETRY = "Pending", "Retry"


def checks_reset_on_eviction(checks: Iterable[Mapping[str, Any]], *, now: dt.datetime) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for check in checks:
        state = check.get("state")
        if state == PENDING:
            out.append(dict(check))
            continue
        reset: dict[str, Any] = {
            "name": check.get("name"),
            "state": PENDING,
            "message": f"Reset to Pending after eviction. Previously: {state}",
            "lastTransitionTime": format_time(now),
        }
        if check.get("requeueAfterSeconds") is not None:
            reset["requeueAfterSeconds"] = check["requeueAfterSeconds"]
        if state == RETRY:
            reset["retryCount"] = int(check.get("retryCount") or 0) + 1
        out.append(reset)
    return out


def released_terms(workload: Mapping[str, Any], message: str) -> tuple[str, str]:
    """Kueue v0.20's ``QuotaReserved=False`` (reason, message) once an eviction released ``workload``'s quota:
    ``PendingEvaluation`` with the eviction's ``message`` (it is back in its queue), or ``Deactivated``, "The workload
    is deactivated", for one that is not active (it waits for reactivation, not for the scheduler)."""
    if (workload.get("spec") or {}).get("active") is False:
        return "Deactivated", "The workload is deactivated"
    return REASON_PENDING_EVALUATION, message


NO_RESERVATION = ("NoReservation", "The workload has no reservation")
"""Kueue v0.20's ``Admitted=False`` (reason, message) for a workload without a reservation: a pending one, and one
whose reservation an eviction released, also when its checks were reset with it (v0.19 said
``NoReservationUnsatisfiedChecks`` for a workload with checks; v0.20's default gates do not)."""


def without_reservation(
    conditions: Sequence[Mapping[str, Any]], *, now: dt.datetime, observed_generation: int | None
) -> Conditions:
    """``conditions`` with ``Admitted=False`` :data:`NO_RESERVATION`."""
    reason, message = NO_RESERVATION
    updated, _ = set_condition(
        conditions,
        condition_type="Admitted",
        status=False,
        reason=reason,
        message=message,
        now=now,
        observed_generation=observed_generation,
    )
    return updated
