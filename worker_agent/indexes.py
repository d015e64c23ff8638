"""Which Workloads and Jobs the agent's passes must look at, kept up to date by key instead of found by a walk.

Why this module exists: the reconciler's passes ask the same questions on every pass (which Workloads are evicted
but still hold quota, which may take an admission-check or a requeue step, which were deactivated here, which
kfed-manager copies wait for their Job copy, which Workload each Job names, which Jobs may have something to do),
and answering them by walking every cached object made about ten walks a pass: in a burst, most of the agent's CPU,
while each pass follows a handful of changes. Here every change to a key — a watch event, or one of the agent's own
writes shown by its overlay (``worker_agent.overlay``), but not the event that only echoes that write — is noted
(:class:`ChangedKeys`, wired by ``worker_agent.world``), and each index brings the answers for those keys up to date
when a pass asks (``refresh``), so a pass costs what changed, not what exists.
An index that cannot tell what changed (its first use, a re-list, a new store) answers afresh for every key.

The answers come from the object alone (``decisions.facts``), so they are exactly what a walk would find. No I/O:
the indexes read through the lookups they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from worker_agent.decisions.facts import WorkloadFacts, job_target, workload_facts

Obj = dict[str, Any]
Lookup = Callable[[str], Obj | None]
"""The freshest copy under a ``namespace/name`` key (the overlay's write, else the cache's), or None."""


class KeyReader:
    """The keys one reader has not taken yet (all of them until its first :meth:`take`)."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._everything = True

    def mark(self, key: str) -> None:
        self._keys.add(key)

    def mark_everything(self) -> None:
        self._everything = True

    def take(self) -> set[str] | None:
        """The keys changed since the last take; None when everything must be looked at."""
        keys, self._keys = self._keys, set()
        if self._everything:
            self._everything = False
            return None
        return keys


class ChangedKeys:
    """The keys of one kind whose freshest copy changed, noted for every reader, which takes them at its own pace."""

    def __init__(self) -> None:
        self._readers: list[KeyReader] = []

    def reader(self) -> KeyReader:
        reader = KeyReader()
        self._readers.append(reader)
        return reader

    def mark(self, key: str) -> None:
        for reader in self._readers:
            reader.mark(key)


class StoreGeneration:
    """Whether the keys a reader was told of still cover the source: not after its store was replaced or re-listed
    (the handlers hear of a re-list's difference only after the new content is in place)."""

    def __init__(self, generation: Callable[[], tuple[object, int]]) -> None:
        """``generation``: the source's store and its re-list count."""
        self._read = generation
        self._seen: tuple[int, int] | None = None

    def moved(self) -> bool:
        """True on the first call and whenever the store or its re-list count changed since the call before."""
        store, relists = self._read()
        now = (id(store), relists)
        if now == self._seen:
            return False
        self._seen = now
        return True


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where an index reads from: the changes noted for it, the freshest copy by key, every key there is (the cache's
    and the overlay's), and the cache's store with its re-list count."""

    changes: KeyReader
    lookup: Lookup
    keys: Callable[[], Iterable[str]]
    generation: Callable[[], tuple[object, int]]


class _KeyedIndex:
    """What both indexes share: answers kept by key, brought up to date from the keys that changed, or from every key
    when the changes are not known. Subclasses say how to forget everything and how to answer for one key."""

    def __init__(self, source: KeySource) -> None:
        self._changes = source.changes
        self._lookup = source.lookup
        self._keys = source.keys
        self._generation = StoreGeneration(source.generation)

    def refresh(self) -> set[str] | None:
        """Bring the answers up to date; returns the keys looked at (None: every key)."""
        changed = self._changes.take()
        if self._generation.moved():
            changed = None
        if changed is None:
            self._clear()
            for key in set(self._keys()):
                self._update(key)
            return None
        for key in changed:
            self._update(key)
        return changed

    def _clear(self) -> None:
        raise NotImplementedError

    def _update(self, key: str) -> None:
        raise NotImplementedError


_TIMES = ("job_copy_admitted_since", "execution_deadline")
"""The facts that are times (epoch seconds or None), kept per key; the others are booleans, kept as key sets."""
_FACT_FIELDS = tuple(f.name for f in fields(WorkloadFacts) if f.name not in _TIMES)


class WorkloadIndex(_KeyedIndex):
    """The keys of the Workloads for which each of ``decisions.facts.WorkloadFacts``'s answers holds."""

    def __init__(self, source: KeySource) -> None:
        super().__init__(source)
        self._facts: dict[str, WorkloadFacts] = {}
        self._holding: dict[str, set[str]] = {name: set() for name in _FACT_FIELDS}
        self.job_copy_admitted_since: dict[str, float] = {}
        """Key → admission time (epoch seconds) of each kfed-manager copy waiting for its Job copy."""
        self.execution_deadlines: dict[str, float] = {}
        """Key → when (epoch seconds) each admitted Workload with a maximum execution time has spent it."""
        self.derived = 0
        """How many times an object's facts were derived (for tests and the curious)."""

    def _clear(self) -> None:
        self._facts.clear()
        for held in self._holding.values():
            held.clear()
        self.job_copy_admitted_since.clear()
        self.execution_deadlines.clear()

    def _update(self, key: str) -> None:
        obj = self._lookup(key)
        before = self._facts.get(key)
        after = workload_facts(obj) if obj is not None else None
        if after is not None:
            self.derived += 1
        if before == after:
            return
        if after is None:
            del self._facts[key]
        else:
            self._facts[key] = after
        for name, held in self._holding.items():
            if after is not None and getattr(after, name):
                held.add(key)
            else:
                held.discard(key)
        for times, at in (
            (self.job_copy_admitted_since, after.job_copy_admitted_since if after is not None else None),
            (self.execution_deadlines, after.execution_deadline if after is not None else None),
        ):
            if at is None:
                times.pop(key, None)
            else:
                times[key] = at

    def holding(self, fact: str) -> list[str]:
        """The keys (sorted) of the Workloads for which the boolean ``fact`` of ``WorkloadFacts`` holds."""
        return sorted(self._holding[fact])


class JobIndex(_KeyedIndex):
    """Which Workload each Job names (``decisions.facts.job_target``), and the Jobs naming each Workload."""

    def __init__(self, source: KeySource) -> None:
        super().__init__(source)
        self.target: dict[str, tuple[str, str]] = {}
        """Job key → ``(namespace, name)`` of the Workload it names (Jobs naming none are absent)."""
        self._naming: dict[str, set[str]] = {}

    @property
    def named(self) -> Mapping[str, set[str]]:
        """Workload key → the keys of the Jobs naming it (only Workloads some Job names)."""
        return self._naming

    def _clear(self) -> None:
        self.target.clear()
        self._naming.clear()

    def _update(self, key: str) -> None:
        job = self._lookup(key)
        after = job_target(job) if job is not None else None
        before = self.target.get(key)
        if before == after:
            return
        if before is not None:
            old = f"{before[0]}/{before[1]}"
            jobs = self._naming[old]
            jobs.discard(key)
            if not jobs:
                del self._naming[old]
        if after is None:
            self.target.pop(key, None)
        else:
            self.target[key] = after
            self._naming.setdefault(f"{after[0]}/{after[1]}", set()).add(key)


__all__ = ["ChangedKeys", "JobIndex", "KeyReader", "KeySource", "Lookup", "StoreGeneration", "WorkloadIndex"]
