"""Kueue's visibility API (``visibility.kueue.x-k8s.io/v1beta2``) as pure functions of the manager's objects.

Kueue serves the pending workloads of a ClusterQueue or a LocalQueue, with their positions, through an aggregated
API server; tools such as kueuectl and KueueViz read it. kfed-manager serves the same resources
(``manager.visibility_server`` does the TLS, the front-proxy authentication and the SubjectAccessReviews); this module
decides everything else: which request a path names, the positions, the response bodies and the access review to
ask for.

Positions follow Kueue's queue order: priority first, then the time the workload was queued (created, or
requeued), counted from 0. A workload is pending while it is active, holds no quota and has not finished.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from federation.admission.queue_metrics import queued_since
from federation.conditions import is_true, parse_time

Obj = Mapping[str, Any]

GROUP = "visibility.kueue.x-k8s.io"
VERSION = "v1beta2"
GROUP_VERSION = f"{GROUP}/{VERSION}"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
"""Kueue's ``DefaultPendingWorkloadsLimit`` and ``MaxPendingWorkloadsLimit``."""
SUBRESOURCE = "pendingworkloads"


# -- positions ----------------------------------------------------------------------------------------------------


def is_pending(workload: Obj) -> bool:
    spec = workload.get("spec") or {}
    return (
        spec.get("active", True) is not False
        and not is_true(workload, "QuotaReserved")
        and not is_true(workload, "Finished")
    )


def cluster_queue_of(workload: Obj, local_queues: Mapping[str, str]) -> str:
    """The ClusterQueue holding the workload's quota, else the one its LocalQueue (``ns/name`` → CQ) points at."""
    admission = (workload.get("status") or {}).get("admission") or {}
    if admission.get("clusterQueue"):
        return str(admission["clusterQueue"])
    return local_queues.get(local_queue_key(workload), "")


def local_queue_key(workload: Obj) -> str:
    return f"{workload['metadata'].get('namespace', '')}/{(workload.get('spec') or {}).get('queueName', '')}"


@dataclass(frozen=True)
class Position:
    key: str
    workload: Obj
    cluster_queue: str
    in_cluster_queue: int
    in_local_queue: int


def _queue_order(workload: Obj) -> tuple[int, float, str]:
    since = queued_since(workload)
    at = parse_time(since).timestamp() if since else 0.0
    return (-int((workload.get("spec") or {}).get("priority") or 0), at, str(workload["metadata"]["name"]))


def _ordered(queue: str, members: Iterable[Obj]) -> list[Position]:
    seen_in_local: dict[str, int] = {}
    out: list[Position] = []
    for index, wl in enumerate(sorted(members, key=_queue_order)):
        lq = local_queue_key(wl)
        in_local = seen_in_local.get(lq, 0)
        seen_in_local[lq] = in_local + 1
        out.append(
            Position(f"{wl['metadata'].get('namespace', '')}/{wl['metadata']['name']}", wl, queue, index, in_local)
        )
    return out


def pending_positions(workloads: Iterable[Obj], local_queues: Mapping[str, str]) -> list[Position]:
    """Every pending workload with its position in its ClusterQueue and LocalQueue, in the ClusterQueue's order."""
    by_queue: dict[str, list[Obj]] = {}
    for wl in workloads:
        if is_pending(wl):
            queue = cluster_queue_of(wl, local_queues)
            if queue:
                by_queue.setdefault(queue, []).append(wl)
    return [p for queue in sorted(by_queue) for p in _ordered(queue, by_queue[queue])]


def pending_in(cluster_queue: str, workloads: Iterable[Obj], local_queues: Mapping[str, str]) -> list[Position]:
    """The pending workloads of one ClusterQueue in its order: :func:`pending_positions` for that queue alone,
    without ordering the others (what one visibility request needs; it scans every workload once, cheaply)."""
    feeding = {tuple(key.split("/", 1)) for key, target in local_queues.items() if target == cluster_queue}
    members = []
    for wl in workloads:
        admission = (wl.get("status") or {}).get("admission")
        if admission and admission.get("clusterQueue"):
            if admission["clusterQueue"] != cluster_queue:
                continue
        elif (wl["metadata"].get("namespace", ""), (wl.get("spec") or {}).get("queueName", "")) not in feeding:
            continue
        if is_pending(wl):
            members.append(wl)
    return _ordered(cluster_queue, members)


@dataclass(frozen=True)
class QueueObjects:
    """What the answers are computed from: the manager cluster's Workloads, LocalQueues and ClusterQueues."""

    workloads: Iterable[Obj]
    local_queues: Iterable[Obj]
    cluster_queues: Iterable[Obj]


