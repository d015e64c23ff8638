"""Admission checks, as kfed's MultiKueue controller sees them: the checks' own ``Active`` condition, and the state
of every check listed on a Workload (which decides when its Job may start on a worker).

A MultiKueue check is active when its parameters name an existing MultiKueueConfig and at least one of that
config's clusters is connected; otherwise inactive with a reason and a message naming what is missing or which
clusters fail and why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.api.workload import (
    ADMITTED,
    EVICTED,
    EVICTED_BY_ADMISSION_CHECK,
    EVICTED_BY_DEACTIVATION,
    QUOTA_RESERVED,
    REQUEUED,
)
from federation.conditions import conditions_of, format_time, set_condition
from federation.protocol import MULTIKUEUE_CONTROLLER, REASON_PENDING


@dataclass(frozen=True, slots=True)
class CheckVerdict:
    active: bool
    reason: str
    message: str


def multikueue_check_verdict(
    check: Mapping[str, Any],
    *,
    configs: Mapping[str, Mapping[str, Any]],
    cluster_problems: Mapping[str, str],
) -> CheckVerdict | None:
    """The ``Active`` condition for ``check``; None when the check belongs to another controller."""
    spec = check.get("spec") or {}
    if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
        return None
    params = spec.get("parameters") or {}
    if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != "MultiKueueConfig":
        return CheckVerdict(False, "BadParametersRef", "parameters must reference a kueue.x-k8s.io MultiKueueConfig")
    config = configs.get(str(params.get("name", "")))
    if config is None:
        return CheckVerdict(False, "BadConfig", f"MultiKueueConfig {params.get('name')} not found")
    clusters = list((config.get("spec") or {}).get("clusters") or ())
    failing = {name: cluster_problems[name] for name in clusters if name in cluster_problems}
    if len(failing) == len(clusters):
        detail = "; ".join(f"{name}: {problem}" for name, problem in failing.items())
        return CheckVerdict(False, "NoUsableClusters", f"no usable worker cluster ({detail})")
    if failing:
        names = ", ".join(sorted(failing))
        return CheckVerdict(True, "SomeActiveClusters", f"the admission check is active; inactive clusters: {names}")
    return CheckVerdict(True, "Active", "the admission check is active")


# -- the admission checks of one Workload -------------------------------------------------------------------------
#
# Kueue lists every admission check of the ClusterQueue in the Workload's ``status.admissionChecks`` when quota is
# reserved; the Workload is ``Admitted`` only when all of them are ``Ready``. kfed owns the MultiKueue check; the
# others belong to their own controllers (provisioning, custom gates), which set their state on the Workload. kfed
# starts the Job on a worker only once every other check is ``Ready``: until then no copy is created, and the
# MultiKueue check's message names the checks it waits for. A check in ``Rejected`` deactivates the Workload and a
# check in ``Retry`` releases its quota and requeues it, as Kueue does — while nothing was sent to a worker yet.

CHECK_PENDING, CHECK_READY, CHECK_RETRY, CHECK_REJECTED = "Pending", "Ready", "Retry", "Rejected"


def multikueue_check_names(admission_checks: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the AdmissionChecks that kfed (the MultiKueue controller) owns."""
    return frozenset(
        str(check["metadata"]["name"])
        for check in admission_checks
        if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER
    )


@dataclass(frozen=True, slots=True)
class CheckGate:
    """What the Workload's other (non-MultiKueue) admission checks say about starting its Job on a worker."""

    pending: tuple[str, ...] = ()
    retry: tuple[tuple[str, str], ...] = ()
    """(name, message) of checks in ``Retry``."""
    rejected: tuple[tuple[str, str], ...] = ()
    """(name, message) of checks in ``Rejected``."""

    @property
    def open(self) -> bool:
        return not (self.pending or self.retry or self.rejected)


