"""The cached objects are frozen out of Python's collector once per term, after the caches' first sync."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field

from federation.gc_freeze import GEN0_THRESHOLD, CacheFreeze, should_freeze


@dataclass
class _Cache:
    synced: bool


@dataclass
class _Gc:
    calls: list[str] = field(default_factory=list)

    def freezer(self) -> CacheFreeze:
        return CacheFreeze(
            collect=lambda: self.calls.append("collect"),
            freeze=lambda: self.calls.append("freeze"),
            unfreeze=lambda: self.calls.append("unfreeze"),
            set_threshold=lambda *thresholds: self.calls.append(f"threshold {thresholds[0]}"),
        )


def test_freezes_only_once_every_cache_has_synced_and_only_once_per_term() -> None:
    assert should_freeze(frozen=False, synced=[True, True])
    assert not should_freeze(frozen=False, synced=[True, False])
    assert not should_freeze(frozen=True, synced=[True, True])


def test_after_the_first_sync_it_collects_then_freezes_once() -> None:
    fake = _Gc()
    freezer = fake.freezer()
    caches = [_Cache(synced=True), _Cache(synced=False)]
    assert not freezer.after_first_sync("test", caches)  # a cache still listing: nothing cached to freeze yet
    assert fake.calls == []
    caches[1].synced = True
    assert freezer.after_first_sync("test", caches)
    frozen = ["collect", "freeze", f"threshold {GEN0_THRESHOLD}"]
    assert fake.calls == frozen  # garbage is collected first, or it would be frozen for good
    assert not freezer.after_first_sync("test", caches)
    assert fake.calls == frozen


def test_the_end_of_a_term_unfreezes_and_the_next_term_freezes_again() -> None:
    fake = _Gc()
    freezer = fake.freezer()
    freezer.thaw("test")  # a term that ended before its caches synced froze nothing
    assert fake.calls == []
    assert freezer.after_first_sync("test", [_Cache(synced=True)])
    freezer.thaw("test")
    freezer.thaw("test")
    frozen = ["collect", "freeze", f"threshold {GEN0_THRESHOLD}"]
    assert fake.calls == [*frozen, "unfreeze"]
    assert freezer.after_first_sync("test", [_Cache(synced=True)])
    assert fake.calls == [*frozen, "unfreeze", *frozen]


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_frozen_cycle_is_freed_only_after_the_term_thaws() -> None:
    """With the real collector: why the end of a term must unfreeze (a term's runtime is full of cycles)."""
    thresholds = gc.get_threshold()
    freezer = CacheFreeze()
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    alive = weakref.ref(first)
    try:
        assert freezer.after_first_sync("test", [_Cache(synced=True)])
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GEN0_THRESHOLD, *thresholds[1:])
        del first, second
        gc.collect()
        assert alive() is not None  # frozen: the collector never looks at it
        freezer.thaw("test")
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert alive() is None
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
