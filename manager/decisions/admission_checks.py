"""Admission checks, as kfed's MultiKueue controller sees them: the checks' own ``Active`` condition, and the state
of every check listed on a Workload (which decides when its Job may start on a worker).

A MultiKueue check is active when its parameters name an existing MultiKueueConfig and at least one of that
config's clusters is connected; otherwise inactive with a reason and a message naming what is missing or which
clusters fail and why. An active check whose MultiKueueConfig has dispatch annotations kfed cannot apply says so,
with the reason ``InvalidDispatchPolicy`` when nothing else is wrong.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.api.workload import EVICTED, EVICTED_BY_ADMISSION_CHECK, EVICTED_BY_DEACTIVATION
from federation.conditions import (
    conditions_of,
    find_condition,
    format_time,
    parse_time,
    set_condition,
    workload_generation,
)
from federation.protocol import MULTIKUEUE_CONTROLLER
from manager.decisions.dispatch import worker_reasons
from manager.decisions.dispatch_policy import INVALID_DISPATCH_POLICY_REASON


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
    config_problems: Mapping[str, str] | None = None,
) -> CheckVerdict | None:
    """The ``Active`` condition for ``check``; None when the check belongs to another controller.

    ``config_problems``: per MultiKueueConfig, why its dispatch annotations are not applied
    (``manager.decisions.dispatch_policy``); the check stays active (the manager's policy applies) and says so."""
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
        return CheckVerdict(False, "NoUsableClusters", _unusable_clusters_message(clusters, failing))
    annotation_problem = (config_problems or {}).get(str(params.get("name", "")))
    if failing:
        verdict = CheckVerdict(True, "SomeActiveClusters", _unusable_clusters_message(clusters, failing))
    else:
        verdict = CheckVerdict(True, "Active", ACTIVE_CHECK_MESSAGE)
    if annotation_problem is None:
        return verdict
    reason = verdict.reason if failing else INVALID_DISPATCH_POLICY_REASON
    return CheckVerdict(True, reason, f"{verdict.message}; MultiKueueConfig {params.get('name')}: {annotation_problem}")


ACTIVE_CHECK_MESSAGE = "The admission check is active"


def missing_cluster_reason(name: str) -> str:
    """Why a worker that a MultiKueueConfig names but no MultiKueueCluster defines cannot be used (Kueue lists it
    under "Missing clusters")."""
    return f"no MultiKueueCluster {name}"


def _unusable_clusters_message(clusters: Sequence[str], failing: Mapping[str, str]) -> str:
    """Kueue's words (``Missing clusters: [a b], Inactive clusters: [c]``, in the config's order), then kfed's
    reason for each in parentheses."""
    missing = [name for name in clusters if failing.get(name) == missing_cluster_reason(name)]
    inactive = [name for name in clusters if name in failing and name not in missing]
    groups = (("Missing", missing), ("Inactive", inactive))
    kueue_words = ", ".join(f"{label} clusters: [{' '.join(names)}]" for label, names in groups if names)
    return f"{kueue_words} ({worker_reasons(list(failing.items()))})"


# -- the admission checks of one Workload -------------------------------------------------------------------------
#
# Kueue lists every admission check of the ClusterQueue in the Workload's ``status.admissionChecks`` when quota is
# reserved; the Workload is ``Admitted`` only when all of them are ``Ready``. kfed owns the MultiKueue check; the
# others belong to their own controllers (provisioning, custom gates), which set their state on the Workload. kfed
# starts the Job on a worker only once every other check is ``Ready``: until then no copy is created, and the
# MultiKueue check's message names the checks it waits for. A check in ``Rejected`` deactivates and evicts the
# Workload, a check in ``Retry`` evicts and requeues it, as Kueue does, before or after its Job was sent.

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
            updated["message"] = f'The workload was admitted on "{worker}"'  # Kueue's wording, name quoted
            if check.get("state") != CHECK_READY:
                updated["state"] = CHECK_READY
                updated["lastTransitionTime"] = stamp
        checks.append(updated)
    return checks, all(check.get("state") == CHECK_READY for check in checks)


@dataclass(frozen=True, slots=True)
class CheckEviction:
    """Kueue's answer to a check in ``Rejected`` (deactivate) or ``Retry`` (requeue): evict the workload. Only the
    ``Evicted`` condition is written here; the manager's eviction path then withdraws any copies, stops the Job and
    releases the quota (``manager.decisions.withdrawal``), as for every other eviction."""

    deactivate: bool
    """Set ``spec.active: false`` first (a check was Rejected)."""
    reason: str
    """Reason of the ``Evicted`` condition."""
    message: str
    event_reason: str
    event_message: str


def check_eviction(gate: CheckGate) -> CheckEviction | None:
    """The eviction a Rejected or Retry check asks for (Rejected wins); None when no check asks for one."""
    if gate.rejected:
        return _rejection(checks_in_state(gate.rejected, "Rejected"))
    if gate.retry:
        message = f"Evicted due to {checks_in_state(gate.retry, 'Retry')}"
        return CheckEviction(
            deactivate=False,
            reason=EVICTED_BY_ADMISSION_CHECK,
            message=message,
            event_reason=f"EvictedDueTo{EVICTED_BY_ADMISSION_CHECK}",
            event_message=f"{message}; the workload is withdrawn and requeued",
        )
    return None


def eviction_conditions(
    workload: Mapping[str, Any], eviction: CheckEviction, *, now: dt.datetime
) -> list[Mapping[str, Any]]:
    """The Workload's conditions with ``Evicted=True`` for ``eviction`` (its reservation is still held)."""
    generation = workload_generation(workload)
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=EVICTED,
        status=True,
        reason=eviction.reason,
        message=eviction.message,
        now=now,
        observed_generation=generation,
    )
    return list(conditions)


