"""The ProvisioningRequest admission check controller of the agent (Kueue's ``kueue.x-k8s.io/provisioning-request``).

Why this module exists: a worker whose ClusterQueue has such a check gets its capacity from the cluster autoscaler.
For every Workload that reserved quota there, this controller creates the PodTemplates and the
``autoscaling.x-k8s.io/v1`` ProvisioningRequest (owned by the Workload, Kueue's names), reads the request's
conditions back into the check's state on the Workload, makes the next attempt after a Retry, and deletes requests
that are stale or whose Workload finished. The decisions are in ``worker_agent.decisions.provisioning``; what a
Ready, Retry or Rejected check does to the Workload is ``worker_agent.decisions.checks``. It runs inside the
reconciler's pass (same lock, same caches), and every change of a request, config or check wakes that pass.

The ProvisioningRequest CRD belongs to the cluster autoscaler. When the API is not served, the checks stay Pending
with a message saying so (visible on the Workload, in an Event and in the log) instead of failing the agent.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from federation.admission.api_workloads import workload_key
from federation.api.workload import EVICTED, FINISHED, QUOTA_RESERVED
from federation.conditions import conditions_of, find_condition, is_true, set_condition
from federation.kube import resources as r
from federation.kube.api import KubeApi, Propagation
from federation.kube.cache import WatchCache
from federation.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from worker_agent.decisions import provisioning as d

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
FIELD_MANAGER = "kfed-agent"
NOT_SERVED = "the ProvisioningRequest API (autoscaling.x-k8s.io/v1) is not served in this cluster"


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


class Provisioning:
    def __init__(
        self,
        api: KubeApi,
        *,
        events: EventRecorder,
        cluster: str,
        wake: Callable[..., None],
        admission_checks: WatchCache,
        served: bool = True,
    ) -> None:
        self.api = api
        self.events = events
        self.served = served
        self.admission_checks = admission_checks
        admission_checks.add_handler(wake)
        self.configs = WatchCache(api, r.PROVISIONING_REQUEST_CONFIGS)
        self.requests = WatchCache(api, r.PROVISIONING_REQUESTS, label_selector=d.MANAGED_BY_LABEL)
        for cache in self.caches():
            cache.add_handler(wake)
        self._log = log.bind(cluster=cluster)

    @staticmethod
    async def served_by(api: KubeApi) -> bool:
        """Whether the cluster serves ProvisioningRequests (the autoscaler's CRD is installed)."""
        try:
            await api.list(r.PROVISIONING_REQUESTS, page_size=1)
        except NotFound:
            return False
        return True

    def caches(self) -> tuple[WatchCache, ...]:
        """The caches this controller runs (the AdmissionChecks are the world's)."""
        return (self.configs, self.requests) if self.served else (self.configs,)

    def checks_by_name(self) -> dict[str, Obj]:
        return {str(c["metadata"]["name"]): c for c in self.admission_checks.store}

    def is_provisioning(self, name: str) -> bool:
        check = self.admission_checks.store.get(name)
        return ((check or {}).get("spec") or {}).get("controllerName") == d.CONTROLLER_NAME

    # -- the pass ---------------------------------------------------------------------------------------------

    async def sync(
        self,
        workloads: Iterable[Obj],
        *,
        flavor_labels: Mapping[str, Mapping[str, str]],
        remember: Callable[[Obj], None],
        now: dt.datetime,
    ) -> None:
        configs = {str(c["metadata"]["name"]): c for c in self.configs.store}
        checks = self.checks_by_name()
        requests_by_owner: dict[str, list[Obj]] = {}
        for request in self.requests.store if self.served else ():
            for ref in (request.get("metadata") or {}).get("ownerReferences") or ():
                if ref.get("kind") == "Workload":
                    requests_by_owner.setdefault(str(ref.get("uid")), []).append(request)
        await self._sync_active(configs)
        if not requests_by_owner and not any(
            (check.get("spec") or {}).get("controllerName") == d.CONTROLLER_NAME for check in checks.values()
        ):
            return  # no request to clean up and no check of ours: the loop below would do nothing (every pass)
        for workload in list(workloads):
            owned = requests_by_owner.get(_uid(workload), [])
            if is_true(workload, FINISHED):
                await self._delete(d.stale_requests(owned, keep=(), finished=True), workload)
                continue
            if not is_true(workload, QUOTA_RESERVED) or is_true(workload, EVICTED):
                continue
            states = list((workload.get("status") or {}).get("admissionChecks") or ())
            ours = [
                s
                for s in states
                if ((checks.get(str(s.get("name"))) or {}).get("spec") or {}).get("controllerName") == d.CONTROLLER_NAME
            ]
            if not ours:
                continue
            try:
                await self._sync_one(workload, states, ours, owned, configs, checks, flavor_labels, remember, now)
            except KubeError as exc:
                self._log.warning("provisioning.sync_failed", workload=workload_key(workload), error=str(exc)[:300])

    async def _sync_active(self, configs: Mapping[str, Obj]) -> None:
        """Keep the ``Active`` condition of this controller's AdmissionChecks current (written when its status
        changes, as Kueue does)."""
        for check in list(self.admission_checks.store):
            if (check.get("spec") or {}).get("controllerName") != d.CONTROLLER_NAME:
                continue
            wanted = d.active_condition(check, configs)
            meta = check["metadata"]
            current = find_condition(check, "Active")
            if current is not None and current.get("status") == wanted["status"]:
                continue
            conditions, _ = set_condition(
                conditions_of(check),
                condition_type="Active",
                status=wanted["status"] == "True",
                reason=wanted["reason"],
                message=wanted["message"],
                now=dt.datetime.now(dt.UTC),
                observed_generation=meta.get("generation"),
            )
            body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": {"conditions": conditions}}
            try:
                await self.api.patch_status(r.ADMISSION_CHECKS, str(meta["name"]), body, field_manager=FIELD_MANAGER)
            except (Conflict, NotFound):
                continue  # its watch event brings it back
            self._log.info("provisioning.check_active", check=meta["name"], **wanted)

    async def _sync_one(  # noqa: PLR0917 -- one workload's pass, called from one place
        self,
        workload: Obj,
        states: list[Obj],
        ours: list[Obj],
        owned: list[Obj],
        configs: Mapping[str, Obj],
        checks: Mapping[str, Obj],
        flavor_labels: Mapping[str, Mapping[str, str]],
        remember: Callable[[Obj], None],
        now: dt.datetime,
    ) -> None:
        key = workload_key(workload)
        name = str(workload["metadata"]["name"])
        new_states = {str(s.get("name")): dict(s) for s in states}
        keep: list[str] = []
        events: list[str] = []
        for current in ours:
            check = str(current.get("name"))
            config, problem = d.config_for_check(checks.get(check), configs)
            if config is not None and not self.served:
                config, problem = None, NOT_SERVED
            pod_sets = d.request_pod_sets(workload, config, flavor_labels=flavor_labels) if config else []
            latest = d.latest_request(owned, workload=name, check=check, config=config) if config is not None else None
            update = d.check_update(
                workload,
                current,
                config=config,
                config_problem=problem,
                request=latest,
                needed=bool(pod_sets),
                now=now,
            )
            new_states[check] = update.state
            if update.event:
                events.append(update.event)
            if latest is not None:
                keep.append(str(latest["metadata"]["name"]))
            if config is None:
                continue
            new = d.request_to_create(workload, update.state, config=config, request=latest, pod_sets=pod_sets)
            if new is not None:
                await self._create(workload, new)
                keep.append(new.name)
        await self._delete(d.stale_requests(owned, keep=keep, finished=False), workload)
        if [new_states[str(s.get("name"))] for s in states] == states:
            return
        body = {
            "metadata": {"resourceVersion": workload["metadata"].get("resourceVersion")},
            "status": {"admissionChecks": [new_states[str(s.get("name"))] for s in states]},
        }
        try:
            written = await self.api.patch_status(
                r.WORKLOADS, name, body, namespace=workload["metadata"]["namespace"], field_manager=FIELD_MANAGER
            )
        except (Conflict, NotFound):
            return  # the watch event of the change brings it back
        remember(written)
        for message in events:
            self.events.emit(
                written, reason="AdmissionCheckUpdated", note=message[:1024], action="AdmissionCheckUpdated"
            )
            self._log.info("provisioning.check_updated", workload=key, message=message[:500])

    async def _create(self, workload: Obj, new: d.NewRequest) -> None:
        templates, request = d.request_objects(workload, new)
        namespace = workload["metadata"]["namespace"]
        for template in templates:
            with contextlib.suppress(AlreadyExists):  # made by an earlier pass that stopped before the request
                await self.api.create(r.POD_TEMPLATES, template, namespace=namespace, field_manager=FIELD_MANAGER)
        try:
            await self.api.create(r.PROVISIONING_REQUESTS, request, namespace=namespace, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return
        self.events.emit(
            workload,
            reason="ProvisioningRequestCreated",
            note=f'Created ProvisioningRequest: "{new.name}"',
            action="Created",
        )
        self._log.info("provisioning.request_created", workload=workload_key(workload), request=new.name)

    async def _delete(self, requests: Iterable[Mapping[str, Any]], workload: Obj) -> None:
        for request in requests:
            meta = request.get("metadata") or {}
            await self.api.delete(
                r.PROVISIONING_REQUESTS,
                str(meta.get("name")),
                namespace=str(meta.get("namespace")),
                uid=str(meta.get("uid")),
                missing_ok=True,
                propagation_policy=Propagation.BACKGROUND,
            )
            for item in (request.get("spec") or {}).get("podSets") or ():
                template = str((item.get("podTemplateRef") or {}).get("name") or "")
                if template:
                    await self.api.delete(
                        r.POD_TEMPLATES, template, namespace=str(meta.get("namespace")), missing_ok=True
                    )
            self._log.info("provisioning.request_deleted", workload=workload_key(workload), request=meta.get("name"))
