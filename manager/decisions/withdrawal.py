"""When a dispatched workload must be taken back from its worker, and the status that requeues it (pure).

A dispatch can stop making progress for reasons outside kfed: someone deletes the Workload or Job copy in the
worker after it was admitted there, or a Job of the same namespace/name that kfed did not create already occupies
the worker. Each of these would otherwise leave the Job stuck forever. The answer is always the same: take every
copy of ours off that worker (the caller confirms they are gone before requeueing, so the Job never runs on two
workers at once), release the manager's quota reservation, and put the workload back in its queue with
``Evicted``/``Requeued`` conditions saying why — Kueue's eviction by an admission check (reason
``AdmissionCheck``). A worker that holds a foreign Job of that name is remembered on the Workload (annotation
``kfed.io/excluded-clusters``), so the next dispatch goes elsewhere, or waits with that reason; one that refused to
create a copy (403 Forbidden) is avoided the same way for a while (``manager.decisions.refusals``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from federation.admission.check_reset import checks_reset_on_eviction, released_terms, without_reservation
from federation.admission.deactivation import deactivation_eviction
from federation.admission.eviction_counts import scheduling_stats_after
from federation.admission.execution_time import ACCUMULATED_FIELD, accumulated_on_release
from federation.admission.requeued import requeued_on_release
from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.conditions import (
    conditions_of,
    find_condition,
    format_time,
    is_true,
    parse_time,
    set_condition,
    workload_generation,
)
from federation.protocol import (
    REASON_OUT_OF_SYNC,
    REASON_OWNER_NOT_FOUND,
    REASON_PENDING_EVALUATION,
    SENT_AT_ANNOTATION,
)
from manager.decisions.refusals import refusal_end, refused_message, refused_until, refused_workers
from manager.decisions.sync import job_finish
from manager.decisions.worker_lists import workers_in

Obj = Mapping[str, Any]

EXCLUDED_CLUSTERS_ANNOTATION = "kfed.io/excluded-clusters"
"""Comma-separated worker clusters this Workload must not be dispatched to (a foreign Job holds its name there)."""

WITHDRAWN_FROM_ANNOTATION = "kfed.io/withdrawn-from"
"""Comma-separated worker clusters this Workload was withdrawn from: the next dispatch prefers the others."""

REASON_EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
"""Kueue's eviction reason when an admission check (here MultiKueue) takes the reservation back."""


FOREIGN_JOB_REASON = "a Job of the same name that kfed did not create is there"


def exclusions(workload: Obj, *, now: dt.datetime) -> dict[str, str]:
    """The workers this Workload must not be dispatched to at ``now``, each with why: a foreign Job holds its name
    there, or its refusal of a copy still holds (``manager.decisions.refusals``)."""
    found = dict.fromkeys(workers_in(workload, EXCLUDED_CLUSTERS_ANNOTATION), FOREIGN_JOB_REASON)
    until = refusal_end(workload, now=now)
    if until is not None:
        why = f"it refused kfed-manager's copy of this Workload (403 Forbidden); tried again after {format_time(until)}"
        found.update(dict.fromkeys(refused_workers(workload, now=now) - found.keys(), why))
    return found


def withdrawn_from(workload: Obj) -> frozenset[str]:
    return workers_in(workload, WITHDRAWN_FROM_ANNOTATION)


def exclusion_annotation(workload: Obj, worker: str) -> str:
    """The value of :data:`EXCLUDED_CLUSTERS_ANNOTATION` that adds ``worker`` to it."""
    return ",".join(sorted(workers_in(workload, EXCLUDED_CLUSTERS_ANNOTATION) | {worker}))


def withdrawn_annotation(workload: Obj, worker: str) -> str:
    """The annotation value that adds ``worker`` to the workers the workload was withdrawn from."""
    return ",".join(sorted(withdrawn_from(workload) | {worker}))