def owner_rejection(workload: Mapping[str, Any], *, owner_job: Mapping[str, Any] | None) -> str | None:
    """Kueue's MultiKueue check is Rejected for a Workload whose Job it cannot run on a worker, with Kueue's
    messages: no controller owner, an owner of a kind kfed has no adapter for (kfed runs batch/v1 Jobs), or a Job
    not managed by MultiKueue (its own cluster's Job controller runs it). ``owner_job``: the controlling Job as the
    manager's cache holds it; None while it is not known (or gone, and the garbage collector takes the Workload):
    no verdict then. None when the owner is a MultiKueue Job."""
    refs = (workload.get("metadata") or {}).get("ownerReferences") or ()
    owner = next((ref for ref in refs if ref.get("controller")), None)
    if owner is None:
        return "No multikueue adapter found"
    api_version, kind = str(owner.get("apiVersion") or ""), str(owner.get("kind") or "")
    if (api_version, kind) != ("batch/v1", "Job"):
        group_version = api_version if "/" in api_version else f"/{api_version}"  # the core group is empty
        return f'No multikueue adapter found for owner kind "{group_version}, Kind={kind}"'
    if owner_job is None:
        return None
    managed_by = str((owner_job.get("spec") or {}).get("managedBy") or "")
    if managed_by != MULTIKUEUE_CONTROLLER:
        return (
            "The owner is not managed by Kueue: "
            f'Expecting spec.managedBy to be "{MULTIKUEUE_CONTROLLER}" not "{managed_by}"'
        )
    return None


def owner_check_eviction(check: str, message: str) -> CheckEviction:
    """What Kueue does once its MultiKueue check ``check`` is Rejected with ``message``: deactivate and evict."""
    return _rejection(checks_in_state([(check, message)], "Rejected"))


