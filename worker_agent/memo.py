"""Values the agent's passes derive from one object, computed once per object instead of once per pass.

Why this module exists: every pass of the reconciler looks at every Workload and Job in the caches (is it evicted
and still holding quota? which Workload does this Job name? is its Job copy overdue?), and in a burst passes follow
each other every few milliseconds while each object changes only a few times in its life. The watch caches and the
agent's write overlays replace an object on every change and never change one in place (``federation.kube.store``:
returned dicts are shared, not to be mutated), so the same object — by identity — still yields the same value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")
Obj = dict[str, Any]


class PerObject(Generic[V]):
    """``derive(obj)`` memoised by the object's identity. Entries hold their object, so an id is never reused while
    its entry lives; :meth:`rotate` once per pass drops the values that no pass asked for since the rotation before
    (their objects were replaced or deleted)."""

    def __init__(self, derive: Callable[[Obj], V]) -> None:
        self._derive = derive
        self._current: dict[int, tuple[Obj, V]] = {}
        self._previous: dict[int, tuple[Obj, V]] = {}
        self.derived = 0
        """How many times ``derive`` ran (for tests and the curious)."""

    def __call__(self, obj: Obj) -> V:
        key = id(obj)
        found = self._current.get(key)
        if found is not None and found[0] is obj:
            return found[1]
        found = self._previous.get(key)
        if found is None or found[0] is not obj:
            found = (obj, self._derive(obj))
            self.derived += 1
        self._current[key] = found
        return found[1]

    def rotate(self) -> None:
        self._previous, self._current = self._current, {}

    def __len__(self) -> int:
        return len(self._current.keys() | self._previous.keys())


class IdlePairs:
    """The pairs of objects (by identity; e.g. a Job and its Workload) for which a pass had nothing to do, by key:
    while neither object is replaced, the next pass has nothing to do for them either. Each pass starts with
    :meth:`begin` and records again what is still idle, so pairs whose key went away are forgotten."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[Obj, Obj]] = {}
        self._next: dict[str, tuple[Obj, Obj]] = {}

    def begin(self) -> None:
        self._last, self._next = self._next, {}

    def unchanged(self, key: str, first: Obj, second: Obj) -> bool:
        """True (and still idle for the next pass) when ``key`` was idle with these very objects."""
        last = self._last.get(key)
        if last is not None and last[0] is first and last[1] is second:
            self._next[key] = last
            return True
        return False

    def idle(self, key: str, first: Obj, second: Obj) -> None:
        """The pass had nothing to do for ``key`` with these objects."""
        self._next[key] = (first, second)


__all__ = ["IdlePairs", "PerObject"]
