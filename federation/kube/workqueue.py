"""A keyed work queue for level-triggered reconcilers, in the spirit of client-go's workqueue.

Events only say *which* object to look at; the reconciler re-reads current state. A key is queued at most once;
a key that changes while it is being processed is processed again afterwards (never concurrently); a failed
key is retried after a capped exponential backoff; ``add_after`` schedules a future look (timeouts).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import structlog

from federation.kube.errors import Conflict, KubeError

log = structlog.get_logger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]
"""``reconcile(key)`` returns None when done, or seconds after which to look again."""


class WorkQueue:
    def __init__(self, name: str, *, base_delay: float = 0.05, max_delay: float = 30.0) -> None:
        self.name = name
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._failures: dict[str, int] = {}
        self._wakeup = anyio.Event()
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._task_group: anyio.abc.TaskGroup | None = None

    def add(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.append(key)
        self._wakeup.set()

    def add_after(self, key: str, delay: float) -> None:
        if self._task_group is None or delay <= 0:
            self.add(key)
            return

        async def later() -> None:
            await anyio.sleep(delay)
            self.add(key)

        self._task_group.start_soon(later)

    def __len__(self) -> int:
        return len(self._queue)

    def _retry_delay(self, key: str) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return float(min(self._max_delay, self._base_delay * math.pow(2, min(failures - 1, 30))))

    async def run(self, reconcile: Reconcile, *, workers: int = 1) -> None:
        """Process keys with ``workers`` concurrent reconcilers until cancelled."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for _ in range(workers):
                tg.start_soon(self._worker, reconcile)

    async def _worker(self, reconcile: Reconcile) -> None:
        while True:
            while not self._queue:
                self._wakeup = anyio.Event()
                await self._wakeup.wait()
            key = self._queue.popleft()
            self._queued.discard(key)
            self._active.add(key)
            again: float | None = None
            failed = False
            try:
                again = await reconcile(key)
                self._failures.pop(key, None)
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
            finally:
                self._active.discard(key)
            if failed:
                self._dirty.discard(key)  # the retry below re-reads everything; backoff is not skipped
                self.add_after(key, again or 0.0)
            elif key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif again is not None:
                self.add_after(key, again)