def checks_in_state(checks: Sequence[tuple[str, str]], state: str) -> str:
    """Kueue's words for the checks (name, message) in ``state``, by name:
    ``AdmissionChecks in Rejected state: "a" (its message); "b"``."""
    parts = [f'"{name}" ({message})' if message else f'"{name}"' for name, message in sorted(checks)]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def _rejection(rejected: str) -> CheckEviction:
    """Kueue's deactivation for the Rejected checks ``rejected`` (:func:`checks_in_state`)."""
    return CheckEviction(
        deactivate=True,
        reason=f"{EVICTED_BY_DEACTIVATION}DueTo{EVICTED_BY_ADMISSION_CHECK}",
        message=f"The workload is deactivated due to {rejected}",
        event_reason="AdmissionCheckRejected",
        event_message=f"Deactivated due to {rejected}",
    )


def rejected_checks(
    workload: Mapping[str, Any], *, multikueue_checks: Collection[str], message: str, now: dt.datetime
) -> list[dict[str, Any]]:
    """The Workload's check list with kfed's checks ``Rejected`` with ``message``."""
    checks = []
    for check in check_states(workload):
        updated = dict(check)
        if check.get("name") in multikueue_checks:
            updated["message"] = message
            if check.get("state") != CHECK_REJECTED:
                updated["state"] = CHECK_REJECTED
                updated["lastTransitionTime"] = format_time(now)
        checks.append(updated)
    return checks


def worker_checks_message(remote_workload: Mapping[str, Any] | None, worker: str) -> str | None:
    """What the worker's own admission checks (e.g. a ProvisioningRequest) are doing with the copy, for the
    MultiKueue check's message on the manager; None when the worker has none left to pass."""
    if remote_workload is None:
        return None
    waiting = [c for c in check_states(remote_workload) if c.get("state") != CHECK_READY]
    if not waiting:
        return None
    parts = []
    for check in waiting:
        part = f"{check.get('name')} {check.get('state')}"
        if check.get("retryCount"):
            part += f" (retry {check.get('retryCount')})"
        if check.get("message"):
            part += f": {check.get('message')}"
        parts.append(part)
    return f'admission checks on "{worker}": ' + "; ".join(parts)


QUEUED_REPORT_SECONDS = 10.0
"""How long a copy may wait in its worker's queue, not admitted, before the manager's MultiKueue check says why (a
burst's copies wait a moment for the worker's quota as a matter of course)."""


def worker_queue_message(
    remote_workload: Mapping[str, Any] | None, worker: str, *, now: dt.datetime
) -> tuple[str | None, float | None]:
    """Why the worker has not admitted the copy, for the MultiKueue check's message on the manager, once the copy
    has waited :data:`QUEUED_REPORT_SECONDS` with ``QuotaReserved`` False and a message (the worker's queue says
    why: its quota, a flavor it cannot assign...); and, while it has waited less, the seconds until it is said.
    ``(None, None)`` for a copy that does not wait there (absent, or holding quota)."""
    reserved = find_condition(remote_workload, "QuotaReserved") if remote_workload is not None else None
    if reserved is None or reserved.get("status") != "False" or not reserved.get("message"):
        return None, None
    since = reserved.get("lastTransitionTime")
    waited = (now - parse_time(str(since))).total_seconds() if since else QUEUED_REPORT_SECONDS
    if waited < QUEUED_REPORT_SECONDS:
        return None, QUEUED_REPORT_SECONDS - waited
    return f'not admitted yet in worker cluster "{worker}": {reserved.get("message")}', None


def worker_rejection(remote_workload: Mapping[str, Any] | None, worker: str) -> CheckEviction | None:
    """The copy was deactivated on the worker because one of the worker's admission checks was Rejected: the
    manager deactivates the workload too, saying why (re-dispatching it would be rejected again)."""
    if remote_workload is None or (remote_workload.get("spec") or {}).get("active", True) is not False:
        return None
    rejected = [c for c in check_states(remote_workload) if c.get("state") == CHECK_REJECTED]
    if not rejected:
        return None
    named = [(str(c.get("name")), str(c.get("message") or "")) for c in rejected]
    return _rejection(f'{checks_in_state(named, "Rejected")} in worker cluster "{worker}"')
