"""A keyed work queue for level-triggered reconcilers, in the spirit of client-go's workqueue.

Events only say *which* object to look at; the reconciler re-reads current state. A key is queued at most once;
a key that changes while it is being processed is processed again afterwards (never concurrently with itself);
different keys run up to ``workers`` at a time; a failed key is retried after a capped exponential backoff.
``add_after`` schedules a future look (timeouts) and keeps one pending timer per key, the earliest, like client-go's
delaying queue. A queue made with ``latest_answer_wins`` lets each successful reconcile's answer replace the key's
pending timer instead (None clears it): for a reconciler that derives every deadline again on each pass, an earlier
pass's look-again is stale once a later pass has answered (kfed-manager's remote sync: a status mirror's timer set
while the Job ran used to fire after it had finished, a pass per Job for nothing). An ``observer`` hears of every
failed and every successful reconcile (e.g. to name a refused call where users look, ``federation.kube.refusal``).

Wake-ups are handed to idle workers one each: ``add`` wakes exactly one idle worker, so N queued keys keep N
workers busy (an earlier version shared one wake-up event and ran one reconcile at a time).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
import anyio.abc
import structlog

from federation.kube.errors import Conflict, KubeError

log = structlog.get_logger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]
"""``reconcile(key)`` returns None when done, or seconds after which to look again."""


class ReconcileObserver(Protocol):
    def failed(self, key: str, err: BaseException, retry_in: float | None) -> None: ...

    def succeeded(self, key: str) -> None: ...


class WorkQueue:
    def __init__(
        self,
        name: str,
        *,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        observer: ReconcileObserver | None = None,
        latest_answer_wins: bool = False,
    ) -> None:
        self.name = name
        self._latest_answer_wins = latest_answer_wins
        self._observer = observer
        self._queue: deque[str] = deque()
        self._urgent: deque[str] = deque()
        """Keys added with ``urgent=True``, taken before ``_queue``. A key moved here stays in ``_queue`` too;
        whichever entry comes first is taken, the other is skipped (it is no longer in ``_queued``)."""
        self._queued: set[str] = set()
        self._urgent_keys: set[str] = set()
        self._dirty_urgent: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._idle: deque[anyio.Event] = deque()
        """One event per idle worker, in the order they went idle; ``add`` sets (and removes) the first."""
        self._timers: dict[str, float] = {}
        """key -> monotonic deadline of its one pending delayed add (the earliest asked for)."""
        self._timer_heap: list[tuple[float, str]] = []
        self._timer_changed = anyio.Event()
        self._base_delay = base_delay
        self._max_delay = max_delay
        self.peak_active = 0
        """Most keys ever reconciled at the same time (for tests and benchmarks)."""

    def add(self, key: str, *, urgent: bool = False) -> None:
        """Queue ``key`` (once). ``urgent`` keys go before all others, first come first served among themselves:
        a step on a user's critical path (a Job waiting to be sent to its worker) must not wait behind a backlog
        of bookkeeping (status mirrors, clean-ups) that could as well come later."""
        if key in self._active:
            self._dirty.add(key)
            if urgent:
                self._dirty_urgent.add(key)
            return
        if key in self._queued:
            if urgent and key not in self._urgent_keys:
                self._urgent_keys.add(key)
                self._urgent.append(key)
            return
        self._queued.add(key)
        if urgent:
            self._urgent_keys.add(key)
            self._urgent.append(key)
        else:
            self._queue.append(key)
        if self._idle:
            self._idle.popleft().set()

    def add_after(self, key: str, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending timer for the key wins over a later one."""
        if delay <= 0:
            self.add(key)
            return
        deadline = anyio.current_time() + delay
        current = self._timers.get(key)
        if current is not None and current <= deadline:
            return
        self._timers[key] = deadline
        heapq.heappush(self._timer_heap, (deadline, key))
        if current is None or deadline < current:
            self._timer_changed.set()

    def pending_timer(self, key: str) -> float | None:
        """Seconds until ``key``'s pending delayed add, or None when it has none."""
        deadline = self._timers.get(key)
        return None if deadline is None else max(0.0, deadline - anyio.current_time())

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def active(self) -> int:
        """Keys being reconciled right now."""
        return len(self._active)

    def _retry_delay(self, key: str) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return float(min(self._max_delay, self._base_delay * math.pow(2, min(failures - 1, 30))))

    async def run(self, reconcile: Reconcile, *, workers: int = 1) -> None:
        """Process keys with ``workers`` concurrent reconcilers until cancelled."""
        if workers < 1:
            raise ValueError("a work queue needs at least one worker")
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._fire_timers)
            for _ in range(workers):
                tg.start_soon(self._worker, reconcile)

    async def _fire_timers(self) -> None:
        while True:
            now = anyio.current_time()
            while self._timer_heap and self._timer_heap[0][0] <= now:
                deadline, key = heapq.heappop(self._timer_heap)
                if self._timers.get(key) == deadline:  # else superseded by an earlier timer that already fired
                    del self._timers[key]
                    self.add(key)
            self._timer_changed = anyio.Event()
            wait = self._timer_heap[0][0] - now if self._timer_heap else math.inf
            with anyio.move_on_after(wait):
                await self._timer_changed.wait()

    async def _next_key(self) -> str:
        while True:
            key = self._pop()
            if key is not None:
                break
            wakeup = anyio.Event()
            self._idle.append(wakeup)
            try:
                await wakeup.wait()
            finally:
                if not wakeup.is_set():  # cancelled while idle
                    self._idle.remove(wakeup)
        if (self._queue or self._urgent) and self._idle:  # a wake-up this worker did not need goes to the next one
            self._idle.popleft().set()
        return key

    def _pop(self) -> str | None:
        """The next queued key (urgent ones first), or None when none is queued."""
        while self._urgent or self._queue:
            key = (self._urgent or self._queue).popleft()
            if key in self._queued:  # else the other entry of a key moved to the urgent lane was taken already
                self._queued.discard(key)
                self._urgent_keys.discard(key)
                return key
        return None

    async def _worker(self, reconcile: Reconcile) -> None:
        while True:
            key = await self._next_key()
            self._active.add(key)
            self.peak_active = max(self.peak_active, len(self._active))
            again: float | None = None
            failed = False
            try:
                again = await reconcile(key)
                self._failures.pop(key, None)
                if self._observer is not None:
                    self._observer.succeeded(key)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as err:  # a reconciler bug or API error must not stop the queue
                failed = True
                again = self._retry_delay(key)
                # A Conflict is optimistic concurrency working (we decided on a stale object): retry quietly.
                report = log.debug if isinstance(err, Conflict) else log.warning
                report(
                    "reconcile failed",
                    queue=self.name,
                    key=key,
                    error=str(err),
                    retry_in=round(again, 2),
                    exc_info=not isinstance(err, KubeError),
                )
                if self._observer is not None:
                    self._observer.failed(key, err, again)
            finally:
                self._active.discard(key)
            if failed:
                self._dirty.discard(key)  # the retry below re-reads everything; backoff is not skipped
                self._dirty_urgent.discard(key)
                self.add_after(key, again or 0.0)
            elif key in self._dirty:
                self._dirty.discard(key)
                urgent = key in self._dirty_urgent
                self._dirty_urgent.discard(key)
                self.add(key, urgent=urgent)
            elif self._latest_answer_wins:
                self._timers.pop(key, None)  # its heap entry is skipped when it comes up
                if again is not None:
                    self.add_after(key, again)
            elif again is not None:
                self.add_after(key, again)
