"""``KubeApi``: the one object per cluster through which every Kubernetes API call goes.

Generic over :class:`~federation.kube.resources.Resource` descriptors and raw JSON dicts (no generated model
classes on hot paths). It owns what every call needs: paths and query parameters, typed errors, client-side
rate limiting, retries of transient failures (``Unavailable`` only; never ``Conflict``/``Invalid``), and call
counting. The bytes move through a :class:`~federation.kube.transport.Transport` (kubernetes_asyncio's ApiClient in
``clients``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from federation.kube import jsoncodec
from federation.kube import transport as tp
from federation.kube.counters import ApiCallCounter
from federation.kube.errors import Gone, KubeError, NotFound, Unavailable, error_from_response, error_from_status
from federation.kube.events import build_event
from federation.kube.ratelimit import DEFAULT_BURST, DEFAULT_QPS, RateLimiter
from federation.kube.resources import EVENTS, SERVICE_ACCOUNTS, Resource

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
"""A Kubernetes object as decoded JSON. Objects handed out by caches are shared: treat them as read-only."""
ObjItems = list[Obj]


class PatchType(enum.Enum):
    MERGE = tp.MERGE_PATCH
    JSON = tp.JSON_PATCH
    STRATEGIC = tp.STRATEGIC_MERGE_PATCH
    APPLY = tp.APPLY_PATCH


class FieldValidation(enum.Enum):
    """How the apiserver treats unknown or duplicate fields in a write (its default is ``WARN``: drop them and
    answer with a Warning header, so a misspelt field is silently lost). ``STRICT`` turns them into ``Invalid``
    naming the field."""

    IGNORE = "Ignore"
    WARN = "Warn"
    STRICT = "Strict"


class Propagation(enum.Enum):
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: ObjItems
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    """ADDED, MODIFIED, DELETED or BOOKMARK (ERROR events are raised as typed errors)."""
    object: Obj


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of :class:`Unavailable` with capped exponential backoff and jitter (honours Retry-After)."""

    attempts: int = 5
    initial: float = 0.2
    maximum: float = 5.0
    max_retry_after: float = 30.0

    @classmethod
    def never(cls) -> RetryPolicy:
        return cls(attempts=1)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.maximum, self.initial * (2 ** (attempt - 1)))
        wait = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            wait = max(wait, min(float(retry_after), self.max_retry_after))
        return float(wait)


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), like client-go's MetaNamespaceKeyFunc."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class WatchStream:
    """Async iterator of :class:`WatchEvent` over one open watch response."""

    def __init__(self, response: tp.StreamResponse, resource: Resource) -> None:
        self._lines = response.lines()
        self._resource = resource

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            line = await self._lines.__anext__()
            if not line.strip():
                continue
            try:
                event = jsoncodec.decode(line)
                kind = str(event["type"])
                obj = event["object"]
            except (ValueError, KeyError, TypeError) as exc:
                raise Unavailable(f"malformed watch event from the apiserver: {exc}") from None
            if kind == "ERROR":
                raise error_from_status(obj if isinstance(obj, dict) else {})
            return WatchEvent(kind, obj)


