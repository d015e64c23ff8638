"""The agent's own recent writes, shown in place of the watch cache's older copies until the cache catches up.

Without it, a pass that runs between the agent's write and the watch event would see the stale object and decide
again (a second admission, a second Job start). :class:`RecentWrites` holds the apiserver's answer to each write
and forgets it as soon as the cache delivers that resourceVersion, a later one (compared as kube-apiserver's growing
integers, ``federation.kube.versions``), or a deletion.

The watch may also be ahead of the answer: on a busy machine the write's own event and later ones (the Job
controller's status update after a suspension) can reach the cache before the writer resumes to remember its
answer. So the answer is shown only while it is newer than what the cache holds, checked on every read, not only
when the next event comes (a Job copy stayed "suspended with a pod active" for good when no event followed).
The same goes for a deletion: an answer remembered after the cache saw its object deleted is not shown (the overlay
keeps the uids of the last deletions it observed), or a read by name would find a Workload that is gone.

``federation.kube.overlay.WriteOverlay`` (the manager's views, the agent's queue status writes) does the same job
over one store, told the version each write was based on; the agent's passes read keys and cached objects from
several places (Workloads, Jobs, TAS pods), so this one is given the cached copy on every read and needs only the
answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from federation.kube.overlay import RecentDeletions
from federation.kube.versions import not_older

Obj = dict[str, Any]
_VERSIONS = itertools.count(1)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class RecentWrites:
    """Written objects by ``namespace/name`` key (``name`` for cluster-scoped ones)."""

    def __init__(self, on_change: Callable[[str], None] = lambda _key: None) -> None:
        """``on_change(key)``: what is shown under ``key`` changed because of :meth:`remember` or :meth:`show` (the
        cache's own changes are its handlers' to report)."""
        self._on_change = on_change
        self._written: dict[str, Obj] = {}
        self._in_memory: set[str] = set()
        """Keys whose object was never sent (:meth:`show`): it carries the cached resourceVersion it was made from,
        so the cache has caught up only with a later one."""
        self._deleted = RecentDeletions()
        self.version = next(_VERSIONS)
        """Changes whenever what the overlay shows changes (like ``federation.kube.store.Store.version``)."""

    def __len__(self) -> int:
        return len(self._written)

    def remember(self, written: Obj) -> None:
        """``written`` is the apiserver's answer to a write: shown until the cache holds its version or a later one."""
        if self._deleted.saw(written):
            return  # the cache has seen it deleted since: the answer is history
        key = _key(written)
        self._written[key] = written
        self._in_memory.discard(key)
        self.version = next(_VERSIONS)
        self._on_change(key)

    def show(self, made: Obj) -> None:
        """``made`` is a cached object changed only in this process (e.g. finished during a grace, not written yet),
        at the cached resourceVersion: shown until the cache holds a later version."""
        if self._deleted.saw(made):
            return
        key = _key(made)
        self._written[key] = made
        self._in_memory.add(key)
        self.version = next(_VERSIONS)
        self._on_change(key)

    def keys(self) -> list[str]:
        return list(self._written)

    def _caught_up(self, key: str, seen: Obj, ours: Obj) -> bool:
        seen_version, our_version = _version(seen), _version(ours)
        if key in self._in_memory and seen_version == our_version:
            return False
        return not_older(seen_version, our_version)

    def _forget(self, key: str) -> None:
        del self._written[key]
        self._in_memory.discard(key)

    def echoes(self, event_type: str, obj: Obj) -> bool:
        """Whether a watch event only brings the answer to one of our writes, shown already (the same
        resourceVersion): what readers see does not change. Asked before :meth:`observe` forgets the answer."""
        if event_type == "DELETED":
            return False
        key = _key(obj)
        written = self._written.get(key)
        return written is not None and key not in self._in_memory and _version(written) == _version(obj)

    def observe(self, event_type: str, obj: Obj, _old: Obj | None = None) -> None:
        """Watch-cache handler: drop the entry once the cache has caught up with it (or the object is gone)."""
        key = _key(obj)
        self._deleted.observe(event_type, obj)
        written = self._written.get(key)
        if written is None:
            return
        if event_type == "DELETED" or self._caught_up(key, obj, written):
            self._forget(key)
            self.version = next(_VERSIONS)

    def view(self, cached: Obj) -> Obj:
        """The freshest known copy of ``cached``."""
        return self.view_keyed(_key(cached), cached)

    def view_keyed(self, key: str, cached: Obj) -> Obj:
        """:meth:`view` for a caller that has the key already (a pass over a store's items builds none)."""
        written = self._written.get(key)
        if written is None:
            return cached
        if self._caught_up(key, cached, written):  # the cache got there first (the module docstring): ours is history
            self._forget(key)  # what is shown does not change: no new version
            return cached
        return written

    def get(self, key: str, cached: Obj | None) -> Obj | None:
        """The freshest known copy under ``key``: ours when the cache has none yet (just created) or an older one."""
        if cached is None:
            return self._written.get(key)
        return self.view_keyed(key, cached)
