"""The manager Job's status: what kfed writes there, within what the apiserver lets a Job's status become (pure).

A manager Job is managed by MultiKueue (``spec.managedBy``), so the apiserver checks every change of its status
against the Job API's rules: ``failed`` never goes down, nor does ``succeeded`` (except for an Indexed Job whose
completions equal its parallelism), a True ``Complete``, ``Failed``, ``FailureTarget`` or ``SuccessCriteriaMet``
condition is never taken back, ``startTime`` does not change while the Job is not suspended, and
``completionTime`` never changes once set. A status that breaks one is refused with 422 Invalid, every time.

A Job can run more than once: withdrawn from a worker after some of its pods ended (a copy deleted, an eviction, a
preemption, its Workload deleted or deactivated) and dispatched again, where its new copy counts from zero. So the
status kfed writes is always the one it wants (the worker copy's, or an empty one when the Job is stopped) with
what the apiserver keeps of the current one laid over it (:func:`lawful_status`): a Job stopped after a pod
succeeded keeps ``succeeded: 1``, and its next run's mirror shows at least that, instead of a write refused
forever and a Job that never ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = Mapping[str, Any]

PERMANENT_CONDITIONS = ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")
"""Job conditions the apiserver never lets go from True to anything else."""


def _true(status: Obj, condition_type: str) -> Obj | None:
    found: Obj | None = next(
        (c for c in status.get("conditions") or () if c.get("type") == condition_type and c.get("status") == "True"),
        None,
    )
    return found


def finished(status: Obj) -> bool:
    return _true(status, "Complete") is not None or _true(status, "Failed") is not None


def _succeeded_may_decrease(spec: Obj) -> bool:
    """An Indexed Job whose completions equal its parallelism can be scaled down, so its count may go down."""
    completions = spec.get("completions")
    return (
        spec.get("completionMode") == "Indexed"
        and completions is not None
        and completions == spec.get("parallelism", 1)
    )


def lawful_status(current: Obj, wanted: Obj, *, spec: Obj) -> dict[str, Any]:
    """``wanted`` with what the apiserver keeps of ``current`` laid over it, for a Job of ``spec``: the counters
    that may not go down, the permanent conditions that are True, ``startTime`` of a Job not suspended and a set
    ``completionTime``. Equal to ``wanted`` whenever ``wanted`` breaks none of the rules."""
    status = dict(wanted)
    for counter in ("failed", "succeeded"):
        if counter == "succeeded" and _succeeded_may_decrease(spec):
            continue
        if int(current.get(counter) or 0) > int(status.get(counter) or 0):
            status[counter] = current[counter]
    kept = [c for t in PERMANENT_CONDITIONS if (c := _true(current, t)) is not None and _true(status, t) is None]
    if kept:
        kept_types = {c["type"] for c in kept}
        status["conditions"] = [
            *(c for c in status.get("conditions") or () if c.get("type") not in kept_types),
            *kept,
        ]
    if current.get("startTime") and not spec.get("suspend", False):
        status["startTime"] = current["startTime"]
    if current.get("completionTime") and status.get("completionTime"):
        status["completionTime"] = current["completionTime"]
    return status


def stopped_job_status(job: Obj) -> dict[str, Any]:
    """The status of ``job`` (suspended) once stopped: nothing runs, nothing is counted as running, and what the
    apiserver keeps (``succeeded``, ``failed``, a permanent condition) stays."""
    return lawful_status(job.get("status") or {}, {}, spec=job.get("spec") or {})


def copy_status(remote_job: Obj) -> dict[str, Any]:
    """The worker copy's status as the manager Job would show it.

    A copy, except that a finished Job always has ``startTime``: the apiserver refuses a finished status without
    one for a Job managed by another controller, and a Job that never ran a pod (``parallelism: 0``) finishes
    without it. Its ``completionTime`` (or the finish condition's time) stands in, so the Job ends instead of
    looping on a rejected write.
    """
    status = dict(remote_job.get("status") or {})
    if status.get("startTime") or not finished(status):
        return status
    finished_at = status.get("completionTime")
    if not finished_at:
        for condition in status.get("conditions") or ():
            if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
                finished_at = condition.get("lastTransitionTime")
    if finished_at:
        status["startTime"] = finished_at
    return status


def mirrored_job_status(remote_job: Obj, *, manager_job: Obj) -> dict[str, Any]:
    """The status to write on ``manager_job`` for its worker copy ``remote_job``: the copy's (:func:`copy_status`),
    within what the apiserver lets the manager Job's current status become (:func:`lawful_status`)."""
    return lawful_status(manager_job.get("status") or {}, copy_status(remote_job), spec=manager_job.get("spec") or {})


def status_mirrored(manager_job: Obj, remote_job: Obj) -> bool:
    return (manager_job.get("status") or {}) == mirrored_job_status(remote_job, manager_job=manager_job)
