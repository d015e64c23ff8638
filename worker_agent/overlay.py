"""Objects the agent just wrote, shown in place of the watch cache's older copies until the cache catches up.

Without it, a pass that runs between the agent's write and the watch event would see the stale object and decide
again (a second admission, a second Job start). The overlay holds the apiserver's answer to each write and
forgets it as soon as the cache delivers that resourceVersion (or a later one, or a deletion).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
_VERSIONS = itertools.count(1)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _not_older(seen: str, written: str) -> bool:
    if seen == written:
        return True
    if seen.isdigit() and written.isdigit():  # etcd-backed versions of one object only grow
        return int(seen) >= int(written)
    return False


class WriteOverlay:
    """Written objects by ``namespace/name`` key (``name`` for cluster-scoped ones)."""

    def __init__(self) -> None:
        self._written: dict[str, Obj] = {}
        self.version = next(_VERSIONS)
        """Changes whenever what the overlay shows changes (like ``federation.kube.store.Store.version``)."""

    def __len__(self) -> int:
        return len(self._written)

    def remember(self, written: Obj) -> None:
        self._written[_key(written)] = written
        self.version = next(_VERSIONS)

    def observe(self, event_type: str, obj: Obj, _old: Obj | None = None) -> None:
        """Watch-cache handler: drop the entry once the cache has our version (or the object is gone)."""
        key = _key(obj)
        written = self._written.get(key)
        if written is None:
            return
        if event_type == "DELETED" or _not_older(_version(obj), _version(written)):
            del self._written[key]
            self.version = next(_VERSIONS)

    def view(self, cached: Obj) -> Obj:
        """The freshest known copy of ``cached``."""
        return self._written.get(_key(cached), cached)

    def view_keyed(self, key: str, cached: Obj) -> Obj:
        """:meth:`view` for a caller that has the key already (a pass over a store's items builds none)."""
        return self._written.get(key, cached)

    def get(self, key: str, cached: Obj | None) -> Obj | None:
        return self._written.get(key, cached)
