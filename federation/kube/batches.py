"""Items gathered per key and handed over in batches: one request for many objects instead of one each.

``add(key, item_id, item)`` puts an item in its key's pending batch (an item already there under the same id is
replaced). The first item of a key starts that key's window; when it is over, the whole pending batch goes to
``flush(key, items)``. Items that come while a key's flush is under way wait for it, and go in the next batch, one
window later: a key is never flushed twice at once. Keys never wait for each other, so a flush stuck on one key
(a worker that stopped answering) holds up only that key's items.

``flush`` is the caller's own; one that raises is logged, and its items are not tried again here (the caller's
next look at them adds them again). Batches run only inside :meth:`Batches.run`; ``running`` says whether items
added now will be flushed, so a caller can do the work item by item when they would not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio
import anyio.abc
import structlog

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Batches(Generic[K, V]):
    def __init__(self, name: str, flush: Callable[[K, list[V]], Awaitable[None]], *, window: float) -> None:
        self.name = name
        self._flush = flush
        self._window = window
        self._pending: dict[K, dict[str, V]] = {}
        self._draining: set[K] = set()
        """Keys with a task that waits out their window or flushes them."""
        self._tg: anyio.abc.TaskGroup | None = None
        self.flushes = 0
        """Batches handed to ``flush`` so far."""

    @property
    def running(self) -> bool:
        return self._tg is not None

    def add(self, key: K, item_id: str, item: V) -> None:
        """Queue ``item`` for ``key``'s next batch; raises RuntimeError outside :meth:`run`."""
        if self._tg is None:
            raise RuntimeError(f"batches {self.name}: add() outside run()")
        self._pending.setdefault(key, {})[item_id] = item
        if key not in self._draining:
            self._draining.add(key)
            self._tg.start_soon(self._drain, key)

    def pending(self, key: K) -> int:
        return len(self._pending.get(key) or ())

    async def run(self) -> None:
        """Flush batches until cancelled; what is pending then is dropped (its owners add it again)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._pending.clear()
            self._draining.clear()

    async def _drain(self, key: K) -> None:
        try:
            while self._pending.get(key):
                await anyio.sleep(self._window)
                items = list(self._pending.pop(key, {}).values())
                if not items:
                    continue
                self.flushes += 1
                try:
                    await self._flush(key, items)
                except Exception as err:  # the flush's owner adds the items again when it looks at them next
                    log.warning("batch flush failed", batches=self.name, key=str(key), items=len(items),
                                error=f"{type(err).__name__}: {err}"[:300])  # fmt: skip
        finally:
            self._draining.discard(key)
