"""MultiKueueClusters whose kubeconfigs reach one and the same worker API server.

A worker cluster must be named by one MultiKueueCluster. kfed-manager tells a Workload's copies apart by the worker
that holds it: seen through a second name, the copies the first name holds are strays, and deleting a stray there
deletes the copy itself. (A kubeconfig pasted into a second MultiKueueCluster's Secret made the two names delete and
send again each other's copies in a loop, stopping the Jobs that ran.) So of the names whose kubeconfigs reach one
server, only one is used: the one already connected to it (a MultiKueueCluster added, or whose kubeconfig was edited,
to reach a server in use is the one refused), else, as after a restart, the oldest (then the first by name). The
others are inactive, with a reason naming it, until their kubeconfig names another server or the used one goes; and
the used one's connection leaves alone the copies that a Workload held by one of those names has there
(``names_reaching``): after a restart the name used may not be the one that sent them.

"The same server" is told by the address the kubeconfig names (``federation.kube.kubeconfig.server_address``), and,
for two spellings of one server (a host name and its IP address), by what is seen through them: a copy about to be
deleted as a stray through one name that the worker holding its Workload sees too, the same object (same uid), shows
that the two names reach one server (:func:`same_object`). The copy is left alone, and from then on the name is
treated as reaching the holder's address, until its kubeconfig names another.

A kubeconfig may also reach the manager's own API server. A copy there would take the name of the object it copies,
so kfed-manager finds out at its first copy: the object already there under that name is the manager's own (the same
uid). That MultiKueueCluster is then inactive (:data:`REASON_MANAGER_CLUSTER`) and gets no copy until its kubeconfig
changes; the workload that found out is sent elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REASON_DUPLICATE_SERVER = "DuplicateServer"
"""The MultiKueueCluster's kubeconfig reaches the API server another MultiKueueCluster's does, and that one is used."""


def names_reaching(name: str, addresses: Mapping[str, str]) -> frozenset[str]:
    """The clusters whose kubeconfig reaches the server ``name``'s does (``addresses``: cluster -> server
    address), ``name`` included; just ``name`` when its address is unknown."""
    address = addresses.get(name)
    if address is None:
        return frozenset((name,))
    return frozenset(other for other, theirs in addresses.items() if theirs == address) | {name}


def used_name(names: frozenset[str], created: Mapping[str, str], *, in_use: frozenset[str] = frozenset()) -> str:
    """Which of ``names`` (clusters reaching one server) is used: the one connected to it already (``in_use``), else
    the oldest by creation time (RFC 3339, as the apiserver writes it; ``created`` lacks a cluster not yet listed,
    which then counts as newest), then the first by name."""
    return min(names, key=lambda name: (name not in in_use, created.get(name) or "~", name))


REASON_MANAGER_CLUSTER = "ManagerCluster"
"""The MultiKueueCluster's kubeconfig reaches the manager cluster itself."""


def manager_cluster_message(*, kind: str, namespace: str, name: str) -> str:
    """Why a MultiKueueCluster that reaches the manager cluster is not used: ``kind`` ``namespace/name`` is the
    manager's own object of the name its copy would take."""
    return (
        f"its kubeconfig reaches the manager cluster itself ({kind} {namespace}/{name} there is the manager's own, "
        "not a copy), and a cluster cannot be its own worker: its copies would take the names of the objects they "
        "copy; not used until its kubeconfig changes"
    )


def same_object(seen: Mapping[str, Any] | None, other: Mapping[str, Any] | None) -> bool:
    """``seen`` and ``other``, read through two MultiKueueClusters, are one object: the same uid (the apiserver makes
    one for every object, so two servers never share one)."""
    uid = ((seen or {}).get("metadata") or {}).get("uid")
    return bool(uid) and uid == ((other or {}).get("metadata") or {}).get("uid")


def duplicate_message(*, address: str, used: str, used_address: str | None = None) -> str:
    if used_address is not None and used_address != address:
        address = f"{address} (the server at {used_address}: the same objects are seen through both)"
    return (
        f"its kubeconfig reaches {address}, the API server MultiKueueCluster {used!r} reaches and kfed-manager uses; "
        "one worker cluster must be named by one MultiKueueCluster, so this one is not used until its kubeconfig "
        f"names another server or {used!r} is deleted"
    )