def foreign_job_message(namespace: str, job_name: str, worker: str) -> str:
    return (
        f'Job {namespace}/{job_name} already exists in worker cluster "{worker}" and was not created by kfed; '
        "it is left untouched and the workload is dispatched elsewhere (to allow that worker again, remove it "
        f"from the Workload's {EXCLUDED_CLUSTERS_ANNOTATION} annotation)"
    )


def dispatch_time_left(remote_workload: Obj | None, *, now: dt.datetime, timeout: float) -> float | None:
    """Seconds left for the worker to admit our Workload copy (counted from when kfed-manager sent it, by its own
    clock: ``SENT_AT_ANNOTATION``; for a copy without one, from its ``creationTimestamp``, the worker's clock), or
    None when there is no copy yet (other admission checks may still be pending), the worker has reserved quota for
    it, or the worker's own admission checks are at work on it (they end in Ready or Rejected themselves, with backoff
    between retries)."""
    if remote_workload is None or is_true(remote_workload, "QuotaReserved"):
        return None
    if (remote_workload.get("status") or {}).get("admissionChecks"):
        return None
    since = _sent_at(remote_workload.get("metadata") or {})
    if since is None:
        return None
    return timeout - (now - since).total_seconds()


def _sent_at(meta: Obj) -> dt.datetime | None:
    """When the copy was sent: its ``SENT_AT_ANNOTATION``, else (a copy without one, or one edited into something
    that is not a time) its ``creationTimestamp``."""
    for text in ((meta.get("annotations") or {}).get(SENT_AT_ANNOTATION), meta.get("creationTimestamp")):
        if not text:
            continue
        try:
            moment = parse_time(str(text))
        except ValueError:
            continue
        if moment.tzinfo is not None:
            return moment
    return None


def worker_lost_time_left(since: dt.datetime | None, *, now: dt.datetime, timeout: float) -> float:
    """Seconds until a worker unreachable since ``since`` counts as lost (``timeout`` when the start is unknown)."""
    if since is None:
        return timeout
    return timeout - (now - since).total_seconds()


UNREACHABLE_REPORT_SECONDS = 10.0
"""A worker unreachable this long (or a third of the worker-lost timeout, if less) is named on each Workload it
holds: a shorter blip says nothing there (its MultiKueueCluster shows it)."""


def unreachable_report_in(since: dt.datetime | None, *, now: dt.datetime, timeout: float) -> float:
    """Seconds until a Workload held by a worker unreachable since ``since`` is told why it waits (0: now)."""
    if since is None:
        return min(UNREACHABLE_REPORT_SECONDS, timeout / 3)
    return max(0.0, min(UNREACHABLE_REPORT_SECONDS, timeout / 3) - (now - since).total_seconds())


def _holdup(copy: Obj) -> str:
    """What keeps one copy from going: its pods still being deleted (foreground), finalizers someone else put there."""
    meta = copy.get("metadata") or {}
    what = f"{copy.get('kind') or 'copy'} {meta.get('namespace')}/{meta.get('name')}"
    if not meta.get("deletionTimestamp"):
        return f"{what} is not deleted yet"
    finalizers = [str(f) for f in meta.get("finalizers") or ()]
    holding = []
    if "foregroundDeletion" in finalizers:
        status = copy.get("status") or {}
        pods = int(status.get("active") or 0) + int(status.get("terminating") or 0)
        holding.append(
            f"its pods are being deleted ({pods} left)" if copy.get("kind") == "Job" else "its dependents are"
        )
    others = [f for f in finalizers if f != "foregroundDeletion"]
    if others:
        holding.append("finalizers " + ", ".join(others) + " hold it")
    return f"{what} is being deleted" + (": " + " and ".join(holding) if holding else "")


LINGER_REPORT_SLACK_SECONDS = 30.0
"""How long past its pods' termination grace period a withdrawn copy may take to go before the wait is reported."""