class KubeApi:
    """Typed, retried, rate-limited, counted access to one cluster's apiserver."""

    def __init__(
        self,
        transport: tp.Transport,
        *,
        cluster: str = "",
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        limiter: RateLimiter | None = None,
        counter: ApiCallCounter | None = None,
        retry: RetryPolicy | None = None,
        request_timeout: float = 30.0,
    ) -> None:
        self.transport = transport
        self.cluster = cluster
        self.limiter = limiter or RateLimiter(qps, burst)
        self.counter = counter or ApiCallCounter()
        self.retry = retry or RetryPolicy()
        self.request_timeout = request_timeout
        self._log = log.bind(cluster=cluster) if cluster else log
        self.observer: Callable[[str, float, str | None], None] | None = None
        """Told ``(verb, seconds, error reason or None)`` after every HTTP attempt (the manager's per-worker
        latency and error metrics); the reason is the apiserver's ``Status.reason``, ``HTTP <code>`` without one, or
        the exception's type when no answer came."""

    async def aclose(self) -> None:
        """Close the transport (and its connection pool)."""
        await self.transport.aclose()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- plumbing -----------------------------------------------------------------------------------------------

    async def _call(self, verb: str, label: str, request: tp.Request, *, retry: bool = True) -> Obj:
        """One call, retried on :class:`Unavailable` only, after ``policy.delay(attempt)`` (a plain loop: a tenacity
        retrier built for every call was a few percent of kfed-manager's CPU in a 300-Job burst)."""
        policy = self.retry if retry else RetryPolicy.never()
        attempts = max(1, policy.attempts)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._once(verb, label, request)
            except Unavailable as exc:
                if attempt >= attempts:
                    raise
                self._log.info("kube.retry", verb=verb, resource=label, attempt=attempt, error=str(exc)[:300])
                await anyio.sleep(policy.delay(attempt, exc.retry_after))

    async def _once(self, verb: str, label: str, request: tp.Request) -> Obj:
        await self.limiter.acquire()
        self.counter.record(verb, label)
        observer = self.observer
        started = time.perf_counter() if observer is not None else 0.0
        try:
            response = await self.transport.send(request)
        except Exception as exc:
            if observer is not None:
                observer(verb, time.perf_counter() - started, type(exc).__name__)
            raise
        if 200 <= response.status < 300:
            if observer is not None:
                observer(verb, time.perf_counter() - started, None)
            if not response.body:
                return {}
            decoded = jsoncodec.decode(response.body)
            return decoded if isinstance(decoded, dict) else {"value": decoded}
        error = error_from_response(response.status, response.body, retry_after=response.retry_after)
        if observer is not None:
            observer(verb, time.perf_counter() - started, error.reason or f"HTTP {response.status}")
        raise error

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = tp.JSON,
    ) -> tp.Request:
        return tp.Request(
            method, path, tuple(query), body=body, content_type=content_type, timeout=self.request_timeout
        )

    @staticmethod
    def _label(resource: Resource, subresource: str | None) -> str:
        return f"{resource.label}/{subresource}" if subresource else resource.label

    @staticmethod
    def _namespace_of(resource: Resource, obj: Mapping[str, Any], namespace: str | None) -> str | None:
        if not resource.namespaced:
            return None
        found = namespace or _meta(obj).get("namespace")
        if not found:
            raise ValueError(f"{resource.kind} is namespaced: no namespace given or in metadata")
        return str(found)

    @staticmethod
    def _name_of(resource: Resource, obj: Mapping[str, Any]) -> str:
        name = _meta(obj).get("name")
        if not name:
            raise ValueError(f"{resource.kind} object has no metadata.name")
        return str(name)

    # -- reads --------------------------------------------------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> Obj:
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        return await self._call("get", self._label(resource, subresource), self._request("GET", path))

    async def get_or_none(self, resource: Resource, name: str, *, namespace: str | None = None) -> Obj | None:
        try:
            return await self.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int | None = 500,
    ) -> ObjectList:
        """All matching objects (paged with ``limit``/``continue``) and the list's resourceVersion.

        Items get ``apiVersion``/``kind`` filled in (the apiserver omits them in lists of built-in kinds). If a
        continue token expires mid-way (410), the list restarts once without paging.
        """
        try:
            return await self._list(resource, namespace, label_selector, field_selector, page_size)
        except Gone:
            if not page_size:
                raise
            self._log.info("kube.list.continue_expired", resource=resource.label)
            return await self._list(resource, namespace, label_selector, field_selector, None)

    async def _list(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        page_size: int | None,
    ) -> ObjectList:
        path = resource.path(namespace=namespace)
        base: list[tuple[str, str]] = []
        if label_selector:
            base.append(("labelSelector", label_selector))
        if field_selector:
            base.append(("fieldSelector", field_selector))
        if page_size:
            base.append(("limit", str(page_size)))
        items: ObjItems = []
        resource_version = ""
        token = ""
        while True:
            query = [*base, ("continue", token)] if token else base
            page = await self._call("list", resource.label, self._request("GET", path, query=query))
            meta = _meta(page)
            if not resource_version:
                resource_version = str(meta.get("resourceVersion", ""))
            for item in page.get("items") or ():
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
            token = str(meta.get("continue") or "")
            if not token:
                return ObjectList(items, resource_version)

    @asynccontextmanager
    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        idle_timeout: float | None = None,
    ) -> AsyncIterator[WatchStream]:
        """Open a watch from ``resource_version``; the stream ends when the server closes it.

        ``timeout_seconds`` is the server-side duration (default: random 5-10 minutes, like client-go);
        ``idle_timeout`` is how long the client tolerates silence before declaring the connection dead
        (default: server timeout + 30 s). Raises typed errors (``Gone`` for 410) at open or while iterating.
        Not retried: the caller (a cache) owns reconnect policy.
        """
        server_timeout = timeout_seconds if timeout_seconds is not None else random.randint(300, 600)
        query = [("watch", "true"), ("resourceVersion", resource_version), ("timeoutSeconds", str(server_timeout))]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        request = tp.Request(
            "GET",
            resource.path(namespace=namespace),
            tuple(query),
            timeout=idle_timeout if idle_timeout is not None else server_timeout + 30.0,
        )
        await self.limiter.acquire()
        self.counter.record("watch", resource.label)
        async with self.transport.stream(request) as response:
            if not 200 <= response.status < 300:
                body = await response.read()
                raise error_from_response(response.status, body)
            yield WatchStream(response, resource)

    async def server_version(self, *, request_timeout: float | None = None, retry: bool = True) -> Obj:
        """``GET /version`` (cheap reachability probe); ``request_timeout`` bounds the one request, ``retry=False``
        makes a liveness probe answer at once instead of retrying."""
        request = self._request("GET", "/version")
        if request_timeout is not None:
            request = dataclasses.replace(request, timeout=request_timeout)
        return await self._call("get", "version", request, retry=retry)

    # -- writes -------------------------------------------------------------------------------------------------

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
        field_validation: FieldValidation | None = None,
    ) -> Obj:
        ns = self._namespace_of(resource, obj, namespace)
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        query = _write_query(field_manager=field_manager, dry_run=dry_run, field_validation=field_validation)
        request = self._request("POST", resource.path(namespace=ns), query=query, body=body)
        return await self._call("create", resource.label, request)

    async def replace(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        subresource: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> Obj:
        """PUT; optimistic concurrency through ``metadata.resourceVersion`` in ``obj`` (Conflict on mismatch)."""
        ns = self._namespace_of(resource, obj, namespace)
        name = self._name_of(resource, obj)
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
        path = resource.path(namespace=ns, name=name, subresource=subresource)
        query = _write_query(field_manager=field_manager, field_validation=field_validation)
        request = self._request("PUT", path, query=query, body=body)
        return await self._call("update", self._label(resource, subresource), request)

    async def replace_status(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> Obj:
        return await self.replace(resource, obj, namespace=namespace, field_manager=field_manager, subresource="status")

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> Obj:
        """Merge patch (default), JSON patch (a list of ops), strategic merge (built-ins only) or server-side
        apply (``PatchType.APPLY``: needs ``field_manager``; ``force`` takes over conflicting fields)."""
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        if force and patch_type is not PatchType.APPLY:
            raise ValueError("force is only meaningful for server-side apply")
        if patch_type is PatchType.JSON and isinstance(patch, Mapping):
            raise ValueError("a JSON patch is a list of operations")
        body: Any = patch
        if patch_type is PatchType.APPLY:
            assert isinstance(patch, Mapping)
            body = {"apiVersion": resource.api_version, "kind": resource.kind, **patch}
            meta = dict(_meta(patch))
            meta.setdefault("name", name)
            if namespace and resource.namespaced:
                meta.setdefault("namespace", namespace)
            body["metadata"] = meta
        query = _write_query(
            field_manager=field_manager,
            force=force if patch_type is PatchType.APPLY else None,
            field_validation=field_validation,
        )
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        request = self._request("PATCH", path, query=query, body=body, content_type=patch_type.value)
        return await self._call("patch", self._label(resource, subresource), request)

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Obj:
        return await self.patch(
            resource,
            name,
            patch,
            namespace=namespace,
            patch_type=patch_type,
            field_manager=field_manager,
            force=force,
            subresource="status",
        )

    async def apply(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> Obj:
        """Server-side apply of ``obj`` (name and namespace from its metadata)."""
        ns = self._namespace_of(resource, obj, None)
        return await self.patch(
            resource,
            self._name_of(resource, obj),
            obj,
            namespace=ns,
            patch_type=PatchType.APPLY,
            field_manager=field_manager,
            force=force,
            subresource=subresource,
            field_validation=field_validation,
        )

    async def apply_status(
        self, resource: Resource, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> Obj:
        return await self.apply(resource, obj, field_manager=field_manager, force=force, subresource="status")

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: Propagation | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
        missing_ok: bool = False,
    ) -> Obj | None:
        """DELETE with optional preconditions (Conflict when uid/resourceVersion no longer match).

        Returns the object (still present with a deletionTimestamp while finalizers run) or the Status;
        ``None`` when ``missing_ok`` and it was already gone.
        """
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy.value
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        request = self._request("DELETE", resource.path(namespace=namespace, name=name), body=options)
        try:
            return await self._call("delete", resource.label, request)
        except NotFound:
            if missing_ok:
                return None
            raise

    async def delete_collection(
        self,
        resource: Resource,
        *,
        namespace: str,
        label_selector: str,
        propagation_policy: Propagation | None = None,
    ) -> int:
        """DELETE the collection: every object of ``resource`` in ``namespace`` that ``label_selector`` matches, in
        one request (verb ``deletecollection``); returns how many the apiserver deleted. A selector is required,
        since an empty one would delete the whole namespace's objects of that kind. There are no per-object
        preconditions: the selector alone says which objects go."""
        if not label_selector.strip():
            raise ValueError("delete_collection needs a label selector")
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy.value
        request = self._request(
            "DELETE", resource.path(namespace=namespace), query=(("labelSelector", label_selector),), body=options
        )
        deleted = await self._call("deletecollection", resource.label, request)
        return len(deleted.get("items") or ())

    async def create_event(
        self,
        regarding: Mapping[str, Any],
        *,
        reason: str,
        note: str,
        action: str,
        reporting_controller: str,
        reporting_instance: str,
        event_type: str = "Normal",
    ) -> Obj:
        """Record an events.k8s.io/v1 Event about ``regarding`` (a raw object with apiVersion/kind/metadata)."""
        event = build_event(
            regarding,
            reason=reason,
            note=note,
            action=action,
            reporting_controller=reporting_controller,
            reporting_instance=reporting_instance,
            event_type=event_type,
            now=dt.datetime.now(dt.UTC),
        )
        return await self.create(EVENTS, event)

    async def request_token(
        self, service_account: str, *, namespace: str, expiration_seconds: int, audiences: Sequence[str] = ()
    ) -> Obj:
        """A TokenRequest (authentication.k8s.io/v1) for the ServiceAccount: a bound token, as `kubectl create
        token` mints. The answer's ``status.token`` and ``status.expirationTimestamp`` (which the apiserver may
        shorten to its --service-account-max-token-expiration)."""
        body: Obj = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds, **({"audiences": list(audiences)} if audiences else {})},
        }
        path = SERVICE_ACCOUNTS.path(namespace=namespace, name=service_account, subresource="token")
        return await self._call("create", "serviceaccounts/token", self._request("POST", path, body=body))


def _write_query(
    *,
    field_manager: str | None = None,
    dry_run: bool = False,
    force: bool | None = None,
    field_validation: FieldValidation | None = None,
) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if field_validation is not None:
        query.append(("fieldValidation", field_validation.value))
    if field_manager:
        query.append(("fieldManager", field_manager))
    if dry_run:
        query.append(("dryRun", "All"))
    if force is not None:
        query.append(("force", "true" if force else "false"))
    return query


__all__ = [
    "FieldValidation",
    "KubeApi",
    "KubeError",
    "Obj",
    "ObjectList",
    "PatchType",
    "Propagation",
    "RetryPolicy",
    "WatchEvent",
    "WatchStream",
    "object_key",
]
