"""Lift one finalizer from the objects of a watch cache once a rule says it has done its work.

Why this module exists: both binaries lift Kueue's resource-in-use finalizer from the Workloads Kueue left on their
cluster (``federation.admission.in_use_finalizer``), and nothing else in them writes ``metadata.finalizers`` of an
object they did not create. It is event-driven: the cache's handler notes each object the rule picks, and
:meth:`FinalizerRelease.run` patches them: the finalizer list without that one, at the object's resourceVersion. A
Conflict or NotFound needs nothing (a newer event decides again); any other failure gets a warning log line naming
the object and the error, and a Warning Event ``FinalizerNotLifted`` on it (once per message), and is tried again
after ``retry_seconds``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import structlog

from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from federation.kube.resources import Resource
from federation.kube.trigger import Trigger

log = structlog.get_logger(__name__)

Obj = Mapping[str, Any]

RETRY_SECONDS = 5.0


class FinalizerRelease:
    def __init__(
        self,
        *,
        api: KubeApi,
        cache: WatchCache,
        resource: Resource,
        finalizer: str,
        due: Callable[[Obj], bool],
        field_manager: str,
        events: EventRecorder,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        """``due(obj)``: the object carries ``finalizer`` and it must go now."""
        self._api = api
        self._cache = cache
        self._resource = resource
        self._finalizer = finalizer
        self._due = due
        self._field_manager = field_manager
        self._events = events
        self._told: dict[str, str] = {}
        """uid → the last failure told in an Event."""
        self._retry_seconds = retry_seconds
        self._keys: set[tuple[str | None, str]] = set()
        self._trigger = Trigger()
        self.released = 0
        """How many objects had the finalizer lifted (for tests and the curious)."""
        cache.add_handler(self._on_event)

    def _on_event(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type == "DELETED" or not self._due(obj):
            return
        meta = obj.get("metadata") or {}
        self._keys.add((meta.get("namespace"), str(meta.get("name"))))
        self._trigger.pull()

    async def run(self) -> None:
        while True:
            await self._trigger.wait()
            keys, self._keys = self._keys, set()
            failed = False
            for namespace, name in sorted(keys, key=lambda k: (k[0] or "", k[1])):
                obj = self._cache.store.get_by_name(name, namespace=namespace)
                if obj is not None and self._due(obj) and not await self._lift(obj):
                    self._keys.add((namespace, name))
                    failed = True
            if failed:
                await anyio.sleep(self._retry_seconds)
                self._trigger.pull()

    async def _lift(self, obj: Obj) -> bool:
        """Patch the finalizer away; False when it must be tried again."""
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), str(meta.get("name"))
        kept = [f for f in meta.get("finalizers") or () if f != self._finalizer]
        body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "finalizers": kept}}
        bound = log.bind(kind=self._resource.kind, object=f"{namespace}/{name}" if namespace else name)
        try:
            await self._api.patch(self._resource, name, body, namespace=namespace, field_manager=self._field_manager)
        except (Conflict, NotFound):
            return True  # changed or gone since: its next event decides again
        except KubeError as exc:
            message = f"could not lift finalizer {self._finalizer}: {str(exc)[:300]}"
            bound.warning("finalizer.lift_failed", finalizer=self._finalizer, error=str(exc)[:300])
            uid = str(meta.get("uid") or "")
            if self._told.get(uid) != message:
                self._told[uid] = message
                self._events.emit(obj, reason="FinalizerNotLifted", note=message, action="Update", event_type="Warning")
            return False
        self.released += 1
        self._told.pop(str(meta.get("uid") or ""), None)
        bound.info("finalizer.lifted", finalizer=self._finalizer)
        return True


__all__ = ["FinalizerRelease"]
