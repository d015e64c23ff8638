"""The in-memory store behind a watch cache, and the diff that turns a re-list into events.

Keyed by ``namespace/name`` (``name`` for cluster-scoped objects) and holding the raw dicts exactly as the
apiserver sent them. When a cache re-lists (after 410 Gone or a long disconnect) :func:`diff_relist` computes the
events the handlers missed — DELETED for objects that vanished, ADDED for new ones, MODIFIED for changed ones —
so controllers stay level-triggered without special re-list logic. Pure: no I/O.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from federation.kube.api import Obj, object_key

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Change:
    """One event for handlers: ``old`` is the previous state (None for ADDED)."""

    type: str
    obj: Obj
    old: Obj | None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def diff_relist(old: Mapping[str, Obj], new: Mapping[str, Obj]) -> list[Change]:
    """Events that take a store from ``old`` to ``new`` (both keyed by :func:`object_key`).

    An object whose uid changed was deleted and re-created while we were not watching: DELETED then ADDED.
    Objects with an unchanged resourceVersion produce nothing. Deletions come first, then additions and updates
    in ``new``'s order.
    """
    changes: list[Change] = []
    for key, before in old.items():
        after = new.get(key)
        if after is None or _meta(after).get("uid") != _meta(before).get("uid"):
            changes.append(Change(DELETED, before, before))
    for key, current in new.items():
        previous = old.get(key)
        if previous is None or _meta(current).get("uid") != _meta(previous).get("uid"):
            changes.append(Change(ADDED, current, None))
        elif _meta(current).get("resourceVersion") != _meta(previous).get("resourceVersion"):
            changes.append(Change(MODIFIED, current, previous))
    return changes


_VERSIONS = itertools.count(1)


class Store:
    """Objects by key, with a per-namespace index. Returned dicts are shared: do not mutate them."""

    def __init__(self) -> None:
        self._objects: dict[str, Obj] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self.version = next(_VERSIONS)
        """Changes with every change of the content, and is never the same for two stores (a reset cache's new store
        does not repeat an old value): a controller compares it to skip work whose inputs did not change."""
        self.relists = 0
        """How often the whole content was replaced (:meth:`replace_all`): the handlers get the difference only after
        it, so a controller that follows changes by key looks at everything again when this moved."""

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __iter__(self) -> Iterator[Obj]:
        return iter(list(self._objects.values()))

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def get_by_name(self, name: str, *, namespace: str | None = None) -> Obj | None:
        return self._objects.get(f"{namespace}/{name}" if namespace else name)

    def keys(self) -> list[str]:
        return list(self._objects)

    def items(self) -> builtins.list[tuple[str, Obj]]:
        """``(key, object)`` pairs (a copy of the list: the store may change while the caller iterates)."""
        return list(self._objects.items())

    def list(self, *, namespace: str | None = None) -> list[Obj]:
        if namespace is None:
            return list(self._objects.values())
        return [self._objects[key] for key in self._by_namespace.get(namespace, ())]

    def namespaces(self) -> builtins.list[str]:
        return list(self._by_namespace)

    def snapshot(self) -> dict[str, Obj]:
        """A shallow copy of the key → object map."""
        return dict(self._objects)

    def upsert(self, obj: Obj) -> Obj | None:
        """Insert or replace; returns the previous object."""
        key = object_key(obj)
        old = self._objects.get(key)
        self._objects[key] = obj
        self.version = next(_VERSIONS)
        if old is None:
            namespace = _meta(obj).get("namespace")
            if namespace:
                self._by_namespace.setdefault(str(namespace), set()).add(key)
        return old

    def delete(self, obj_or_key: Obj | str) -> Obj | None:
        """Remove; returns the removed object (None if absent)."""
        key = obj_or_key if isinstance(obj_or_key, str) else object_key(obj_or_key)
        old = self._objects.pop(key, None)
        if old is not None:
            self.version = next(_VERSIONS)
            namespace = _meta(old).get("namespace")
            if namespace:
                keys = self._by_namespace.get(str(namespace))
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_namespace[str(namespace)]
        return old

    def replace_all(self, objects: Iterable[Obj]) -> builtins.list[Change]:
        """Replace the whole content (a re-list) and return the events that describe the difference."""
        new = {object_key(obj): obj for obj in objects}
        changes = diff_relist(self._objects, new)
        self._objects = new
        self.version = next(_VERSIONS)
        self.relists += 1
        self._by_namespace = {}
        for key, obj in new.items():
            namespace = _meta(obj).get("namespace")
            if namespace:
                self._by_namespace.setdefault(str(namespace), set()).add(key)
        return changes
