"""An in-memory apiserver implementing :class:`~federation.kube.transport.Transport`, for fast tests.

Caches, leader election and controllers are exercised through the real :class:`~federation.kube.api.KubeApi`
(paths, errors, retries, watch parsing) without a cluster. It keeps resourceVersions, uids, generations, a
status subresource, finalizers, merge / JSON patches, delete preconditions, paged lists and watches with
history, and lets a test break things on purpose: :meth:`FakeApiServer.stop` drops every watch and refuses
requests (an apiserver restart), :meth:`FakeApiServer.compact` makes old resourceVersions answer 410 Gone, and
:meth:`FakeApiServer.fail_next` injects HTTP errors. Simplifications: label selectors support ``k=v``, ``k!=v``
and ``k`` terms only; server-side apply behaves like a merge patch (no field ownership); no admission or
garbage collection.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from federation.kube import resources as r
from federation.kube import transport as tp
from federation.kube.api import KubeApi, Obj, RetryPolicy
from federation.kube.errors import Unavailable
from federation.kube.resources import Resource

DEFAULT_RESOURCES: tuple[Resource, ...] = (
    r.NAMESPACES,
    r.PODS,
    r.NODES,
    r.SECRETS,
    r.CONFIG_MAPS,
    r.CORE_EVENTS,
    r.EVENTS,
    r.JOBS,
    r.LEASES,
    *r.KUEUE_RESOURCES,
    r.CLUSTER_CAPACITIES,
)

_DISCONNECT = object()


@dataclass(frozen=True, slots=True)
class _Target:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass(slots=True)
class _Watcher:
    resource: Resource
    namespace: str | None
    selector: str
    bookmarks: bool
    send: MemoryObjectSendStream[object]
    receive: MemoryObjectReceiveStream[object] = field(repr=False)


def _status(code: int, reason: str, message: str) -> tp.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code}
    body.update(reason=reason, message=message)
    return tp.Response(code, json.dumps(body).encode())


def _ok(obj: Any, code: int = 200) -> tp.Response:
    return tp.Response(code, json.dumps(obj).encode())


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class JsonPatchError(ValueError):
    """A JSON patch operation failed (``test`` mismatch or bad path)."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"bad JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def json_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """RFC 6902 ``add`` / ``replace`` / ``remove`` / ``test`` on a deep copy of ``doc``."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind = op.get("op")
        parts = _pointer(str(op.get("path", "")))
        if not parts:
            raise JsonPatchError("operations on the document root are not supported")
        parent: Any = doc
        for part in parts[:-1]:
            try:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
            except (KeyError, IndexError, ValueError) as exc:
                raise JsonPatchError(f"path {op.get('path')!r} does not exist") from exc
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op.get("value")))
            elif kind == "replace":
                parent[index] = copy.deepcopy(op.get("value"))
            elif kind == "remove":
                del parent[index]
            elif kind == "test":
                if parent[index] != op.get("value"):
                    raise JsonPatchError(f"test failed at {op.get('path')!r}")
            else:
                raise JsonPatchError(f"unsupported op {kind!r}")
            continue
        if not isinstance(parent, dict):
            raise JsonPatchError(f"path {op.get('path')!r} does not exist")
        if kind == "add":
            parent[last] = copy.deepcopy(op.get("value"))
        elif kind in ("replace", "remove", "test"):
            if last not in parent:
                raise JsonPatchError(f"path {op.get('path')!r} does not exist")
            if kind == "replace":
                parent[last] = copy.deepcopy(op.get("value"))
            elif kind == "remove":
                del parent[last]
            elif parent[last] != op.get("value"):
                raise JsonPatchError(f"test failed at {op.get('path')!r}")
        else:
            raise JsonPatchError(f"unsupported op {kind!r}")
    return doc


def _matches_selector(obj: Mapping[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.strip().rstrip("=")) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class _FakeStream:
    def __init__(self, status: int, first: list[bytes], watcher: _Watcher | None) -> None:
        self._status = status
        self._first = first
        self._watcher = watcher

    @property
    def status(self) -> int:
        return self._status

    async def read(self) -> bytes:
        return b"".join(self._first)

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._first:
            yield line
        if self._watcher is None:
            return
        async for item in self._watcher.receive:
            if item is _DISCONNECT:
                raise Unavailable("fake apiserver: connection reset")
            assert isinstance(item, bytes)
            yield item


class FakeApiServer:
    """See the module docstring. ``api(cluster)`` returns a :class:`KubeApi` over this fake."""

    def __init__(self, resources: Iterable[Resource] = DEFAULT_RESOURCES) -> None:
        self._resources = {(res.group, res.version, res.plural): res for res in resources}
        self._objects: dict[Resource, dict[tuple[str, str], Obj]] = {}
        self._history: list[tuple[int, Resource, str, Obj]] = []
        self._watchers: list[_Watcher] = []
        self._failures: list[tp.Response] = []
        self.revision = 1
        self.compacted_revision = 0
        self.down = False
        self.requests: list[tp.Request] = []

    # -- test controls ------------------------------------------------------------------------------------------

    def api(self, cluster: str = "fake", **kwargs: Any) -> KubeApi:
        kwargs.setdefault("retry", RetryPolicy(attempts=3, initial=0.01, maximum=0.05))
        return KubeApi(self, cluster=cluster, **kwargs)

    def stop(self) -> None:
        """Simulate the apiserver going away: open watches break, new requests fail with Unavailable."""
        self.down = True
        for watcher in self._watchers:
            watcher.send.send_nowait(_DISCONNECT)
            watcher.send.close()
        self._watchers.clear()

    def start(self) -> None:
        self.down = False

    def compact(self) -> None:
        """Forget history: watches from any earlier resourceVersion now get 410 Gone."""
        self.compacted_revision = self.revision
        self._history.clear()

    def fail_next(self, status: int, *, count: int = 1, reason: str = "InternalError", message: str = "") -> None:
        """The next ``count`` non-watch requests answer ``status``."""
        for _ in range(count):
            self._failures.append(_status(status, reason, message or f"injected {status}"))

    def send_bookmarks(self) -> None:
        for watcher in self._watchers:
            if watcher.bookmarks:
                event = {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": watcher.resource.kind,
                        "apiVersion": watcher.resource.api_version,
                        "metadata": {"resourceVersion": str(self.revision)},
                    },
                }
                watcher.send.send_nowait(json.dumps(event).encode() + b"\n")

    def objects(self, resource: Resource) -> list[Obj]:
        return [copy.deepcopy(o) for o in self._objects.get(resource, {}).values()]

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    # -- Transport ----------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        for watcher in self._watchers:
            watcher.send.close()
        self._watchers.clear()

    async def send(self, request: tp.Request) -> tp.Response:
        await anyio.lowlevel.checkpoint()
        self.requests.append(request)
        if self.down:
            raise Unavailable(f"fake apiserver is down: {request.method} {request.path}")
        if self._failures:
            return self._failures.pop(0)
        if request.path == "/version":
            return _ok({"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"})
        target = self._route(request.path)
        if target is None:
            return _status(404, "NotFound", f"the server could not find the requested resource ({request.path})")
        query = dict(request.query)
        handler = {
            "GET": self._get if target.name else self._list,
            "POST": self._create,
            "PUT": self._replace,
            "PATCH": self._patch,
            "DELETE": self._delete,
        }.get(request.method)
        if handler is None:
            return _status(405, "MethodNotAllowed", request.method)
        return handler(target, request, query)

    @asynccontextmanager
    async def stream(self, request: tp.Request) -> AsyncIterator[tp.StreamResponse]:
        await anyio.lowlevel.checkpoint()
        self.requests.append(request)
        if self.down:
            raise Unavailable(f"fake apiserver is down: watch {request.path}")
        target = self._route(request.path)
        if target is None or target.name:
            response = _status(404, "NotFound", request.path)
            yield _FakeStream(response.status, [response.body], None)
            return
        query = dict(request.query)
        since = query.get("resourceVersion", "")
        selector = query.get("labelSelector", "")
        first: list[bytes] = []
        if since in ("", "0"):
            for obj in self._select(target.resource, target.namespace, selector):
                first.append(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
        elif int(since) < self.compacted_revision:
            gone = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "Expired",
                "code": 410,
                "message": f"too old resource version: {since} ({self.compacted_revision})",
            }
            yield _FakeStream(200, [json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n"], None)
            return
        else:
            for revision, resource, kind, obj in self._history:
                if revision > int(since) and self._visible(resource, obj, target.resource, target.namespace, selector):
                    first.append(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        send, receive = anyio.create_memory_object_stream[object](max_buffer_size=math.inf)
        watcher = _Watcher(
            target.resource, target.namespace, selector, query.get("allowWatchBookmarks") == "true", send, receive
        )
        self._watchers.append(watcher)
        try:
            yield _FakeStream(200, first, watcher)
        finally:
            if watcher in self._watchers:
                self._watchers.remove(watcher)
            send.close()
            receive.close()

    # -- internals ----------------------------------------------------------------------------------------------

    def _route(self, path: str) -> _Target | None:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = self._resources.get((group, version, rest[0]))
        if resource is None or (namespace is not None and not resource.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return _Target(resource, namespace, name, sub)

    def _key(self, target: _Target, name: str) -> tuple[str, str]:
        return (target.namespace or "", name)

    @staticmethod
    def _visible(resource: Resource, obj: Obj, want: Resource, namespace: str | None, selector: str) -> bool:
        if resource != want:
            return False
        if namespace and (obj.get("metadata") or {}).get("namespace") != namespace:
            return False
        return _matches_selector(obj, selector)

    def _select(self, resource: Resource, namespace: str | None, selector: str) -> list[Obj]:
        items = self._objects.get(resource, {})
        return [
            obj
            for (ns, _), obj in sorted(items.items())
            if (not namespace or ns == namespace) and _matches_selector(obj, selector)
        ]

    def _emit(self, resource: Resource, kind: str, obj: Obj) -> None:
        snapshot = copy.deepcopy(obj)
        self._history.append((self.revision, resource, kind, snapshot))
        line = json.dumps({"type": kind, "object": snapshot}).encode() + b"\n"
        for watcher in self._watchers:
            if self._visible(resource, snapshot, watcher.resource, watcher.namespace, watcher.selector):
                watcher.send.send_nowait(line)

    def _bump(self, obj: Obj) -> None:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)

    def _not_found(self, target: _Target, name: str) -> tp.Response:
        plural = target.resource.plural if not target.resource.group else target.resource.label
        return _status(404, "NotFound", f'{plural} "{name}" not found')

    def _get(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        assert target.name is not None
        obj = self._objects.get(target.resource, {}).get(self._key(target, target.name))
        return _ok(obj) if obj is not None else self._not_found(target, target.name)

    def _list(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        items = self._select(target.resource, target.namespace, query.get("labelSelector", ""))
        revision = self.revision
        start = 0
        if "continue" in query:
            offset, _, snapshot = query["continue"].partition(":")
            if int(snapshot) < self.compacted_revision:
                return _status(410, "Expired", "The provided continue parameter is too old")
            start, revision = int(offset), int(snapshot)
        limit = int(query.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: dict[str, str] = {"resourceVersion": str(revision)}
        if limit and start + limit < len(items):
            meta["continue"] = f"{start + limit}:{revision}"
        kind = f"{target.resource.kind}List"
        # Real apiservers omit kind/apiVersion on items of built-in lists; mimic that.
        stripped = [{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")} for obj in page]
        return _ok({"kind": kind, "apiVersion": target.resource.api_version, "metadata": meta, "items": stripped})

    def _create(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        obj = copy.deepcopy(request.body)
        if not isinstance(obj, dict):
            return _status(400, "BadRequest", "body must be an object")
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            return _status(422, "Invalid", f"{target.resource.kind}: metadata.name: Required value: name is required")
        if target.resource.namespaced:
            if target.namespace is None:
                return _status(400, "BadRequest", "namespace required")
            meta["namespace"] = target.namespace
        items = self._objects.setdefault(target.resource, {})
        key = self._key(target, name)
        if key in items:
            return _status(409, "AlreadyExists", f'{target.resource.label} "{name}" already exists')
        if query.get("dryRun"):
            return _ok(obj, 201)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["generation"] = 1
        if target.resource.kind not in ("Event", "Lease"):
            obj.pop("status", None)  # the status subresource ignores status on create
        obj["kind"], obj["apiVersion"] = target.resource.kind, target.resource.api_version
        self._bump(obj)
        items[key] = obj
        self._emit(target.resource, "ADDED", obj)
        return _ok(obj, 201)

    def _store_update(self, target: _Target, old: Obj, new: Obj) -> tp.Response:
        new_meta = new.setdefault("metadata", {})
        old_meta = old["metadata"]
        for fixed in ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp"):
            if fixed in old_meta:
                new_meta[fixed] = old_meta[fixed]
        if target.subresource == "status":
            new = {**old, "status": new.get("status")} if "status" in new else {**old}
            new["metadata"] = {**old_meta}
        else:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
            generation = int(old_meta.get("generation", 1))
            changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
                k: v for k, v in old.items() if k not in ("metadata", "status")
            }
            new_meta["generation"] = generation + 1 if changed else generation
        new["kind"], new["apiVersion"] = target.resource.kind, target.resource.api_version
        if new == old:
            return _ok(old)
        self._bump(new)
        key = self._key(target, new["metadata"]["name"])
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self._objects[target.resource][key]
            self._emit(target.resource, "DELETED", new)
            return _ok(new)
        self._objects[target.resource][key] = new
        self._emit(target.resource, "MODIFIED", new)
        return _ok(new)

    def _replace(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        assert target.name is not None
        old = self._objects.get(target.resource, {}).get(self._key(target, target.name))
        if old is None:
            return self._not_found(target, target.name)
        new = copy.deepcopy(request.body)
        expected = (new.get("metadata") or {}).get("resourceVersion")
        if expected and expected != old["metadata"]["resourceVersion"]:
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {target.resource.label} "{target.name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        return self._store_update(target, old, new)

    def _patch(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        assert target.name is not None
        old = self._objects.get(target.resource, {}).get(self._key(target, target.name))
        if old is None:
            if request.content_type == tp.APPLY_PATCH:  # apply creates
                return self._create(
                    _Target(target.resource, target.namespace, None, None),
                    tp.Request("POST", request.path, body=request.body),
                    {},
                )
            return self._not_found(target, target.name)
        try:
            if request.content_type == tp.JSON_PATCH:
                new = json_patch(old, request.body)
            else:
                new = merge_patch(old, request.body)
        except JsonPatchError as exc:
            return _status(422, "Invalid", str(exc))
        expected = (
            (request.body.get("metadata") or {}).get("resourceVersion") if isinstance(request.body, dict) else None
        )
        if expected and expected != old["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified")
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        return self._store_update(target, old, new)

    def _delete(self, target: _Target, request: tp.Request, query: dict[str, str]) -> tp.Response:
        assert target.name is not None
        items = self._objects.get(target.resource, {})
        key = self._key(target, target.name)
        old = items.get(key)
        if old is None:
            return self._not_found(target, target.name)
        preconditions = (request.body or {}).get("preconditions") or {}
        meta = old["metadata"]
        for field_name in ("uid", "resourceVersion"):
            if preconditions.get(field_name) and preconditions[field_name] != meta.get(field_name):
                return _status(
                    409,
                    "Conflict",
                    f"Precondition failed: {field_name}: {preconditions[field_name]}, "
                    f"object has {meta.get(field_name)}",
                )
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return _ok(old)
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._bump(new)
            items[key] = new
            self._emit(target.resource, "MODIFIED", new)
            return _ok(new)
        del items[key]
        gone = copy.deepcopy(old)
        self._bump(gone)
        self._emit(target.resource, "DELETED", gone)
        return _ok(gone)
