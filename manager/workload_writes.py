"""kfed-manager's writes to its own Workloads and Jobs, laid over its caches until the watches show them.

The remote sync and the evictions write a Workload and go on deciding with the answer before its watch event comes;
a decision made on the stale cached object would repeat the write (a 409 Conflict, or a duplicate). Every answer goes
into the Workloads' (or Jobs') ``WriteOverlay`` here, so that rule has one home.

A Workload status write is also where a reservation the scheduler holds back (``manager.reservation_holds``) is
written: the first status write of that Workload carries it, and tells the scheduler how it went.
"""

from __future__ import annotations

from typing import Any

from federation.kube.api import KubeApi
from federation.kube.errors import Conflict
from federation.kube.overlay import WriteOverlay
from federation.kube.refusal import is_refusal
from federation.kube.resources import WORKLOADS
from manager.reservation_holds import ReservationHolds, ReservationNotWritten, carried

Obj = dict[str, Any]

REMOTE_SYNC = "remote-sync"
"""The writer the remote sync's writes carry in the overlays (the manager's Workloads and Jobs, the workers' copies):
their echoes do not bring a workload back to it (``manager.runtime``)."""


class WorkloadWrites:
    def __init__(
        self,
        *,
        api: KubeApi,
        field_manager: str,
        workloads: WriteOverlay,
        jobs: WriteOverlay,
        holds: ReservationHolds | None = None,
    ) -> None:
        self._api = api
        self._field_manager = field_manager
        self._workloads = workloads
        self._jobs = jobs
        self._holds = holds

    def reservation_unwritten(self, workload: Obj) -> bool:
        """The reservation ``workload`` shows is not written yet: held back (its next status write records it) or
        being written on its own."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        return self._holds is not None and (key in self._holds or self._holds.sending(key))

    async def patch_status(self, workload: Obj, status: Obj) -> Obj:
        """A merge patch of the Workload's status at the resourceVersion it was decided on (with a held reservation
        under it); returns the answer."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._holds is not None and self._holds.sending(key):
            # decided on the Workload as the held reservation shows it, whose own write is in flight: a write of
            # ours at the same resourceVersion would be refused, or, if it won, record the reservation only in part
            raise Conflict(f"the reservation of {key} is being written; deciding again once it is answered")
        held = self._holds.take(key) if self._holds is not None else None
        try:
            answer = await self._api.patch_status(
                WORKLOADS,
                meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": carried(held, status)},
                namespace=meta["namespace"],
                field_manager=self._field_manager,
            )
        except BaseException as err:
            if held is not None:  # the scheduler shows the Workload as the cache has it again, and decides again
                held.settle(None, err)
                if is_refusal(err):
                    raise ReservationNotWritten(str(err)) from err
            raise
        written = self.wrote(workload, answer)
        if held is not None:
            held.settle(written, None)
        return written

    def wrote(self, before: Obj, after: Obj) -> Obj:
        """Lay a Workload write's answer over the cache until the cache shows it (returns the answer). A reservation
        still held for it is now based on an old resourceVersion: the scheduler decides again at once."""
        self._workloads.wrote(before, after, writer=REMOTE_SYNC)
        meta = after["metadata"]
        held = self._holds.take(f"{meta['namespace']}/{meta['name']}") if self._holds is not None else None
        if held is not None:
            held.settle(None, Conflict("the Workload was written while its reservation was held; deciding again"))
        return after

    def wrote_job(self, before: Obj, after: Obj) -> Obj:
        """The same for a manager Job."""
        self._jobs.wrote(before, after, writer=REMOTE_SYNC)
        return after
