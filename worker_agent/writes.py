"""The agent's writes to its own cluster that every pass makes the same way, and the retry they owe when one fails.

Why this module exists: the admission passes (``worker_agent.admission_passes``) and the Job-side passes
(``worker_agent.job_passes``) write Workload statuses and deactivations with the same guard (the resourceVersion
they were decided on), handle the same failures the same way (a conflict pulls the trigger to decide again at once;
a refusal of this cluster is named once and, like any other failure, decided again by a later pass), and both need
the time of that later pass. ``Writes`` is the one owner of that time and of the refusals reported; the loop
(``worker_agent.reconciler``) reads it to know when to wake. The small readers of the written objects the passes
share (name, ClusterQueue, whether it is a MultiKueue manager's copy) live here too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from federation.admission.queue_metrics import workload_labels
from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.kube import resources as r
from federation.kube.api import KubeApi
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from federation.kube.refusal import RefusalReporter, is_refusal
from federation.kube.trigger import Trigger
from federation.obs.metrics import Metrics

Obj = dict[str, Any]
WRITE_CONCURRENCY = 16
REFUSED_RETRY_SECONDS = 5.0
"""After a write this cluster refused (403/401: the agent's RBAC), passes try it again this much later at the
latest, not at once (the pass loop would otherwise send the refused write hundreds of times a second)."""
FAILED_RETRY_SECONDS = 1.0
"""After a write that failed otherwise (invalid, the apiserver unavailable), the same, sooner: such a failure may
pass by itself, but a write the apiserver keeps rejecting must not be resent every few milliseconds either."""


def name_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def copy_of_manager(obj: Obj) -> bool:
    """A copy a MultiKueue manager created here (it carries the origin label). Its routine Events (QuotaReserved,
    Admitted, Started, Finished) are not recorded: nobody reads them on a worker — users look at the manager's
    objects, where the manager records the same steps — and they were a third of the agent's writes per Job.
    What says why a copy waits (Pending) and every Warning are still recorded."""
    return MULTIKUEUE_ORIGIN_LABEL in ((obj.get("metadata") or {}).get("labels") or {})


def versioned(obj: Obj, body: Obj) -> Obj:
    """``body`` with the resourceVersion precondition of ``obj``."""
    return {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}, **body}


def queue_of(workload: Obj) -> str:
    return str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))


def count_eviction(metrics: Metrics, workload: Obj, *, reason: str) -> None:
    """Kueue's evicted-workloads counters for an eviction of ``workload`` (as written, still admitted)."""
    namespace, local_queue, priority_class = workload_labels(workload)
    metrics.evicted(
        cluster_queue=queue_of(workload),
        namespace=namespace,
        local_queue=local_queue,
        priority_class=priority_class,
        reason=reason,
    )


async def limited(limiter: anyio.CapacityLimiter, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
    async with limiter:
        await fn(*args)


class Writes:
    def __init__(self, *, api: KubeApi, trigger: Trigger, events: EventRecorder) -> None:
        self.api = api
        self.trigger = trigger
        self._refusals = RefusalReporter(
            events=events, component="kfed-agent", lookup=lambda _key: None, action="Reconcile"
        )
        self._retry_at: float | None = None

    @property
    def retry_at(self) -> float | None:
        """Monotonic time of the next pass after a failed write (None: no failed write waits)."""
        return self._retry_at

    def forget_due_retry(self) -> None:
        """A pass is about to run: a failed write whose time has come is decided again by it, so no longer waits."""
        if self._retry_at is not None and self._retry_at <= time.monotonic():
            self._retry_at = None

    def wrote(self, obj: Obj) -> None:
        """A write for ``obj`` went through: a later refusal for it is reported again."""
        namespace, name = name_of(obj)
        self._refusals.succeeded(f"{namespace}/{name}")

    def retry(self, obj: Obj, err: KubeError) -> None:
        """A write for ``obj`` failed (not a conflict: those are decided again at once): decided again by the pass
        ``FAILED_RETRY_SECONDS`` later, or ``REFUSED_RETRY_SECONDS`` when this cluster refused it (or by an earlier
        one another change brings)."""
        if is_refusal(err):
            self._refused(obj, err)
        else:
            self._retry_after(FAILED_RETRY_SECONDS)

    def _retry_after(self, seconds: float) -> None:
        at = time.monotonic() + seconds
        if self._retry_at is None or at < self._retry_at:
            self._retry_at = at

    def _refused(self, obj: Obj, err: KubeError) -> None:
        """A write for ``obj`` this cluster refused: named once on it (log line, Warning Event), and tried again by
        the pass ``REFUSED_RETRY_SECONDS`` later (or an earlier one another change brings)."""
        namespace, name = name_of(obj)
        self._refusals.refused(f"{namespace}/{name}", err, retry_in=REFUSED_RETRY_SECONDS, regarding=obj)
        self._retry_after(REFUSED_RETRY_SECONDS)

    async def patch_status(self, resource: r.Resource, obj: Obj, body: Obj, bound: Any) -> Obj | None:
        namespace, name = name_of(obj)
        try:
            written = await self.api.patch_status(
                resource, name, versioned(obj, body), namespace=namespace or None, field_manager="kfed-agent"
            )
        except Conflict:
            bound.debug("agent.write_conflict", resource=resource.label)
            self.trigger.pull()
        except NotFound:
            bound.debug("agent.write_gone", resource=resource.label)
        except KubeError as exc:
            bound.warning("agent.write_failed", resource=resource.label, error=str(exc)[:300])
            self.retry(obj, exc)
        else:
            self.wrote(obj)
            return written
        return None

    async def deactivate(self, workload: Obj, bound: Any) -> Obj | None:
        """``spec.active: false`` at the resourceVersion it was decided on; the workload as written (as it is when
        already inactive), or None when the write failed (the trigger is pulled to decide again)."""
        if (workload.get("spec") or {}).get("active", True) is False:
            return workload
        namespace, name = name_of(workload)
        try:
            written = await self.api.patch(
                r.WORKLOADS,
                name,
                versioned(workload, {"spec": {"active": False}}),
                namespace=namespace,
                field_manager="kfed-agent",
            )
        except (Conflict, NotFound):
            self.trigger.pull()
            return None
        except KubeError as exc:
            bound.warning("agent.write_failed", resource=r.WORKLOADS.label, error=str(exc)[:300])
            self.retry(workload, exc)
            return None
        self.wrote(workload)
        return written

    async def suspend_job(self, job: Obj, patch: Obj, bound: Any) -> Obj | None:
        """``patch`` (one that suspends the Job) guarded by the Job's uid; the Job as written, or None when the write
        failed (a conflict or a Job gone pulls the trigger to decide again; any other failure is retried)."""
        namespace, name = name_of(job)
        body = {**patch, "metadata": {"uid": (job.get("metadata") or {}).get("uid")}}
        try:
            written = await self.api.patch(r.JOBS, name, body, namespace=namespace, field_manager="kfed-agent")
        except (Conflict, NotFound):
            self.trigger.pull()
            return None
        except KubeError as exc:
            bound.warning("job.suspend_failed", error=str(exc)[:300])
            self.retry(job, exc)
            return None
        self.wrote(job)
        return written
