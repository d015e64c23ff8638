"""Python's cyclic garbage collector in kfed-manager and kfed-agent: what the watch caches hold is frozen out of it.

A watch cache holds every object of its kind as nested dicts and lists, dozens of collector-tracked containers per
Workload. At 100,000 pending Workloads that is millions of objects, and every full (generation-2) collection walks
all of them again although a cached object is never changed in place (a watch event replaces it). Those full
collections were most of the manager's scheduling-pass p99 at that size (``make bench BENCH=schedpass``).

So once a leadership term's caches have synced for the first time, the process collects what is garbage then and
freezes the rest (``gc.freeze()``): the cached objects, modules and configuration move to the permanent generation,
which collections skip. Nothing else changes: a frozen object that is replaced later is still freed by its reference
count. Only cyclic garbage among frozen objects is never freed, and a term's runtime, controllers and cache
handlers refer to each other; so the end of a term unfreezes (``thaw``), the next full collection frees what the term
left, and the next term's first sync freezes again.

The cache is not frozen for long: every watch event and status write replaces a cached object with an unfrozen one
(the first pass at 100,000 pending writes every Workload's status). Freezing also raises the youngest generation's
threshold to :data:`GEN0_THRESHOLD`, so that far fewer short-lived objects of a pass are promoted to the older
generations, and full collections (triggered by what is promoted) become rare.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)

GEN0_THRESHOLD = 50_000
"""Allocations (minus deallocations) of tracked objects between two youngest-generation collections, once frozen.

Python's default is 700. ``make bench BENCH=schedpass`` at 100,000 pending, frozen, on an idle 2-core machine: 700
had 11 full collections (3.4 s) during the passes, first pass 11.6 s, later passes p99 2.05 s; 50,000 had none, first
pass 9.3 s, later passes p99 1.40 s (10,000: 2 full, 0.9 s). Cyclic garbage then waits a little longer: a few MB.
"""


class Synced(Protocol):
    """A watch cache, as far as freezing goes: whether it has synced."""

    @property
    def synced(self) -> bool: ...


def should_freeze(*, frozen: bool, synced: Iterable[bool]) -> bool:
    """Freeze when every cache of the term has synced and nothing is frozen yet (once per term)."""
    return not frozen and all(synced)


class CacheFreeze:
    """When to freeze: once, after the first sync of all of a term's caches; undone when the term ends.

    The collector is process-wide, so a process uses the one :data:`PROCESS` instance; ``collect``, ``freeze`` and
    ``unfreeze`` and ``set_threshold`` are the :mod:`gc` functions (a test gives its own to check the order).
    """

    def __init__(
        self,
        *,
        collect: Callable[[], object] = gc.collect,
        freeze: Callable[[], None] = gc.freeze,
        unfreeze: Callable[[], None] = gc.unfreeze,
        set_threshold: Callable[..., None] = gc.set_threshold,
    ) -> None:
        self._collect = collect
        self._freeze = freeze
        self._unfreeze = unfreeze
        self._set_threshold = set_threshold
        self.frozen = False

    def after_first_sync(self, component: str, caches: Iterable[Synced]) -> bool:
        """Collect, freeze everything alive and raise the gen-0 threshold, once all ``caches`` have synced.

        Only once per term; True if it froze now. Called before the caches synced it freezes nothing (and says so):
        what is frozen then would be the start-up's garbage and none of the cached objects.
        """
        synced = [cache.synced for cache in caches]
        if not should_freeze(frozen=self.frozen, synced=synced):
            if not all(synced):
                log.warning("gc.not_frozen", component=component, reason="caches not synced", caches=len(synced))
            return False
        started = time.perf_counter()
        self._collect()  # garbage frozen now would never be freed
        self._freeze()
        self._set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
        self.frozen = True
        log.info(
            "gc.frozen",
            component=component,
            objects=gc.get_freeze_count(),
            seconds=round(time.perf_counter() - started, 3),
        )
        return True

    def thaw(self, component: str) -> None:
        """The term whose caches were frozen ended: let the collector see (and free) them again."""
        if not self.frozen:
            return
        self._unfreeze()
        self.frozen = False
        log.info("gc.thawed", component=component)


PROCESS = CacheFreeze()
"""The process's one freeze state (there is one collector per process)."""


def freeze_after_first_sync(component: str, caches: Iterable[Synced]) -> bool:
    """Called where a term's watch caches have first synced: collect, then ``gc.freeze()`` (once per term).

    Full collections then skip the cached objects, which made most of their cost at 100,000 Workloads.
    """
    return PROCESS.after_first_sync(component, caches)


def thaw_after_term(component: str) -> None:
    """Called when a term ends: unfreeze, so the cycles of the ended term's runtime can be collected."""
    PROCESS.thaw(component)