def linger_report_after(copies: Sequence[Obj], *, timeout: float) -> float:
    """Seconds a withdrawal may wait for its copies before it is reported (``copies_not_deleted_message``): past
    what a graceful stop of their pods takes (``terminationGracePeriodSeconds``, 30 by default, plus some slack), so
    a Job whose pods take their time to stop is not reported, and at most a third of the worker-lost timeout."""
    grace = max((_grace_seconds(copy) for copy in copies if copy.get("kind") == "Job"), default=30)
    return min(grace + LINGER_REPORT_SLACK_SECONDS, timeout / 3)


def _grace_seconds(job: Obj) -> int:
    pod_spec = (((job.get("spec") or {}).get("template") or {}).get("spec")) or {}
    grace = pod_spec.get("terminationGracePeriodSeconds")
    return int(grace) if isinstance(grace, int) else 30


def copies_not_deleted_message(
    worker: str, copies: Sequence[Obj], *, waited: float, timeout: float, given_up: bool
) -> str:
    """What a withdrawal waits for when its copies do not go (a finalizer on one, its pods stuck terminating on a
    dead node), and until when: after the worker-lost timeout the workload is requeued without them, as for a
    worker that does not answer."""
    held = "; ".join(_holdup(copy) for copy in copies)
    if given_up:
        return (
            f'the copies in worker cluster "{worker}" were not deleted within the worker-lost timeout '
            f"({timeout:.0f}s): {held}; requeued without waiting for them"
        )
    return (
        f'waiting {waited:.0f}s so far for the copies in worker cluster "{worker}" to be deleted: {held}; the '
        f"workload is requeued once they are gone, or after the worker-lost timeout ({timeout:.0f}s)"
    )


def worker_unreachable_message(worker: str, *, since: dt.datetime, timeout: float, problem: str = "") -> str:
    """What a Workload whose worker does not answer waits for, and until when; ``problem``: why kfed cannot even ask
    the worker (its MultiKueueCluster deleted, its kubeconfig unusable), when that is the cause."""
    deadline = since + dt.timedelta(seconds=timeout)
    lost = (
        f'worker cluster "{worker}" cannot be used since {since:%Y-%m-%dT%H:%M:%SZ} ({problem})'
        if problem
        else f'worker cluster "{worker}" has not answered since {since:%Y-%m-%dT%H:%M:%SZ}'
    )
    return (
        f"{lost}; the workload stays there until {deadline:%Y-%m-%dT%H:%M:%SZ} (the worker-lost timeout, "
        f"{timeout:.0f}s) and is requeued then unless the worker "
        + ("can be used" if problem else "answers")
        + " again"
    )


def copies_out_of_reach(
    workload: Obj, *, remote_workload: Obj | None, remote_job: Obj | None, moved_at: dt.datetime | None
) -> bool:
    """The workload's copies may be on the API server its worker's kubeconfig named before it was edited to name
    another at ``moved_at`` (None: never): none is seen through the connection to the new one, and the workload
    reserved its quota, so its copies may have been sent, before then. They are not gone, only out of reach: the
    workload waits for the worker-lost timeout, as for a worker that does not answer, instead of being sent again
    at once while they may still run."""
    if moved_at is None or remote_workload is not None or remote_job is not None or is_true(workload, "Finished"):
        return False
    reserved = find_condition(workload, "QuotaReserved") or {}
    if reserved.get("status") != "True" or not reserved.get("lastTransitionTime"):
        return False
    return parse_time(str(reserved["lastTransitionTime"])) <= moved_at


def moved_message(*, was: str, now: str) -> str:
    """Why a workload's copies are out of reach (``copies_out_of_reach``)."""
    return f"its kubeconfig now reaches {now}, not {was}, where the workload's copies were sent"


def worker_lost_message(worker: str, *, timeout: float) -> str:
    return (
        f'worker cluster "{worker}" has been unreachable for longer than the worker-lost timeout ({timeout:.0f}s); '
        "its copies there are deleted as soon as it answers again (until then it may still be running there)"
    )


