"""Tell the manager when the worker cannot place the pods of a copy it admitted.

Why this module exists: admission counts quota, not nodes, so an admitted Job can wait on the worker for good (a
``nodeSelector`` no node has, a taint nothing tolerates), and a user on the manager cluster would only see a Job
that never gets ready. The agent watches the kube-scheduler's ``FailedScheduling`` Events (a field selector: a
cluster where every pod is placed sends this watch nothing), finds the Job copy the pod belongs to, lists that
Job's unbound pods and writes the Workload copy's ``kfed.io/PodsUnschedulable`` condition
(``decisions.unschedulable``); kfed-manager shows it on the manager Workload. It also watches the Job controller's
``FailedCreate`` Events on Jobs: a copy whose pods cannot even be created (a ServiceAccount or PriorityClass the
worker lacks, a ResourceQuota, Pod Security admission) gets the same condition with that message, for as long as
the Job has fewer pods than it should. A Job with stuck pods is listed again every ``RECHECK_SECONDS`` until none
is, and the condition then turns ``False``. Only copies of a MultiKueue manager that hold quota here and have not
finished are looked at.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import anyio
import structlog

from federation.admission.api_workloads import RESERVED, workload_state
from federation.conditions import is_true, parse_time
from federation.kube import resources as r
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.trigger import Trigger
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION, UNSCHEDULABLE_GRACE_SECONDS
from worker_agent.decisions.jobs import prebuilt_workload_name
from worker_agent.decisions.unschedulable import (
    CreationFailure,
    copy_conditions,
    creation_failure,
    foreign_gates,
    job_candidates,
    missing_pods,
    stuck_pods,
)
from worker_agent.world import World
from worker_agent.writes import copy_of_manager

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
FAILED_SCHEDULING_SELECTOR = "involvedObject.kind=Pod,reason=FailedScheduling"
FAILED_CREATE_SELECTOR = "involvedObject.kind=Job,reason=FailedCreate"
RECHECK_SECONDS = 5.0
"""How often a Job with unschedulable pods (or pods inside the grace period) is listed again."""
AGENT = "kfed-agent"


class UnschedulablePods:
    def __init__(self, api: KubeApi, *, world: World, cluster: str) -> None:
        self._api = api
        self._world = world
        self._log = log.bind(cluster=cluster)
        self.events = WatchCache(api, r.CORE_EVENTS, field_selector=FAILED_SCHEDULING_SELECTOR)
        self.events.add_handler(self._on_event)
        self.failed_creates = WatchCache(api, r.CORE_EVENTS, field_selector=FAILED_CREATE_SELECTOR)
        self.failed_creates.add_handler(self._on_failed_create)
        world.jobs.add_handler(self._on_job)
        self._trigger = Trigger()
        self._new: set[tuple[str, str]] = set()
        """(namespace, pod name) of FailedScheduling Events not looked at yet."""
        self._new_jobs: set[tuple[str, str]] = set()
        """(namespace, Job name) of FailedCreate Events not looked at yet."""
        self._creation: dict[tuple[str, str], CreationFailure] = {}
        """(namespace, Job name) → its pods' latest creation failure, until no pod is missing."""
        self._watched: dict[tuple[str, str], float] = {}
        """(namespace, Job name) → when to list its pods again."""

    def caches(self) -> tuple[WatchCache, ...]:
        return (self.events, self.failed_creates)

    def _on_event(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type == "DELETED":
            return
        pod = obj.get("involvedObject") or {}
        if pod.get("namespace") and pod.get("name"):
            self._new.add((str(pod["namespace"]), str(pod["name"])))
            self._trigger.pull()

    def _on_failed_create(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type == "DELETED":
            return
        job = obj.get("involvedObject") or {}
        if not (job.get("namespace") and job.get("name")):
            return
        key = (str(job["namespace"]), str(job["name"]))
        stamp = obj.get("firstTimestamp") or obj.get("eventTime")
        since = parse_time(str(stamp)) if stamp else dt.datetime.now(dt.UTC)
        uid = str(job.get("uid") or "")
        earlier = self._creation.get(key)
        if earlier is not None and earlier.job_uid == uid:
            since = min(since, earlier.since)
        message = str(obj.get("message") or "FailedCreate")
        self._creation[key] = CreationFailure(message=message, since=since, job_uid=uid)
        self._new_jobs.add(key)
        self._trigger.pull()

    def _on_job(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        """A Job copy that starts with pods gated by someone else's scheduling gate sends no Event when they stay
        gated: it is looked at once the grace period is over."""
        if event_type == "DELETED" or prebuilt_workload_name(obj) is None:
            return
        spec = obj.get("spec") or {}
        if spec.get("suspend") is True or (old is not None and (old.get("spec") or {}).get("suspend") is not True):
            return  # not started yet, or not starting now
        if not foreign_gates((spec.get("template") or {}).get("spec") or {}):
            return
        key = (str(obj["metadata"]["namespace"]), str(obj["metadata"]["name"]))
        self._watched.setdefault(key, time.monotonic() + UNSCHEDULABLE_GRACE_SECONDS)
        self._trigger.pull()

    async def run(self) -> None:
        while True:
            wait = min(self._watched.values(), default=None)
            with anyio.move_on_after(float("inf") if wait is None else max(0.0, wait - time.monotonic())):
                await self._trigger.wait()
            await self.look()

    async def look(self) -> None:
        """One pass: the Jobs that new Events name, and the watched Jobs whose time to look again has come."""
        new, self._new = self._new, set()
        now = time.monotonic()
        jobs = {key for key, when in self._watched.items() if when <= now}
        jobs |= self._new_jobs
        self._new_jobs = set()
        names: dict[str, list[str]] = {namespace: [] for namespace, _ in new}
        for job in self._world.jobs.store if new else ():
            if (namespace := job["metadata"].get("namespace")) in names:
                names[namespace].append(str(job["metadata"]["name"]))
        for namespace, pod in new:
            jobs.update((namespace, name) for name in job_candidates(pod, names[namespace]))
        for key in sorted(jobs):
            recheck = await self._look_at(*key)
            if recheck is None:
                self._watched.pop(key, None)
            else:
                self._watched[key] = time.monotonic() + recheck

    async def _look_at(self, namespace: str, job_name: str) -> float | None:
        """List the Job's unbound pods and write its Workload copy's condition; when to look again (None: no
        need)."""
        job = self._world.jobs.store.get_by_name(job_name, namespace=namespace)
        workload_name = prebuilt_workload_name(job) if job is not None else None
        workload = (
            self._world.workloads.store.get_by_name(workload_name, namespace=namespace) if workload_name else None
        )
        if job is None or workload is None or not copy_of_manager(workload):
            self._creation.pop((namespace, job_name), None)
            return None
        if workload_state(workload) != RESERVED or is_true(workload, "Finished"):
            self._creation.pop((namespace, job_name), None)
            return None
        uid = job["metadata"].get("uid", "")
        try:
            listed = await self._api.list(
                r.PODS,
                namespace=namespace,
                label_selector=f"batch.kubernetes.io/controller-uid={uid}",
                field_selector="spec.nodeName=",
            )
        except KubeError as exc:
            self._log.warning("agent.unschedulable_list_failed", job=f"{namespace}/{job_name}", error=str(exc)[:300])
            return RECHECK_SECONDS
        now = dt.datetime.now(dt.UTC)
        stuck = stuck_pods(listed.items, now=now)
        if missing_pods(job) == 0:
            self._creation.pop((namespace, job_name), None)  # the pods came: a later failure starts over
        not_created, creation_recheck = creation_failure(job, self._creation.get((namespace, job_name)), now=now)
        conditions = copy_conditions(workload, stuck.pods, now=now, not_created=not_created)
        if conditions is not None and not await self._write(workload, conditions, stuck.pods, not_created):
            return RECHECK_SECONDS  # decided again then, on the Workload as it is by that time
        if stuck.pods or not_created is not None:
            return RECHECK_SECONDS
        rechecks = [t for t in (stuck.recheck_in, creation_recheck) if t is not None]
        return min(rechecks, default=None)

    async def _write(
        self,
        workload: Obj,
        conditions: list[dict[str, Any]],
        pods: tuple[tuple[str, str], ...],
        not_created: str | None,
    ) -> bool:
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        try:
            await self._api.patch_status(
                r.WORKLOADS,
                meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"conditions": conditions}},
                namespace=meta["namespace"],
                field_manager=AGENT,
            )
        except (Conflict, NotFound):
            self._log.debug("agent.unschedulable_write_stale", workload=key)
            return False
        except KubeError as exc:
            self._log.warning("agent.unschedulable_write_failed", workload=key, error=str(exc)[:300])
            return False
        if not_created is not None:
            self._log.warning(
                "agent.pods_not_created",
                workload=key,
                condition=PODS_UNSCHEDULABLE_CONDITION,
                message=not_created[:300],
            )
        elif pods:
            self._log.warning(
                "agent.pods_unschedulable",
                workload=key,
                condition=PODS_UNSCHEDULABLE_CONDITION,
                pods=len(pods),
                message=pods[0][1][:300],
            )
        else:
            self._log.info("agent.pods_scheduled", workload=key, condition=PODS_UNSCHEDULABLE_CONDITION)
        return True