# -- requests -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingRequest:
    """``GET .../clusterqueues/{name}/pendingworkloads`` (namespace empty) or the LocalQueue form."""

    resource: str
    """``clusterqueues`` or ``localqueues``."""
    name: str
    namespace: str
    limit: int
    offset: int


@dataclass(frozen=True)
class Reply:
    """A complete answer: HTTP status and JSON body."""

    code: int
    body: dict[str, Any]


def route(method: str, target: str) -> PendingRequest | Reply:
    """What an HTTP request line asks for: a pending-workloads read, or an answer needing no data (discovery,
    errors). Discovery is answered to anyone the front proxy vouched for, as Kubernetes grants it to every user."""
    path, _, query = target.partition("?")
    parts = [p for p in path.split("/") if p]
    if method != "GET":
        return status(405, "MethodNotAllowed", f"{method} is not supported: this API is read-only")
    if parts == ["apis", GROUP]:
        return Reply(200, api_group())
    if parts == ["apis", GROUP, VERSION]:
        return Reply(200, api_resources())
    base = ["apis", GROUP, VERSION]
    if parts[:3] != base:
        return status(404, "NotFound", "the server could not find the requested resource")
    rest = parts[3:]
    if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == SUBRESOURCE:
        namespace, resource, name = "", "clusterqueues", rest[1]
    elif len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues" and rest[4] == SUBRESOURCE:
        namespace, resource, name = rest[1], "localqueues", rest[3]
    else:
        return status(404, "NotFound", "the server could not find the requested resource")
    params = parse_qs(query)
    try:
        limit = int(params.get("limit", [str(DEFAULT_LIMIT)])[-1])
        offset = int(params.get("offset", ["0"])[-1])
    except ValueError:
        return status(400, "BadRequest", "limit and offset must be integers")
    return PendingRequest(resource, name, namespace, min(max(limit, 0), MAX_LIMIT), max(offset, 0))


def access_review(request: PendingRequest, user: User) -> dict[str, Any]:
    """The SubjectAccessReview a read needs: ``get`` on the ``pendingworkloads`` subresource, as Kubernetes' own
    delegated authorization asks (the built-in roles and Kueue's viewer roles grant exactly this)."""
    attributes: dict[str, Any] = {
        "verb": "get",
        "group": GROUP,
        "version": VERSION,
        "resource": request.resource,
        "subresource": SUBRESOURCE,
        "name": request.name,
    }
    if request.namespace:
        attributes["namespace"] = request.namespace
    spec: dict[str, Any] = {"resourceAttributes": attributes, "user": user.name, "groups": list(user.groups)}
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if user.uid:
        spec["uid"] = user.uid
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def forbidden(request: PendingRequest, user: str, reason: str) -> Reply:
    what = f'{request.resource}.{GROUP} "{request.name}"'
    where = f' in the namespace "{request.namespace}"' if request.namespace else ""
    message = (
        f'{what} is forbidden: User "{user}" cannot get resource "{request.resource}/{SUBRESOURCE}" '
        f'in API group "{GROUP}"{where}'
    )
    return status(
        403,
        "Forbidden",
        f"{message}: {reason}" if reason else message,
        details={"name": request.name, "group": GROUP, "kind": request.resource},
    )


