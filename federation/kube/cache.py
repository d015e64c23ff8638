"""Informer-like list+watch caches of raw objects, one task per (cluster, resource).

A controller never polls: it reads a :class:`WatchCache`'s store and reacts to its events. The cache lists once,
then watches from the list's resourceVersion with bookmarks; on a dropped connection it re-watches from the last
resourceVersion it saw, after a capped, jittered exponential backoff; on 410 Gone it re-lists at once (only a Gone
again right after a list backs off) and emits the difference (synthetic DELETED for objects that vanished meanwhile,
ADDED/MODIFIED for new/changed ones), so handlers never miss a transition. Each cache runs in its own task and only
ever waits on its own cluster, so a slow or dead cluster never stalls the others.

A cache says how long it has been failing (``failing_for``) so its owner can judge the connection, and its owner
can make it re-watch at once (``restart_watch``): after a server stopped answering, the open watch may sit on a
connection that will never deliver again, and the backoff may still be sleeping although the server is back.
"""

from __future__ import annotations

import inspect
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from federation.kube.api import KubeApi, Obj
from federation.kube.errors import Gone
from federation.kube.resources import Resource
from federation.kube.store import ADDED, DELETED, MODIFIED, Change, Store

log = structlog.get_logger(__name__)

Handler = Callable[[str, Obj, Obj | None], Awaitable[None] | None]
"""``handler(event_type, obj, old_obj)``; may be sync or async. Exceptions are logged, never fatal."""

BOOKMARK = "BOOKMARK"


class CacheState(Protocol):
    """What readiness reads of a cache: its resource, whether it has listed, and why its list keeps failing."""

    @property
    def resource(self) -> Resource: ...

    @property
    def synced(self) -> bool: ...

    @property
    def last_error(self) -> str | None: ...


def unsynced(caches: Iterable[CacheState]) -> list[str]:
    """The caches that have not listed yet, for a readiness detail: each with the error its list keeps failing with
    (``namespaces (403 Forbidden: …)``), so a refused or broken list says why the process is not ready."""
    return [
        cache.resource.label + (f" ({cache.last_error[:300]})" if cache.last_error else "")
        for cache in caches
        if not cache.synced
    ]