def withdrawal_reason(
    *,
    manager_workload: Obj,
    worker: str,
    remote_workload: Obj | None,
    remote_job: Obj | None,
    manager_job: Obj | None,
    now: dt.datetime | None = None,
    dispatch_timeout: float | None = None,
) -> str | None:
    """Why the workload must be taken back from ``worker`` and requeued, or None while its dispatch is sound.

    ``remote_workload``/``remote_job`` are our copies in ``worker`` (None when absent). With ``now`` and
    ``dispatch_timeout``, a worker that has not admitted the workload within the timeout is a reason too.
    A worker's refusal of a copy counts while it holds at ``now`` (not at all without ``now``).
    """
    if is_true(manager_workload, "Finished"):
        return None
    meta = manager_workload.get("metadata") or {}
    if now is not None and worker in refused_workers(manager_workload, now=now):
        return refused_message(worker, "403 Forbidden", until=refused_until(manager_workload))
    if worker in workers_in(manager_workload, EXCLUDED_CLUSTERS_ANNOTATION):
        job = (manager_job or {}).get("metadata", {}).get("name", "")
        return foreign_job_message(str(meta.get("namespace", "")), str(job), worker)
    if remote_job is not None and job_finish(remote_job) is not None:
        return None  # the final status is there to be mirrored
    if remote_workload is not None and is_true(remote_workload, "Finished"):
        finished = find_condition(remote_workload, "Finished") or {}
        if finished.get("reason") == REASON_OWNER_NOT_FOUND:
            # A Kueue worker finished the copy as orphaned before its Job copy arrived: the Job never ran there.
            return f'the Workload copy in worker cluster "{worker}" was finished as orphaned (OwnerNotFound)'
        if finished.get("reason") == REASON_OUT_OF_SYNC:
            # A Kueue worker found the copy no longer matching its Job copy (e.g. its parallelism changed there): a
            # failure to keep them in sync, not the Job's end, so it is sent again (Kueue v0.20's manager does too).
            why = ": ".join(str(part) for part in (REASON_OUT_OF_SYNC, finished.get("message")) if part)
            return f'the Workload copy in worker cluster "{worker}" was finished out of sync with its Job copy ({why})'
        return None
    if remote_workload is not None and is_true(remote_workload, "Evicted"):
        evicted = find_condition(remote_workload, "Evicted") or {}
        if evicted.get("reason") == "AdmissionCheck" and (remote_workload.get("spec") or {}).get("active", True):
            return None  # a worker's check asked to retry: the worker requeues it after the check's backoff
        why = ": ".join(str(part) for part in (evicted.get("reason"), evicted.get("message")) if part)
        return f'evicted in worker cluster "{worker}" ({why})'
    if not is_true(manager_workload, "Admitted"):
        if now is not None and dispatch_timeout is not None:
            left = dispatch_time_left(remote_workload, now=now, timeout=dispatch_timeout)
            if left is not None and left <= 0:
                return (
                    f'not admitted by worker cluster "{worker}" within the dispatch timeout ({dispatch_timeout:.0f}s)'
                )
        return None  # before admission a missing copy is simply (re)created
    if remote_workload is None:
        return _copy_gone("Workload", worker)
    if remote_job is None and manager_job is not None:
        return _copy_gone("Job", worker)
    return None


def _copy_gone(kind: str, worker: str) -> str:
    """kfed finds its copies by their origin label, so one whose label was taken off looks deleted: say both."""
    return (
        f'the {kind} copy in worker cluster "{worker}" was deleted while the workload was admitted there (or lost '
        f"its {MULTIKUEUE_ORIGIN_LABEL} label, by which kfed finds its copies)"
    )


