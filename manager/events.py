"""Kubernetes Events on the objects users look at (Jobs and Workloads), never fatal when they fail."""

from __future__ import annotations

from typing import Any

import structlog

from federation.kube.api import KubeApi
from federation.kube.errors import KubeError

log = structlog.get_logger(__name__)

CONTROLLER = "kfed.io/manager"


class EventRecorder:
    def __init__(self, api: KubeApi, *, instance: str) -> None:
        self._api = api
        self._instance = instance

    async def record(
        self, obj: dict[str, Any], *, reason: str, note: str, event_type: str = "Normal", action: str = "Reconcile"
    ) -> None:
        try:
            await self._api.create_event(
                obj,
                reason=reason,
                note=note,
                action=action,
                reporting_controller=CONTROLLER,
                reporting_instance=self._instance,
                event_type=event_type,
            )
        except KubeError as err:
            log.warning("could not record event", reason=reason, error=str(err))

    async def job(self, job: dict[str, Any], *, reason: str, note: str, event_type: str = "Normal") -> None:
        await self.record(
            {"apiVersion": "batch/v1", "kind": "Job", **job}, reason=reason, note=note, event_type=event_type
        )

    async def workload(self, workload: dict[str, Any], *, reason: str, note: str, event_type: str = "Normal") -> None:
        await self.record(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **workload},
            reason=reason,
            note=note,
            event_type=event_type,
        )
