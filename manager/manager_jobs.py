"""Writes to the manager cluster's Jobs that more than one controller makes.

A manager Job runs nowhere while its Workload is not admitted on a worker: when a workload is requeued (withdrawn
from its worker) or its Workload disappears, the Job is suspended again and the status mirrored from the worker
is cleared, so ``kubectl get job`` never shows pods that no longer exist, except what the apiserver never lets a
Job's status lose (``succeeded``, ``failed``: ``manager.decisions.job_status``). One function, so both paths stop a
Job the same way, and stopping a stopped Job writes nothing.

A Job open to partial admission (``kueue.x-k8s.io/job-min-parallelism``) starts with the pod count its Workload was
admitted with and gets its Workload's full count back when it is stopped (Kueue's rule,
``federation.pod_injection.pod_count_patch``), so it is queued again asking for what the user asked for.
"""

from __future__ import annotations

from typing import Any

from federation.kube.api import KubeApi
from federation.kube.resources import JOBS
from federation.pod_injection import admitted_count, pod_count_patch
from manager.decisions.job_status import stopped_job_status

Obj = dict[str, Any]


def _annotations(job: Obj) -> dict[str, str]:
    return (job.get("metadata") or {}).get("annotations") or {}


def start_manager_job_spec(job: Obj, workload: Obj) -> Obj:
    """The ``spec`` merge patch that starts the manager ``job`` of the admitted ``workload``."""
    return {"suspend": False, **pod_count_patch(job.get("spec") or {}, _annotations(job), admitted_count(workload))}


async def stop_manager_job(api: KubeApi, job: Obj, *, field_manager: str, pod_count: int | None = None) -> Obj:
    """Suspend ``job`` (if it is not) and clear its status of its run (:func:`stopped_job_status`); returns the
    Job as last written. ``pod_count`` (the Workload's count) is given back to a Job that partial admission had
    shrunk, in the same write."""
    meta = job["metadata"]
    spec = job.get("spec") or {}
    restore = pod_count_patch(spec, _annotations(job), pod_count)
    if not spec.get("suspend", False) or restore:
        job = await api.patch(
            JOBS,
            meta["name"],
            {"spec": {"suspend": True, **restore}},
            namespace=meta["namespace"],
            field_manager=field_manager,
        )
    stopped = stopped_job_status(job)
    if (job.get("status") or {}) != stopped:
        job = await api.replace_status(JOBS, {**job, "status": stopped}, field_manager=field_manager)
    return job


def needs_stopping(job: Obj) -> bool:
    """``job`` runs, or a stop of it is not finished (suspended, its status not cleared yet)."""
    return not (job.get("spec") or {}).get("suspend", False) or (job.get("status") or {}) != stopped_job_status(job)