def eviction_status(
    workload: Obj, *, reason: str, message: str, now: dt.datetime, retry_checks: Collection[str] = ()
) -> dict[str, Any]:
    """The status patch that starts a withdrawal: ``Evicted=True`` while the reservation is still held, and the
    checks named in ``retry_checks`` (the MultiKueue check) in ``Retry``; other controllers' checks are left as
    they are (Kueue's order: evict, remove the copies, then release the quota)."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type="Evicted",
        status=True,
        reason=reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    stamp = format_time(now)
    checks = [
        {**check, "state": "Retry", "message": message, "lastTransitionTime": stamp}
        if check.get("name") in retry_checks
        else dict(check)
        for check in (workload.get("status") or {}).get("admissionChecks") or ()
    ]
    return {"conditions": conditions, "admissionChecks": checks}


REASON_PREEMPTED = "Preempted"
REASON_DEACTIVATED = "Deactivated"


REASON_CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
REASON_LOCAL_QUEUE_STOPPED = "LocalQueueStopped"


def drained_by_stop_policy(
    workload: Obj, *, cluster_queue: Obj | None, local_queue: Obj | None
) -> tuple[str, str] | None:
    """(eviction reason, message) when the workload's ClusterQueue or LocalQueue has ``stopPolicy: HoldAndDrain``
    (Kueue evicts what they admitted; ``Hold`` only stops new admissions), else None."""
    for queue, reason, kind in (
        (cluster_queue, REASON_CLUSTER_QUEUE_STOPPED, "ClusterQueue"),
        (local_queue, REASON_LOCAL_QUEUE_STOPPED, "LocalQueue"),
    ):
        if queue is not None and (queue.get("spec") or {}).get("stopPolicy") == "HoldAndDrain":
            return reason, f"The {kind} is stopped"  # Kueue's message
    return None


def pending_deactivation_status(workload: Obj, *, now: dt.datetime) -> dict[str, Any] | None:
    """The status patch Kueue writes for a deactivated Workload that holds no quota (never admitted, or released
    already): ``federation.admission.deactivation``'s eviction, and its nomination cleared. A Workload evicted already
    (e.g. preempted, then deactivated while it waited) keeps that eviction and only loses its ``DeactivationTarget``
    marker and requeue state. Nothing was admitted, so Kueue records no Event and counts no eviction metric for it,
    and neither does kfed; the eviction is still counted in ``schedulingStats``, as Kueue's status patch does. None
    when there is nothing to write. (Its admission checks are Pending already: a release resets them.)"""
    if not deactivated(workload) or is_true(workload, "Finished") or is_true(workload, "QuotaReserved"):
        return None
    status = workload.get("status") or {}
    eviction = deactivation_eviction(workload, now=now)
    if eviction is not None:
        patch = dict(eviction.status)
        for field in ("clusterName", "nominatedClusterNames"):
            if status.get(field):
                patch[field] = None
        return patch
    patch = {}
    if find_condition(workload, "DeactivationTarget") is not None:
        patch["conditions"] = [c for c in conditions_of(workload) if c.get("type") != "DeactivationTarget"]
    if status.get("requeueState") is not None:
        patch["requeueState"] = None
    return patch or None


def deactivated(workload: Obj) -> bool:
    """``spec.active: false``: a dispatched workload is withdrawn and stays out of its queue until reactivated."""
    return (workload.get("spec") or {}).get("active") is False


def preemption_status(workload: Obj, *, preemption_reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    """Evict a preemption victim (``Evicted`` reason ``Preempted``, and ``Preempted`` with Kueue's preemption reason
    such as ``InClusterQueue``); the remote sync then withdraws it from its worker and releases its quota."""
    status = eviction_status(workload, reason=REASON_PREEMPTED, message=message, now=now)
    status["schedulingStats"] = scheduling_stats_after(workload, REASON_PREEMPTED)
    status["conditions"], _ = set_condition(
        status["conditions"],
        condition_type="Preempted",
        status=True,
        reason=preemption_reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    return status


def eviction_of(workload: Obj) -> tuple[str, str]:
    """(reason, message) of the workload's ``Evicted`` condition."""
    evicted = find_condition(workload, "Evicted") or {}
    return str(evicted.get("reason") or REASON_EVICTED_BY_ADMISSION_CHECK), str(evicted.get("message") or "")


