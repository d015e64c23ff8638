"""What the manager does about one dispatched workload, given both sides' objects (pure).

Inputs are the manager Workload and Job and the remote copies in the nominated worker (None when absent).
The answer is a short, ordered plan of steps the status-sync controller carries out; re-running it after each
step converges, so the plan is always derived from what the API says now, never from memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from federation.conditions import find_condition, is_true
from manager.decisions.job_status import status_mirrored

Obj = Mapping[str, Any]

Step = Literal[
    "create_remote_workload",
    "create_remote_job",
    "create_started_job",
    "update_remote_priority",
    "mark_admitted",
    "unsuspend_manager_job",
    "mirror_job_status",
    "finish_manager_workload",
    "delete_remote",
]


@dataclass(frozen=True, slots=True)
class Finish:
    succeeded: bool
    message: str


def job_finish(job: Obj | None) -> Finish | None:
    """Complete or Failed (with the condition's message), or None while the Job runs."""
    if job is None:
        return None
    for condition_type, succeeded in (("Complete", True), ("Failed", False)):
        found = find_condition(job, condition_type)
        if found is not None and found.get("status") == "True":
            return Finish(succeeded=succeeded, message=str(found.get("message") or found.get("reason") or ""))
    return None


def workload_finished(workload: Obj | None) -> bool:
    return workload is not None and is_true(workload, "Finished")


def remote_reserved(remote_workload: Obj | None) -> bool:
    """The worker admitted the copy: quota reserved there and, when its ClusterQueue has admission checks (e.g. a
    ProvisioningRequest), ``Admitted`` (every check Ready)."""
    if remote_workload is None or not is_true(remote_workload, "QuotaReserved"):
        return False
    return is_true(remote_workload, "Admitted") or not (remote_workload.get("status") or {}).get("admissionChecks")


MIRROR_INTERVAL = 5.0
"""Seconds between two mirrors of a running Job's status (each pod changes it)."""


def mirror_wait(last_mirror: float | None, *, now: float, finished: object) -> float:
    """Seconds until a remote Job's status may be mirrored onto the manager Job (0: now). The first mirror (the Job
    started; ``last_mirror`` None) and a ``finished`` one (any truthy finish) are made at once: users and their
    scripts see a Job running as soon as its pods do. The counts in between follow at most once per
    :data:`MIRROR_INTERVAL` after ``last_mirror``."""
    if finished or last_mirror is None:
        return 0.0
    return max(0.0, last_mirror + MIRROR_INTERVAL - now)


def worth_mirroring(remote_job: Obj) -> bool:
    """A remote Job that has not started (no ``startTime``) and has not finished has nothing to show on the manager
    yet (at most its ``Suspended=False`` condition): its first mirror waits for the start, one write fewer per Job."""
    return bool((remote_job.get("status") or {}).get("startTime")) or job_finish(remote_job) is not None


def priority_of(workload: Obj | None) -> tuple[int, str | None]:
    spec = (workload or {}).get("spec") or {}
    return int(spec.get("priority") or 0), (spec.get("priorityClassRef") or {}).get("name")


def plan(
    *,
    manager_workload: Obj,
    manager_job: Obj | None,
    remote_workload: Obj | None,
    remote_job: Obj | None,
    checks_ready: bool = True,
    job_after_admission: bool = False,
) -> list[Step]:
    """The next steps for a workload whose quota is reserved on the manager and that names one worker.

    ``checks_ready`` is False while an admission check other than kfed's own is not Ready: no copy is created
    then, so the Job cannot start on the worker (``manager.decisions.admission_checks``).

    ``job_after_admission`` (a kfed-agent worker that reports its flavors): the Workload copy goes first and the
    Job copy only once the worker admitted it, created started (``create_started_job``), together with marking
    the workload Admitted here. Otherwise (stock Kueue) both copies go at once, the Job suspended, and the
    worker starts it."""
    if workload_finished(manager_workload):
        return ["delete_remote"] if remote_workload is not None or remote_job is not None else []
    finish = job_finish(remote_job)
    admitted_here = is_true(manager_workload, "Admitted")
    # The Job's priority class changed (Kueue M19): the worker orders and preempts by its copy's priority.
    resync: list[Step] = (
        ["update_remote_priority"]
        if remote_workload is not None
        and finish is None
        and priority_of(remote_workload) != priority_of(manager_workload)
        else []
    )
    steps: list[Step] = []
    # Copies are only ever created before the manager saw the worker admit them: a copy that vanishes later is
    # never re-created (it could run the Job twice); requeueing it is the eviction path's job.
    if not admitted_here and checks_ready:
        if remote_workload is None and finish is None:
            steps.append("create_remote_workload")
        if remote_job is None and manager_job is not None and not job_after_admission:
            steps.append("create_remote_job")
    if steps:
        return resync + steps
    if remote_job is None:
        if (
            job_after_admission
            and not admitted_here
            and checks_ready
            and manager_job is not None
            and remote_reserved(remote_workload)
            and not workload_finished(remote_workload)
        ):
            steps = ["create_started_job", "mark_admitted"]
            if (manager_job.get("spec") or {}).get("suspend", False):
                steps.append("unsuspend_manager_job")
        return resync + steps
    if (remote_reserved(remote_workload) or finish is not None) and not admitted_here:
        steps.append("mark_admitted")
    if manager_job is not None and (admitted_here or steps):
        if (manager_job.get("spec") or {}).get("suspend", False):
            steps.append("unsuspend_manager_job")
        if worth_mirroring(remote_job) and not status_mirrored(manager_job, remote_job):
            steps.append("mirror_job_status")
    if finish is not None:
        steps.append("finish_manager_workload")
    return resync + steps
