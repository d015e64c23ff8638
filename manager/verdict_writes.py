"""The Workload status writes a scheduling pass decided, sent after the pass by a few writer tasks.

Why this module exists: a pass decides in memory and must not wait for its writes (on a busy apiserver each write
waits, and new Workloads waited a whole batch of them for the next pass). :class:`VerdictWrites` keeps what is in
flight, so the next pass decides on the Workloads as these writes make them and leaves each alone until its answer
is in; it sends the writes in order, holds back reservations that the worker's admission can carry
(``manager.reservation_holds``), and turns each answer into what follows from it: the overlay of the Workloads,
the metrics, the Events, and for a refused write the Workload decided again.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import structlog

from federation.admission.api_drain import WorkloadUpdate
from federation.admission.parking import ParkingLot
from federation.admission.queue_metrics import pods_ready_to_evicted, queued_since, workload_labels
from federation.conditions import find_condition, parse_time
from federation.kube.api import KubeApi
from federation.kube.errors import Conflict, Invalid, KubeError
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventSink
from federation.kube.refusal import RefusalReporter, is_refusal
from federation.kube.resources import WORKLOADS
from federation.merge_patch import apply_merge_patch
from federation.obs.metrics import Metrics
from manager.decisions.ledger import InFlightLedger
from manager.reservation_holds import HeldReservation, ReservationHolds

log = structlog.get_logger(__name__)

REFUSED_RETRY_SECONDS = 5.0
"""After a status write this cluster refused (403/401), the next pass is made this much later at the latest (an
earlier one, for other changes, decides the Workload again too)."""


class VerdictWrites:
    def __init__(
        self,
        *,
        api: KubeApi,
        field_manager: str,
        writers: int,
        workload_view: WriteOverlay,
        ledger: InFlightLedger,
        parking: ParkingLot,
        metrics: Metrics,
        events: EventSink,
        holds: ReservationHolds | None,
        start_soon: Callable[..., None],
        changed: Callable[[str], None],
        trigger: Callable[[], None],
        wake_by: Callable[[float], None],
    ) -> None:
        """``writers``: how many writes may be in flight at once; ``start_soon``: starts a task in the scheduler's
        task group; ``changed(key)``: a Workload the next pass must classify again; ``trigger()``: a pass soon;
        ``wake_by(at)``: a pass at epoch second ``at`` at the latest."""
        self._api = api
        self._field_manager = field_manager
        self._writers_allowed = writers
        self._workload_view = workload_view
        self._ledger = ledger
        self._parking = parking
        self._metrics = metrics
        self._events = events
        self._holds = holds
        self._start_soon = start_soon
        self._changed = changed
        self._trigger = trigger
        self._wake_by = wake_by
        self._refusals = RefusalReporter(
            events=events, component="kfed-manager", lookup=workload_view.get, action="Schedule"
        )
        self.in_flight: dict[str, tuple[WorkloadUpdate, dict[str, Any]]] = {}
        """Status writes sent and not answered yet: key -> (the update, the Workload as it will be)."""
        self._queue: deque[WorkloadUpdate] = deque()
        """Status writes not sent yet, sent in order by at most ``writers`` writer tasks: one task per write (and a
        limiter) cost more than the pass itself when a pass decided 100,000 Workloads."""
        self._writers = 0
        self._write_alone: set[str] = set()
        """Workloads whose held reservation's write failed other than by a Conflict: not held again until one of
        their reservations is written (a write that failed once with another's patch is not tried that way again)."""
        self._preemptors: dict[str, tuple[str, str]] = {}
        """victim key -> (preempting ClusterQueue, Kueue's preemption reason), counted once the eviction is written."""
        self._answered: anyio.Event | None = None
        self._invalid: dict[str, str] = {}
        """key -> the validation error last reported for its status write, until one of its writes goes through."""

    def __len__(self) -> int:
        return len(self.in_flight)

    async def answered(self) -> None:
        """Wait until every status write sent so far is answered."""
        while self.in_flight:
            self._answered = anyio.Event()
            await self._answered.wait()

    def may_hold(self, key: str, worker: str, *, worker_admits_first: bool) -> bool:
        """A reservation of ``key`` for ``worker`` is worth holding: holds are on, the worker runs kfed-agent (whose
        admission of the copy the remote sync waits for before it sends the Job copy; a stock Kueue worker gets both
        at once), and no earlier hold of it failed."""
        return (
            self._holds is not None and self._holds.seconds > 0 and worker_admits_first and key not in self._write_alone
        )

    def preempting(self, victim: str, *, cluster_queue: str, reason: str) -> None:
        """``victim``'s eviction, about to be written, is a preemption by ``cluster_queue`` (counted once written)."""
        self._preemptors[victim] = (cluster_queue, reason)

    def send(self, update: WorkloadUpdate, *, hold: bool) -> None:
        """Write ``update`` after the pass (``hold``: a reservation the next write of the Workload may carry)."""
        shown = {**update.raw, "status": apply_merge_patch(update.raw.get("status") or {}, update.status)}
        self.in_flight[update.key] = (update, shown)
        if hold and update.outcome == "reserved":
            self._hold(update, shown)
        else:
            self._enqueue(update)

    def _enqueue(self, update: WorkloadUpdate) -> None:
        self._queue.append(update)
        if self._writers < self._writers_allowed:
            self._writers += 1
            self._start_soon(self._send_queued)

    def _hold(self, update: WorkloadUpdate, shown: dict[str, Any]) -> None:
        """Hold the reservation back: the remote sync sends the Workload copy at once, and the Workload's next status
        write (normally Admitted, once the worker admitted the copy) records both; if none comes within the hold,
        the reservation is written on its own."""
        assert self._holds is not None
        held = HeldReservation(
            status=update.status, before=update.raw, shown=shown, settle=partial(self._settle_held, update)
        )
        self._holds.hold(update.key, held)
        self._start_soon(self._hold_runs_out, update, held)

    async def _hold_runs_out(self, update: WorkloadUpdate, held: HeldReservation) -> None:
        assert self._holds is not None
        await anyio.sleep(self._holds.seconds)
        if self._holds.take_if(update.key, held):
            self._enqueue(update)

    def _settle_held(self, update: WorkloadUpdate, written: dict[str, Any] | None, err: BaseException | None) -> None:
        """The write that carried a held reservation was answered (the remote sync's, with its own patch)."""
        try:
            if written is not None:
                self._after_write(update, written)
            else:
                if not isinstance(err, Conflict):  # refused or invalid: its next reservation is written on its own
                    self._write_alone.add(update.key)
                self._after_refusal(update, err)
        finally:
            self._answered_for(update)

    def _answered_for(self, update: WorkloadUpdate) -> None:
        if self.in_flight.get(update.key, (None,))[0] is update:
            del self.in_flight[update.key]
            self._changed(update.key)
        if self._answered is not None:
            self._answered.set()

    async def _send_queued(self) -> None:
        """One writer: sends queued status writes until none is left."""
        try:
            while self._queue:
                update = self._queue.popleft()
                try:
                    await self._write(update)
                finally:
                    if self._holds is not None:
                        self._holds.sent(update.key)
                    self._answered_for(update)
        finally:
            self._writers -= 1

    async def _write(self, update: WorkloadUpdate) -> None:
        meta = update.raw["metadata"]
        try:
            written = await self._api.patch_status(
                WORKLOADS,
                meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": update.status},
                namespace=meta["namespace"],
                field_manager=self._field_manager,
            )
        except (Conflict, KubeError) as err:
            self._after_refusal(update, err)
            return
        self._after_write(update, written)

    def _after_refusal(self, update: WorkloadUpdate, err: BaseException | None) -> None:
        self._parking.unpark(update.key)  # its verdict is not written: decided again on the next pass
        self._ledger.forget(update.key)
        self._preemptors.pop(update.key, None)
        shown = self.in_flight.get(update.key, (None, None))[1]
        if shown is not None:
            self._workload_view.unshow(shown)  # a held reservation was shown: the cache is the truth again
        if isinstance(err, KubeError) and is_refusal(err):
            # RBAC: named on the Workload once; decided again, at the latest after a pause
            self._refusals.refused(update.key, err, retry_in=REFUSED_RETRY_SECONDS, regarding=update.raw)
            self._wake_by(time.time() + REFUSED_RETRY_SECONDS)
            return
        if isinstance(err, Invalid):
            self._report_invalid(update, err)
            self._wake_by(time.time() + REFUSED_RETRY_SECONDS)  # no pass at once: the next one, by then at the latest
            return
        log.info("workload status write failed; will decide again", workload=update.key, error=str(err))
        self._trigger()

    def _report_invalid(self, update: WorkloadUpdate, err: Invalid) -> None:
        """The apiserver's validation refused a status a pass computed (a fault in kfed, or a Workload CRD other
        than the one kfed speaks): deciding again at once would send the same. An error log line and a Warning
        Event on the Workload, once per Workload and error until one of its writes goes through; no pass is
        started for it at once (the next one decides it again, in ``REFUSED_RETRY_SECONDS`` at the latest)."""
        message = str(err)
        if self._invalid.get(update.key) == message:
            return
        self._invalid[update.key] = message
        log.error(
            "workload status write refused as invalid; decided again by a later pass",
            workload=update.key,
            error=message[:500],
            retry_in=REFUSED_RETRY_SECONDS,
        )
        note = (
            f"kfed-manager's status update was refused as invalid: {message[:700]}; decided again by a later pass "
            f"(within {REFUSED_RETRY_SECONDS:.0f}s). The status kfed computed fails this cluster's Workload CRD."
        )
        self._events.emit(update.raw, reason="InvalidStatusUpdate", note=note, action="Schedule", event_type="Warning")

    def _after_write(self, update: WorkloadUpdate, written: dict[str, Any]) -> None:
        self._refusals.succeeded(update.key)
        if self._invalid:
            self._invalid.pop(update.key, None)
        self._workload_view.wrote(update.raw, written)  # the next pass sees it even before the cache does
        namespace, local_queue, priority_class = workload_labels(update.raw)
        if update.outcome == "preempted":
            self._metrics.evicted(
                cluster_queue=update.cluster_queue or "",
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                reason="Preempted",
                pods_ready_for=pods_ready_to_evicted(update.raw, now=dt.datetime.now(dt.UTC)),
            )
            preemptor = self._preemptors.pop(update.key, None)
            if preemptor is not None:
                self._metrics.preempted(preempting_cluster_queue=preemptor[0], reason=preemptor[1])
            log.info("workload preempted", workload=update.key, queue=update.cluster_queue, message=update.message)
        if update.outcome == "reserved":
            self._write_alone.discard(update.key)
            # from the reservation's own time: a held one is written later than it was decided
            reserved = find_condition({"status": update.status}, "QuotaReserved") or {}
            at = parse_time(str(reserved["lastTransitionTime"])) if reserved.get("lastTransitionTime") else None
            self._metrics.quota_reserved(
                cluster_queue=update.cluster_queue or "",
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                waited=((at or dt.datetime.now(dt.UTC)) - parse_time(queued_since(update.raw))).total_seconds(),
            )
            log.info(
                "quota reserved and worker nominated",
                workload=update.key,
                queue=update.cluster_queue,
                cluster=update.status["nominatedClusterNames"][0],
            )
        for event in update.events:
            self._events.emit(
                update.raw, reason=event.reason, note=event.message, action="Schedule", event_type=event.event_type
            )