def requeue_status(workload: Obj, *, reason: str, message: str, now: dt.datetime) -> dict[str, Any]:
    """The status patch that releases the reservation and queues the workload again (Kueue's eviction); a
    deactivated workload releases it without being queued again (``Requeued=False`` with the eviction's reason and
    message, as Kueue writes it, until it is reactivated). ``Requeued`` is also False after an ``AdmissionCheck`` or
    ``PodsReadyTimeout`` eviction until the backoff ends (``federation.admission.requeued``)."""
    generation = workload_generation(workload)
    conditions: Sequence[Mapping[str, Any]] = list(conditions_of(workload))
    changes: list[tuple[str, bool, str, str]] = [
        ("Evicted", True, reason, message),
        ("QuotaReserved", False, *released_terms(workload, message)),  # Kueue v0.20's (before: Pending)
        ("Requeued", requeued_on_release(workload, reason=reason), reason, message),
    ]
    for condition_type, status, why, text in changes:
        conditions, _ = set_condition(
            conditions,
            condition_type=condition_type,
            status=status,
            reason=why,
            message=text,
            now=now,
            observed_generation=generation,
        )
    if find_condition(workload, "Admitted") is not None:
        conditions = without_reservation(conditions, now=now, observed_generation=generation)
    patch = _released(workload, conditions, now=now)
    if deactivated(workload):
        # Deactivation is done: its target marker goes, and a reactivated workload starts its requeue count and its
        # execution time budget afresh.
        patch["conditions"] = [c for c in conditions if c.get("type") != "DeactivationTarget"]
        patch["requeueState"] = None
        patch[ACCUMULATED_FIELD] = None
    elif (used := accumulated_on_release(workload, now=now)) is not None:
        patch[ACCUMULATED_FIELD] = used  # the admitted time counts against maximumExecutionTimeSeconds
    return patch


def foreign_reservation(workload: Obj, *, multikueue_checks: Collection[str]) -> str | None:
    """Why kfed-manager cannot carry on the workload's quota reservation, or None. kfed-manager reserves for one
    worker (``status.nominatedClusterNames`` names exactly one); a reservation behind a MultiKueue check that names
    none or several, and no worker that admitted it (``status.clusterName``), was made by another MultiKueue
    dispatcher: stock Kueue's AllAtOnce or Incremental, before kfed-manager took over the manager cluster."""
    if not is_true(workload, "QuotaReserved") or is_true(workload, "Finished") or is_true(workload, "Evicted"):
        return None
    status = workload.get("status") or {}
    nominated = list(status.get("nominatedClusterNames") or ())
    if status.get("clusterName") or len(nominated) == 1:
        return None
    if not any(check.get("name") in multikueue_checks for check in status.get("admissionChecks") or ()):
        return None
    named = ", ".join(str(n) for n in nominated) or "none"
    return (
        f"the reservation was made by another MultiKueue dispatcher (nominated workers: {named}); kfed-manager "
        "releases it and dispatches the workload itself"
    )


def foreign_reservation_release(workload: Obj, *, message: str, now: dt.datetime) -> dict[str, Any]:
    """The status patch that releases such a reservation: ``QuotaReserved=False`` (reason ``PendingEvaluation``,
    ``message``),
    no admission, no nominated workers, the checks back to Pending. Nothing ran, so it is not an eviction."""
    generation = workload_generation(workload)
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type="QuotaReserved",
        status=False,
        reason=REASON_PENDING_EVALUATION,
        message=message,
        now=now,
        observed_generation=generation,
    )
    return _released(workload, conditions, now=now)


def _released(workload: Obj, conditions: Sequence[Mapping[str, Any]], *, now: dt.datetime) -> dict[str, Any]:
    """A status patch that releases the reservation: ``conditions``, no admission, no worker, the checks back to
    Pending."""
    return {
        "conditions": conditions,
        "admission": None,
        "clusterName": None,
        "nominatedClusterNames": None,
        "admissionChecks": checks_reset_on_eviction(
            (workload.get("status") or {}).get("admissionChecks") or (), now=now
        ),
    }
