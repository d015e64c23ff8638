"""Writes to the manager cluster's Jobs that more than one controller makes.

A manager Job runs nowhere while its Workload is not admitted on a worker: when a workload is requeued (withdrawn
from its worker) or its Workload disappears, the Job is suspended again and the status mirrored from the worker
is cleared, so ``kubectl get job`` never shows pods that no longer exist. One function, so both paths stop a Job
the same way.
"""

from __future__ import annotations

from typing import Any

from federation.kube.api import KubeApi
from federation.kube.resources import JOBS

Obj = dict[str, Any]


async def stop_manager_job(api: KubeApi, job: Obj, *, field_manager: str) -> Obj:
    """Suspend ``job`` (if it is not) and clear its status; returns the Job as last written."""
    meta = job["metadata"]
    if not (job.get("spec") or {}).get("suspend", False):
        job = await api.patch(
            JOBS, meta["name"], {"spec": {"suspend": True}}, namespace=meta["namespace"], field_manager=field_manager
        )
    if job.get("status"):
        job = await api.replace_status(JOBS, {**job, "status": {}}, field_manager=field_manager)
    return job
