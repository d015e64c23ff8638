"""kfed-manager's writes to its own Workloads and Jobs, laid over its caches until the watches show them.

The remote sync and the evictions write a Workload and go on deciding with the answer before its watch event comes;
a decision made on the stale cached object would repeat the write (a 409 Conflict, or a duplicate). Every answer goes
into the Workloads' (or Jobs') ``WriteOverlay`` here, so that rule has one home.
"""

from __future__ import annotations

from typing import Any

from federation.kube.api import KubeApi
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import WORKLOADS

Obj = dict[str, Any]


class WorkloadWrites:
    def __init__(self, *, api: KubeApi, field_manager: str, workloads: WriteOverlay, jobs: WriteOverlay) -> None:
        self._api = api
        self._field_manager = field_manager
        self._workloads = workloads
        self._jobs = jobs

    async def patch_status(self, workload: Obj, status: Obj) -> Obj:
        """A merge patch of the Workload's status at the resourceVersion it was decided on; returns the answer."""
        meta = workload["metadata"]
        return self.wrote(
            workload,
            await self._api.patch_status(
                WORKLOADS,
                meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status},
                namespace=meta["namespace"],
                field_manager=self._field_manager,
            ),
        )

    def wrote(self, before: Obj, after: Obj) -> Obj:
        """Lay a Workload write's answer over the cache until the cache shows it (returns the answer)."""
        self._workloads.wrote(before, after)
        return after

    def wrote_job(self, before: Obj, after: Obj) -> Obj:
        """The same for a manager Job."""
        self._jobs.wrote(before, after)
        return after