# -- who is asking ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FrontProxy:
    """What the apiserver publishes in ``kube-system/extension-apiserver-authentication`` for aggregated servers:
    the CA of its front-proxy client certificate, the names that certificate may carry, and the headers in which
    it passes the authenticated user."""

    client_ca: str
    allowed_names: tuple[str, ...]
    username_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_prefixes: tuple[str, ...]

    @classmethod
    def from_config_map(cls, data: Mapping[str, str]) -> FrontProxy | None:
        """None when the apiserver was started without a front proxy (no ``requestheader-client-ca-file``)."""
        ca = data.get("requestheader-client-ca-file", "")
        if not ca.strip():
            return None

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            try:
                value = json.loads(data.get(key) or "null")
            except ValueError:
                return default
            return tuple(str(v) for v in value) if isinstance(value, list) and value else default

        return cls(
            client_ca=ca,
            allowed_names=names("requestheader-allowed-names", ()),
            username_headers=names("requestheader-username-headers", ("X-Remote-User",)),
            group_headers=names("requestheader-group-headers", ("X-Remote-Group",)),
            extra_prefixes=names("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
        )

    def allows(self, common_name: str) -> bool:
        """An empty allowed list accepts any certificate the CA signed, as Kubernetes does."""
        return not self.allowed_names or common_name in self.allowed_names


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    extra: dict[str, list[str]]
    uid: str = ""


def front_proxy_user(proxy: FrontProxy, headers: Sequence[tuple[str, str]]) -> User | None:
    """The user the front proxy names in the request headers (None when it names none).

    Header names match case-insensitively; extra keys are lower-cased and percent-decoded, as Kubernetes does.
    """
    lowered = [(name.lower(), value) for name, value in headers]

    def values(name: str) -> list[str]:
        return [v for n, v in lowered if n == name.lower()]

    user = next((v for h in proxy.username_headers for v in values(h) if v), "")
    if not user:
        return None
    groups = tuple(v for h in proxy.group_headers for v in values(h))
    extra: dict[str, list[str]] = {}
    for prefix in (p.lower() for p in proxy.extra_prefixes):
        for name, value in lowered:
            if name.startswith(prefix) and len(name) > len(prefix):
                extra.setdefault(unquote(name[len(prefix) :]).lower(), []).append(value)
    uid = next(iter(values("X-Remote-Uid")), "")
    return User(user, groups, extra, uid)


# -- answers ------------------------------------------------------------------------------------------------------


def local_queue_targets(local_queues: Iterable[Obj]) -> dict[str, str]:
    """``namespace/name`` of every LocalQueue → the ClusterQueue it points at."""
    targets = {}
    for queue in local_queues:
        meta = queue["metadata"]
        targets[f"{meta.get('namespace', '')}/{meta['name']}"] = str((queue.get("spec") or {}).get("clusterQueue", ""))
    return targets


def pending_summary(
    request: PendingRequest,
    *,
    workloads: Iterable[Obj],
    local_queues: Iterable[Obj],
    cluster_queues: Iterable[Obj],
) -> Reply:
    """The ``PendingWorkloadsSummary`` for a request, or NotFound when its queue does not exist."""
    targets = local_queue_targets(local_queues)
    if request.resource == "clusterqueues":
        if request.name not in {q["metadata"]["name"] for q in cluster_queues}:
            return _not_found("clusterqueue", request.name)
        cluster_queue, wanted = request.name, None
    else:
        key = f"{request.namespace}/{request.name}"
        if key not in targets:
            return _not_found("localqueue", request.name)
        cluster_queue, wanted = targets[key], key
    positions = pending_in(cluster_queue, workloads, targets)
    if wanted is not None:
        positions = [p for p in positions if local_queue_key(p.workload) == wanted]
    window = positions[request.offset : request.offset + request.limit]
    return Reply(
        200,
        {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": GROUP_VERSION,
            "metadata": {},
            "items": [_pending_workload(p) for p in window],
        },
    )


def _pending_workload(position: Position) -> dict[str, Any]:
    meta = position.workload["metadata"]
    spec = position.workload.get("spec") or {}
    item_meta: dict[str, Any] = {
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "creationTimestamp": meta.get("creationTimestamp"),
    }
    owners = [
        {key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
        for ref in meta.get("ownerReferences") or []
    ]
    if owners:
        item_meta["ownerReferences"] = owners
    return {
        "metadata": item_meta,
        "priority": int(spec.get("priority") or 0),
        "localQueueName": spec.get("queueName", ""),
        "positionInClusterQueue": position.in_cluster_queue,
        "positionInLocalQueue": position.in_local_queue,
    }


def api_group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version], "preferredVersion": version}


def api_resources() -> dict[str, Any]:
    """The group version's resources, as Kueue lists them: the queues carry no verbs, their subresource ``get``."""

    def resource(name: str, singular: str, kind: str, *, namespaced: bool, verbs: list[str]) -> dict[str, Any]:
        return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs}

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            resource("clusterqueues", "clusterqueue", "ClusterQueue", namespaced=False, verbs=[]),
            resource(f"clusterqueues/{SUBRESOURCE}", "", "PendingWorkloadsSummary", namespaced=False, verbs=["get"]),
            resource("localqueues", "localqueue", "LocalQueue", namespaced=True, verbs=[]),
            resource(f"localqueues/{SUBRESOURCE}", "", "PendingWorkloadsSummary", namespaced=True, verbs=["get"]),
        ],
    }


def status(code: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None) -> Reply:
    """A ``metav1.Status`` failure, the body kubectl prints for a failed request."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return Reply(code, body)


def _not_found(kind: str, name: str) -> Reply:
    return status(
        404, "NotFound", f'{kind}.{GROUP} "{name}" not found', details={"name": name, "group": GROUP, "kind": kind}
    )
