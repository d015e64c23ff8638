"""A watch cache's store seen through this process's own recent writes (read-your-writes for controllers).

A controller that writes an object gets the new version back at once, but its cache shows it only when the watch
event arrives, tens to hundreds of milliseconds later on a busy apiserver. A controller deciding again meanwhile
decides on state it has already changed: the global scheduler reserved quota for a Workload a second time (a 409
Conflict at best, a wrong ledger at worst), the remote sync marked a Workload Admitted twice. With more concurrent
reconciles this became the common case (308 Conflicts in a 300-Job burst instead of 9).

:class:`WriteOverlay` keeps, per key, the object a write returned and the resourceVersions it supersedes (the one
the write was based on and, for a chain of writes, the ones before). While the cache still holds one of those, the
overlay's object is the truth; as soon as the cache holds anything else (our write arrived, or a later one, or the
object was deleted) the entry is dropped and the cache is the truth again. Knowing what each write superseded, the
overlay needs to compare resourceVersions only for equality (the agent's ``worker_agent.overlay``, which is not
told, orders them as Kubernetes allows since v1.35: ``federation.kube.versions``). An object this process created is
shown the same way until the cache lists it (:meth:`WriteOverlay.created`; :meth:`get` only, iteration shows the
cache's objects), unless the cache already saw it deleted: on a busy machine the watch can deliver a create and its
deletion before the creator resumes, so the overlay remembers the uids of the last deletions it observed.
Deletions are not laid over: a deleted object stays visible until the cache drops it (a Job deleted in the
foreground still has pods until then).

A write this process has decided but not sent yet can be shown the same way (:meth:`WriteOverlay.show`): the object
as the write will make it, at the version the write will be based on, until the write's answer replaces it or the
cache moves on (:meth:`WriteOverlay.unshow` takes it back when the write is refused).

An event that only brings back what the overlay shows already (the answer to our own write, or an earlier write of
the same chain) is an *echo*: :meth:`WriteOverlay.observe_echo` names the writer of the write it echoes (each write
may carry one), and that writer need not look at the object again for it, provided the pass that wrote looks again
itself when its write calls for more (:func:`look_again_after_writes` counts a pass's writes). Another controller of
the same process may not have seen the write: for it, the echo is news.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio

from federation.kube.store import DELETED, Store

Obj = dict[str, Any]

_ABSENT = ""
"""The "version" of an object the cache does not hold yet (no resourceVersion is empty)."""


def _version(obj: Obj | None) -> str | None:
    if obj is None:
        return None
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None


RECENT_DELETIONS = 4096
"""How many deleted objects' uids an overlay remembers (an answer that arrives after its object's deletion)."""


class RecentDeletions:
    """The uids of the last :data:`RECENT_DELETIONS` objects a cache saw deleted (both processes' overlays use it:
    a write's answer for one of them is history, not an object to show)."""

    def __init__(self) -> None:
        self._uids: dict[str, None] = {}  # oldest first

    def observe(self, event: str, obj: Mapping[str, Any]) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if event == DELETED and uid:
            self._uids[str(uid)] = None
            if len(self._uids) > RECENT_DELETIONS:
                del self._uids[next(iter(self._uids))]

    def saw(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (by its uid) is one the cache saw deleted."""
        uid = (obj.get("metadata") or {}).get("uid")
        return bool(uid) and str(uid) in self._uids


class WriteTally:
    """The writes laid over any overlay by one reconcile pass (see :func:`look_again_after_writes`)."""

    __slots__ = ("_settled", "count")

    def __init__(self) -> None:
        self.count = 0
        self._settled = 0

    def settle(self) -> None:
        """The writes so far call for no further look (the pass decided on what they made)."""
        self._settled = self.count

    @property
    def unsettled(self) -> bool:
        """Whether a write was laid over since the pass began or last settled."""
        return self.count > self._settled


_TALLY: ContextVar[WriteTally | None] = ContextVar("kfed_write_tally", default=None)


async def look_again_after_writes(run: Callable[[WriteTally], Awaitable[float | None]]) -> float | None:
    """One reconcile pass, ``run(tally)``, with the writes (creates, shown and taken-back writes too) it and the tasks
    it starts (they share its context) lay over any :class:`WriteOverlay` counted in ``tally``: a pass that wrote and
    did not settle is looked at again at once (0.0), as its echo would have made it; otherwise the pass's own answer
    (the seconds until it wants to look again, or None)."""
    tally = WriteTally()
    token = _TALLY.set(tally)
    try:
        again = await run(tally)
    finally:
        _TALLY.reset(token)
    return 0.0 if tally.unsettled else again


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


@dataclass(slots=True)
class _Written:
    obj: Obj
    superseded: frozenset[str]
    """resourceVersions older than ``obj``: while the cache holds one of them, ``obj`` is newer."""
    writer: str = ""
    """Who made the write (``""``: not named)."""


class WriteOverlay:
    """A read-only view of ``store`` with this process's recent writes laid over it (see the module docstring).

    Feed it every write's answer with :meth:`wrote` and every cache event with :meth:`observe` (a cache handler).
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._written: dict[str, _Written] = {}
        self._deleted = RecentDeletions()
        self._listeners: list[Callable[[str], None]] = []
        self.write_lock = anyio.Lock()
        """Held by the writers that share this view from reading an object to laying their write's answer over it:
        two of them never write at the same base version (a 409 Conflict on the process's own object)."""

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(key)`` is called when a write or a create is laid over (or forgotten) under ``key``; an entry
        dropped because the cache moved on is not reported (the cache's own event is)."""
        self._listeners.append(listener)

    def _laid(self, key: str) -> None:
        tally = _TALLY.get()
        if tally is not None:
            tally.count += 1
        for listener in self._listeners:
            listener(key)

    def __len__(self) -> int:
        return len(self._store)

    @property
    def pending(self) -> int:
        """Writes the cache has not shown yet."""
        return len(self._written)

    def wrote(self, before: Obj, after: Obj, *, writer: str = "") -> None:
        """``after`` is what the apiserver answered to a write made on ``before`` (an object this view handed out,
        or an earlier write's answer); ``writer`` names who made it (see :meth:`observe_echo`)."""
        base = _version(before)
        new = _version(after)
        if base is None or new is None or base == new:
            return
        key = _key(after)
        previous = self._written.get(key)
        chain = previous.superseded if previous is not None and _version(previous.obj) == base else frozenset()
        self._written[key] = _Written(after, chain | {base}, writer)
        self._laid(key)

    def created(self, obj: Obj, *, writer: str = "") -> None:
        """``obj`` is what the apiserver answered to a create: shown by :meth:`get` while the cache has no object
        under its key (not when the cache has already seen it deleted)."""
        if _version(obj) is not None and not self._deleted.saw(obj):
            key = _key(obj)
            self._written[key] = _Written(obj, frozenset({_ABSENT}), writer)
            self._laid(key)

    def show(self, before: Obj, shown: Obj) -> None:
        """Show ``shown`` (a write decided on ``before`` and not sent yet, at ``before``'s version) while the cache
        still holds ``before``'s version; the write's answer, fed to :meth:`wrote` with ``shown`` as its base,
        replaces it."""
        base = _version(before)
        if base is not None:
            key = _key(before)
            self._written[key] = _Written(shown, frozenset({base}))
            self._laid(key)

    def unshow(self, shown: Obj) -> None:
        """Take back what :meth:`show` showed (its write was refused), unless something replaced it since."""
        key = _key(shown)
        entry = self._written.get(key)
        if entry is not None and entry.obj is shown:
            del self._written[key]
            self._laid(key)

    def forget(self, key: str) -> None:
        if self._written.pop(key, None) is not None:
            self._laid(key)

    def observe(self, event: str, obj: Obj, _old: Obj | None = None) -> None:
        """A cache event (a cache handler): once the cache holds a version our write did not supersede, the write
        has arrived (or was overtaken) and the cache is the truth again."""
        self.observe_echo(event, obj)

    def observe_echo(self, event: str, obj: Obj) -> str | None:
        """:meth:`observe`, answering whether the event is an echo: the writer of the latest write when :meth:`get`
        shows for this key what it showed before the event (that write's answer, or a version it supersedes), else
        None. A deletion is never an echo."""
        key = _key(obj)
        self._deleted.observe(event, obj)
        entry = self._written.get(key)
        if entry is None:
            return None
        version = _version(obj)
        if event == DELETED:
            del self._written[key]
            return None
        if version in entry.superseded:
            return entry.writer
        del self._written[key]
        return entry.writer if version is not None and version == _version(entry.obj) else None

    def _current(self, key: str, cached: Obj | None) -> Obj | None:
        entry = self._written.get(key)
        if entry is None:
            return cached
        if (_version(cached) or _ABSENT) in entry.superseded:
            return entry.obj
        del self._written[key]
        return cached

    def get(self, key: str) -> Obj | None:
        return self._current(key, self._store.get(key))

    def get_by_name(self, name: str, *, namespace: str | None = None) -> Obj | None:
        return self.get(f"{namespace}/{name}" if namespace else name)

    def get_listed(self, key: str) -> Obj | None:
        """The object under ``key`` as iterating shows it: only one the cache holds (a created one the cache does
        not list yet is not shown)."""
        cached = self._store.get(key)
        return None if cached is None else self._current(key, cached)

    def __iter__(self) -> Iterator[Obj]:
        if not self._written:
            return iter(self._store)
        return (obj for obj in (self._current(_key(o), o) for o in self._store) if obj is not None)