class SyncedCache(Protocol):
    """What a controller reads of a synced :class:`WatchCache`: its store, and handlers told of every change. A
    controller typed with it states that it never lists, watches or restarts; tests hand it in-memory stores."""

    @property
    def store(self) -> Store: ...

    def add_handler(self, handler: Handler) -> None: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter: ``min(maximum, initial * factor**(n-1) * (1 + jitter * r))``."""

    initial: float = 0.8
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0

    def delay(self, failures: int, rand: float | None = None) -> float:
        """Delay before retry number ``failures`` (1-based); ``rand`` in [0, 1) (random when None)."""
        if failures <= 0:
            return 0.0
        r = random.random() if rand is None else rand
        exponent = min(failures - 1, 64)
        base = self.initial * math.pow(self.factor, exponent)
        return float(min(self.maximum, base * (1.0 + self.jitter * r)))


class WatchCache:
    """List+watch cache of one resource on one cluster (optionally one namespace / label-selected).

    Run it with ``tg.start_soon(cache.run)``; cancel the task group to stop it. Read ``cache.store``; get events
    through :meth:`add_handler` callbacks or :meth:`subscribe` channels (backpressure: a full channel slows only
    this cache).
    """

    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        handlers: Sequence[Handler] = (),
        backoff: Backoff | None = None,
        page_size: int | None = 500,
        watch_timeout_seconds: int | None = None,
        quiet_period: float = 5.0,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.backoff = backoff or Backoff()
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.quiet_period = quiet_period
        self.store = Store()
        self.resource_version = ""
        self.relists = 0
        self.last_error: str | None = None
        self.last_exception: Exception | None = None
        """The error of the last failed list/watch while it keeps failing (None once a watch opens): its type tells
        a refusal (Forbidden, NotFound for a resource type the cluster does not serve) from an outage."""
        self._handlers: list[Handler] = list(handlers)
        self._senders: list[MemoryObjectSendStream[Change]] = []
        self._synced = anyio.Event()
        self._connected = False
        self._failures = 0
        self._gones = 0
        """410 Gone answers since the last watch event: a list that is Gone again at once backs off."""
        self._failing_since: float | None = None
        self._interruptible: anyio.CancelScope | None = None
        self._restart = False
        self._log = log.bind(cluster=api.cluster, resource=resource.label, namespace=namespace or "")

    # -- public -------------------------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once the first list has been stored and dispatched (stays True across reconnects)."""
        return self._synced.is_set()

    @property
    def connected(self) -> bool:
        """True while a watch stream is open (for readiness: "remote connected")."""
        return self._connected

    def failing_for(self, now: float | None = None) -> float | None:
        """Seconds (monotonic) since its list/watch started failing without a successful (re)open; None when fine."""
        if self._failing_since is None:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - self._failing_since)

    def restart_watch(self) -> None:
        """Drop the open watch (or cut a backoff sleep short) and watch again at once from the last resourceVersion;
        handlers see no gap (an event being dispatched is finished first)."""
        if self._interruptible is not None:
            self._restart = True
            self._interruptible.cancel()

    def reset(self) -> None:
        """Forget everything after :meth:`run` ended, so that the next ``run`` lists afresh and counts as synced only
        once that list is in (for a cache that runs only while something needs it)."""
        self.store = Store()
        self.resource_version = ""
        self._synced = anyio.Event()
        self._connected = False
        self._failures = 0
        self._gones = 0
        self._failing_since = None
        self.last_error = None
        self.last_exception = None

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def subscribe(self, max_buffer: float = 1024) -> MemoryObjectReceiveStream[Change]:
        """A channel receiving every :class:`Change`; it is closed when the cache stops."""
        send, receive = anyio.create_memory_object_stream[Change](max_buffer_size=max_buffer)
        self._senders.append(send)
        return receive

    async def wait_synced(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait for the initial list; False if ``timeout`` seconds passed first."""
        if timeout is None:
            await self._synced.wait()
            return True
        with anyio.move_on_after(timeout):
            await self._synced.wait()
        return self._synced.is_set()

    async def run(self) -> None:
        """List, watch, reconnect and re-list until cancelled."""
        try:
            await self._loop()
        finally:
            self._connected = False
            for sender in self._senders:
                sender.close()

    # -- internals ----------------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                opened = time.monotonic()
                received = await self._watch_once()
                if self._take_restart():
                    continue
                if received == 0 and time.monotonic() - opened < self.quiet_period:
                    self._failures += 1  # the server keeps closing at once: do not spin
                    await self._sleep(self.backoff.delay(self._failures))
            except Gone as exc:
                # The server answered: what failed before (an outage, a CRD being re-created) is over, so the list
                # comes at once. Only Gones in a row (list, watch, Gone again) back off.
                self._gones += 1
                self._failures = 0
                self.last_error = str(exc)
                self._log.info("kube.watch.gone", resource_version=self.resource_version, error=str(exc))
                need_list = True
                if self._gones > 1:
                    await self._sleep(self.backoff.delay(self._gones - 1))
            except Exception as exc:  # a cache must outlive any error (incl. bugs in parsing) and keep retrying
                self._failures += 1
                self._connected = False
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                self.last_error = str(exc) or type(exc).__name__
                self.last_exception = exc
                delay = self.backoff.delay(self._failures)
                self._log.warning(
                    "kube.watch.retry",
                    phase="list" if need_list else "watch",
                    error=self.last_error[:300],
                    error_type=type(exc).__name__,
                    failures=self._failures,
                    delay=round(delay, 2),
                )
                await self._sleep(delay)

    async def _sleep(self, delay: float) -> None:
        """A backoff sleep that :meth:`restart_watch` cuts short."""
        with anyio.CancelScope() as scope:
            self._interruptible = scope
            try:
                await anyio.sleep(delay)
            finally:
                self._interruptible = None
        self._take_restart()

    def _take_restart(self) -> bool:
        restart, self._restart = self._restart, False
        if restart:
            self._log.info("kube.watch.restarted", resource_version=self.resource_version)
        return restart

    async def _relist(self) -> None:
        result = await self.api.list(
            self.resource,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.page_size,
        )
        first = not self._synced.is_set()
        changes = self.store.replace_all(result.items)
        self.resource_version = result.resource_version
        if not first:
            self.relists += 1
        self._log.info(
            "kube.cache.listed", items=len(result.items), changes=len(changes), resource_version=self.resource_version
        )
        for change in changes:
            await self._dispatch(change)
        self._synced.set()

    async def _watch_once(self) -> int:
        received = 0
        with anyio.CancelScope() as scope:  # restart_watch() cancels it: the watch just ends
            self._interruptible = scope
            try:
                async with self.api.watch(
                    self.resource,
                    resource_version=self.resource_version,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    timeout_seconds=self.watch_timeout_seconds,
                ) as stream:
                    self._connected = True
                    self._failing_since = None
                    self.last_exception = None
                    try:
                        async for event in stream:
                            received += 1
                            self._failures = 0
                            self._gones = 0
                            self.last_error = None
                            # The store and the synchronous handlers run without suspending, so nothing can cut
                            # them; what must be awaited (async handlers, subscribers) is shielded: a restart never
                            # cuts an event in half. (A shielded scope around every event was ~3 % of
                            # kfed-manager's CPU.)
                            pending = self._apply(event.type, event.object)
                            if pending is not None:
                                with anyio.CancelScope(shield=True):
                                    await pending
                    finally:
                        self._connected = False
            finally:
                self._interruptible = None
        return received

    def _apply(self, event_type: str, obj: Obj) -> Awaitable[None] | None:
        """Store one watch event and run its handlers up to the first that must be awaited; returns the rest of the
        dispatch to await (None when it is all done)."""
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if event_type == BOOKMARK:
            return None
        if event_type == DELETED:
            old = self.store.delete(obj)
            return self._dispatch_now(Change(DELETED, obj, old))
        if event_type in (ADDED, MODIFIED):
            old = self.store.upsert(obj)
            return self._dispatch_now(Change(ADDED if old is None else MODIFIED, obj, old))
        self._log.warning("kube.watch.unknown_event", event_type=event_type)
        return None

    async def _dispatch(self, change: Change) -> None:
        pending = self._dispatch_now(change)
        if pending is not None:
            await pending

    def _dispatch_now(self, change: Change) -> Awaitable[None] | None:
        """Call the handlers in order while they are synchronous; from the first that returns an awaitable on (and
        for the subscribers), return the rest as one awaitable."""
        handlers = self._handlers
        for index, handler in enumerate(handlers):
            try:
                result = handler(change.type, change.obj, change.old)
            except Exception:
                self._log.exception("kube.cache.handler_failed", event_type=change.type)
                continue
            if inspect.isawaitable(result):
                return self._dispatch_rest(change, result, handlers[index + 1 :])
        if self._senders:
            return self._dispatch_rest(change, None, [])
        return None

    async def _dispatch_rest(
        self, change: Change, awaiting: Awaitable[Any] | None, handlers: Sequence[Handler]
    ) -> None:
        if awaiting is not None:
            try:
                await awaiting
            except Exception:
                self._log.exception("kube.cache.handler_failed", event_type=change.type)
        for handler in handlers:
            try:
                result = handler(change.type, change.obj, change.old)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self._log.exception("kube.cache.handler_failed", event_type=change.type)
        for sender in list(self._senders):
            try:
                await sender.send(change)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._senders.remove(sender)