def check_states(workload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((workload.get("status") or {}).get("admissionChecks") or ())


def dispatch_gate(workload: Mapping[str, Any], *, multikueue_checks: Collection[str]) -> CheckGate:
    """Which of the Workload's checks other than kfed's own hold its dispatch back, and how."""
    pending: list[str] = []
    retry: list[tuple[str, str]] = []
    rejected: list[tuple[str, str]] = []
    for check in check_states(workload):
        name, state = str(check.get("name", "")), check.get("state")
        if name in multikueue_checks or state == CHECK_READY:
            continue
        if state == CHECK_REJECTED:
            rejected.append((name, str(check.get("message") or "")))
        elif state == CHECK_RETRY:
            retry.append((name, str(check.get("message") or "")))
        else:
            pending.append(name)
    return CheckGate(tuple(pending), tuple(retry), tuple(rejected))


def dispatched_message(worker: str) -> str:
    return f"Dispatched to worker cluster {worker}"


def waiting_message(pending: Sequence[str], worker: str) -> str:
    names = ", ".join(pending)
    return f"Waiting for admission check(s) {names} to be Ready before dispatching to worker cluster {worker}"


def with_multikueue_message(
    workload: Mapping[str, Any], *, multikueue_checks: Collection[str], message: str
) -> list[dict[str, Any]] | None:
    """The Workload's check list with kfed's checks carrying ``message``; None when they already do."""
    checks = [dict(check) for check in check_states(workload)]
    changed = False
    for check in checks:
        if check.get("name") in multikueue_checks and check.get("message") != message:
            check["message"] = message
            changed = True
    return checks if changed else None


def admitted_checks(
    workload: Mapping[str, Any], *, multikueue_checks: Collection[str], worker: str, now: dt.datetime
) -> tuple[list[dict[str, Any]], bool]:
    """The check list once ``worker`` admitted the copy (only kfed's checks become Ready), and whether every check
    is now Ready — Kueue's condition for ``Admitted``."""
    stamp = format_time(now)
    checks = []
    for check in check_states(workload):
        updated = dict(check)
        if check.get("name") in multikueue_checks:
            updated["message"] = f"The workload got reservation on {worker}"
            if check.get("state") != CHECK_READY:
                updated["state"] = CHECK_READY
                updated["lastTransitionTime"] = stamp
        checks.append(updated)
    return checks, all(check.get("state") == CHECK_READY for check in checks)


def _reset_checks(workload: Mapping[str, Any], now: dt.datetime) -> list[dict[str, Any]]:
    stamp = format_time(now)
    reset = []
    for check in check_states(workload):
        state = check.get("state")
        if state == CHECK_PENDING:
            reset.append(dict(check))
            continue
        reset.append(
            {
                **check,
                "state": CHECK_PENDING,
                "message": f"Reset to Pending after eviction. Previously: {state}",
                "lastTransitionTime": stamp,
            }
        )
    return reset


@dataclass(frozen=True, slots=True)
class Release:
    """Give back a Workload's quota because of its admission checks (nothing was sent to a worker yet)."""

    deactivate: bool
    """Set ``spec.active: false`` first (a check was Rejected); otherwise the Workload is requeued."""
    status: dict[str, Any]
    event_reason: str
    event_message: str
    message: str


def release_for_checks(workload: Mapping[str, Any], gate: CheckGate, *, now: dt.datetime) -> Release | None:
    """Kueue's answer to a Rejected (deactivate) or Retry (evict and requeue) check; None if neither applies."""
    if gate.rejected:
        names = ", ".join(name for name, _ in gate.rejected)
        message = f"The workload is deactivated due to Admission check(s): {names}, were rejected"
        first, first_message = gate.rejected[0]
        event_reason = "AdmissionCheckRejected"
        event_message = f"Deactivating workload because AdmissionCheck for {first} was Rejected: {first_message}"
        evicted_reason = f"{EVICTED_BY_DEACTIVATION}DueTo{EVICTED_BY_ADMISSION_CHECK}"
    elif gate.retry:
        names = ", ".join(name for name, _ in gate.retry)
        message = f"At least one admission check is false: {names} asked to retry"
        event_reason = EVICTED
        event_message = f"{message}; quota released, the workload is requeued"
        evicted_reason = EVICTED_BY_ADMISSION_CHECK
    else:
        return None
    conditions: Sequence[Mapping[str, Any]] = conditions_of(workload)
    generation = (workload.get("metadata") or {}).get("generation")
    observed = generation if isinstance(generation, int) else None
    changes: list[tuple[str, bool, str]] = [
        (EVICTED, True, evicted_reason),
        (QUOTA_RESERVED, False, REASON_PENDING),
        (ADMITTED, False, "NoReservation"),
    ]
    if not gate.rejected:
        changes.append((REQUEUED, True, EVICTED_BY_ADMISSION_CHECK))
    for condition_type, status, reason in changes:
        if condition_type == ADMITTED and not any(c.get("type") == ADMITTED for c in conditions):
            continue  # never admitted: nothing to withdraw
        conditions, _ = set_condition(
            conditions,
            condition_type=condition_type,
            status=status,
            reason=reason,
            message=message,
            now=now,
            observed_generation=observed,
        )
    status_patch: dict[str, Any] = {
        "conditions": list(conditions),
        "admission": None,
        "nominatedClusterNames": None,
        "admissionChecks": _reset_checks(workload, now),
    }
    return Release(bool(gate.rejected), status_patch, event_reason, event_message, message)
