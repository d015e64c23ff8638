"""Joining a worker cluster to the manager (`kubectl kfed add-worker` / `remove-worker`), replacing Kueue's
create-multikueue-kubeconfig.sh.

The worker's kfed-agent chart made a ServiceAccount for the manager (``kfed-manager-access``) with the only rights
the manager needs there. Joining mints a token for it (a TokenRequest, with the operator's own credentials for the
worker), wraps it in a self-contained kubeconfig (server, embedded CA data, token: the only form the manager
accepts), and on the manager cluster creates the Secret holding it, the MultiKueueCluster naming that Secret and
the MultiKueueConfig entry listing the cluster. Removing undoes the manager side in the reverse order: the
MultiKueueConfig entry at once, the MultiKueueCluster and Secret only once no Job runs there any more (kfed-manager
needs them to see those Jobs end and to delete their copies).

The top half is pure (what to write); :func:`add_worker` and :func:`remove_worker` do the I/O through
``federation.kube``.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import yaml

from federation.conditions import find_condition, is_true
from federation.kube.api import KubeApi
from federation.kube.errors import AlreadyExists, Conflict, NotFound
from federation.kube.kubeconfig import KubeconfigError, parse_validated_kubeconfig
from federation.kube.resources import CONFIG_MAPS, MULTIKUEUE_CLUSTERS, MULTIKUEUE_CONFIGS, SECRETS, WORKLOADS
from manager.decisions.lifecycle import held_worker

Obj = dict[str, Any]

FIELD_MANAGER = "kubectl-kfed"
MANAGED_BY = {"app.kubernetes.io/managed-by": FIELD_MANAGER}
WORKER_LABEL = "kfed.io/worker"
SECRET_KEY = "kubeconfig"
"""The Secret key MultiKueue reads the kubeconfig from (Kueue's)."""
DEFAULT_ACCESS_ACCOUNT = "kfed-manager-access"
"""The ServiceAccount the kfed-agent chart makes for the manager (managerAccess.serviceAccountName)."""
DEFAULT_TOKEN_SECONDS = 365 * 24 * 3600
REMOVE_POLL_SECONDS = 2.0
"""How often ``remove-worker --wait`` looks again at the Workloads the worker still runs."""


class JoinError(Exception):
    """Why a worker cannot be joined or removed, in words for the operator."""


@dataclass(frozen=True)
class Endpoint:
    """How the manager reaches the worker's apiserver: its URL and the CA that signed its serving certificate."""

    server: str
    ca_data: str
    """Base64 PEM, as in a kubeconfig's certificate-authority-data; "" when the operator's kubeconfig has none."""


def parse_duration(text: str) -> int:
    """Seconds of ``"8760h"``, ``"30m"``, ``"90s"``, ``"1h30m"`` or a bare number of seconds; raises ValueError."""
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        seconds = int(text)
    else:
        parts = re.findall(r"(\d+)([hms])", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f"not a duration: {text!r} (use e.g. 8760h, 30m, 600s)")
        seconds = sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds < 600:
        raise ValueError(f"{text!r}: a token must live at least 10 minutes (the apiserver's minimum)")
    return seconds


def context_endpoint(config: Mapping[str, Any], context: str | None, *, read_file: Callable[[str], bytes]) -> Endpoint:
    """The server and CA of ``context`` (the current one when None) in an operator's kubeconfig.

    A CA given as a file (``certificate-authority``) is read with ``read_file`` and embedded.
    """
    name = context or config.get("current-context")
    if not name:
        raise JoinError("the kubeconfig has no current-context; name the worker's context with --worker-context")
    entry = _named(config, "contexts", str(name))
    if entry is None:
        known = ", ".join(str(c.get("name")) for c in config.get("contexts") or ()) or "none"
        raise JoinError(f"context {name!r} is not in the kubeconfig (contexts: {known})")
    cluster_name = (entry.get("context") or {}).get("cluster")
    cluster_entry = _named(config, "clusters", str(cluster_name))
    if cluster_entry is None:
        raise JoinError(f"context {name!r} names cluster {cluster_name!r}, which is not in the kubeconfig")
    cluster = cluster_entry.get("cluster") or {}
    server = str(cluster.get("server") or "")
    if not server:
        raise JoinError(f"cluster {cluster_name!r} has no server URL")
    ca_data = str(cluster.get("certificate-authority-data") or "")
    if not ca_data and cluster.get("certificate-authority"):
        ca_data = base64.b64encode(read_file(str(cluster["certificate-authority"]))).decode()
    return Endpoint(server=server, ca_data=ca_data)


def _named(config: Mapping[str, Any], section: str, name: str) -> Mapping[str, Any] | None:
    return next((e for e in config.get(section) or () if isinstance(e, Mapping) and e.get("name") == name), None)


def worker_kubeconfig(name: str, endpoint: Endpoint, *, token: str, user: str) -> str:
    """A self-contained kubeconfig for the worker (server, embedded CA, token), checked as the manager checks it."""
    if not endpoint.ca_data:
        raise JoinError(f"no CA for {endpoint.server}: the manager never skips TLS verification")
    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": endpoint.server, "certificate-authority-data": endpoint.ca_data}}
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
            "current-context": name,
        },
        sort_keys=False,
    )
    try:
        parse_validated_kubeconfig(text)
    except KubeconfigError as err:
        raise JoinError(f"the manager would refuse this kubeconfig: {err}") from err
    return text


def secret_name(worker: str) -> str:
    return f"{worker}-kubeconfig"


def join_objects(worker: str, *, namespace: str, kubeconfig: str) -> tuple[Obj, Obj]:
    """The kubeconfig Secret (in the manager's namespace) and the MultiKueueCluster reading it."""
    labels = {**MANAGED_BY, WORKER_LABEL: worker}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(worker), "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "data": {SECRET_KEY: base64.b64encode(kubeconfig.encode()).decode()},
    }
    cluster = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": worker, "labels": labels},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name(worker)}}},
    }
    return secret, cluster


def choose_config(existing: list[str], requested: str | None) -> str:
    """The MultiKueueConfig to list the worker in: the one named, else the only one there is, else "kfed"."""
    if requested:
        return requested
    if len(existing) == 1:
        return existing[0]
    if not existing:
        return "kfed"
    raise JoinError(f"several MultiKueueConfigs ({', '.join(sorted(existing))}); choose one with --multikueue-config")


def with_cluster(clusters: list[str], worker: str) -> list[str] | None:
    """The config's cluster list with ``worker`` appended; None when it is listed already."""
    return None if worker in clusters else [*clusters, worker]


def without_cluster(clusters: list[str], worker: str) -> list[str] | None:
    """The list without ``worker``; None when it is not listed."""
    return [c for c in clusters if c != worker] if worker in clusters else None


def running_on(workloads: list[Obj], worker: str) -> list[str]:
    """``namespace/name`` of the manager Workloads ``worker`` holds and that have not finished: their Jobs run (or are
    about to) there, and only kfed-manager's connection to it can see them end and delete their copies."""
    return sorted(
        f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"
        for wl in workloads
        if held_worker(wl) == worker and not is_true(wl, "Finished")
    )


def still_running_message(worker: str, keys: list[str]) -> str:
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return (
        f"worker {worker} still runs {len(keys)} workload(s): {shown}. It is out of every MultiKueueConfig, so it gets "
        "no new ones; its MultiKueueCluster and Secret stay so that kfed can finish these and delete their copies "
        "there. Run remove-worker again once they finished (--wait SECONDS waits for them), or with --force to "
        "remove it now: kfed-manager then loses sight of them, requeues them after its worker-lost timeout and "
        "cannot delete their copies, which may still be running there"
    )


# -- I/O --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddWorker:
    name: str
    endpoint: Endpoint
    namespace: str = "kfed-system"
    """The manager's namespace (its --namespace): where the Secret goes."""
    worker_namespace: str = "kfed-system"
    """The kfed-agent release's namespace on the worker: where the manager-access ServiceAccount is."""
    service_account: str = DEFAULT_ACCESS_ACCOUNT
    token_seconds: int = DEFAULT_TOKEN_SECONDS
    multikueue_config: str | None = None


async def add_worker(manager: KubeApi, worker: KubeApi, spec: AddWorker, *, say: Callable[[str], None]) -> None:
    """Mint the token on the worker, then write the Secret, the MultiKueueCluster and the config entry (idempotent:
    running it again refreshes the token)."""
    endpoint = spec.endpoint
    if not endpoint.ca_data:
        root_ca = await worker.get_or_none(CONFIG_MAPS, "kube-root-ca.crt", namespace=spec.worker_namespace)
        pem = str(((root_ca or {}).get("data") or {}).get("ca.crt") or "")
        endpoint = Endpoint(endpoint.server, base64.b64encode(pem.encode()).decode() if pem else "")
    try:
        answer = await worker.request_token(
            spec.service_account, namespace=spec.worker_namespace, expiration_seconds=spec.token_seconds
        )
    except NotFound as err:
        raise JoinError(
            f"ServiceAccount {spec.worker_namespace}/{spec.service_account} not found on the worker: install the "
            f"kfed-agent chart there first (managerAccess.enabled), or name its namespace with --worker-namespace"
        ) from err
    token = str((answer.get("status") or {}).get("token") or "")
    expires = str((answer.get("status") or {}).get("expirationTimestamp") or "?")
    say(f"token minted for {spec.worker_namespace}/{spec.service_account} on the worker, expires {expires}")
    text = worker_kubeconfig(spec.name, endpoint, token=token, user=f"{spec.name}-{spec.service_account}")
    secret, cluster = join_objects(spec.name, namespace=spec.namespace, kubeconfig=text)
    await manager.apply(SECRETS, secret, field_manager=FIELD_MANAGER, force=True)
    say(f"secret {spec.namespace}/{secret['metadata']['name']} configured")
    await manager.apply(MULTIKUEUE_CLUSTERS, cluster, field_manager=FIELD_MANAGER, force=True)
    say(f"multikueuecluster {spec.name} configured")
    existing = [c["metadata"]["name"] for c in (await manager.list(MULTIKUEUE_CONFIGS)).items]
    config = choose_config(existing, spec.multikueue_config)
    await _update_config(manager, config, spec.name, add=True, say=say)


async def remove_worker(
    manager: KubeApi,
    name: str,
    *,
    namespace: str,
    say: Callable[[str], None],
    wait: float = 0.0,
    force: bool = False,
) -> None:
    """Take the worker out of every MultiKueueConfig; once no unfinished Workload is held there (waiting up to
    ``wait`` seconds for them; ``force`` does not wait), delete its MultiKueueCluster and the Secret add-worker made
    (a Secret without kubectl-kfed's label is the operator's and is left alone). Raises JoinError, keeping both,
    while Workloads still run there."""
    for config in (await manager.list(MULTIKUEUE_CONFIGS)).items:
        if name in ((config.get("spec") or {}).get("clusters") or []):
            await _update_config(manager, config["metadata"]["name"], name, add=False, say=say)
    running = running_on((await manager.list(WORKLOADS)).items, name)
    deadline = time.monotonic() + wait
    while running and not force and time.monotonic() < deadline:
        say(f"waiting for {len(running)} workload(s) on {name} to finish: {', '.join(running[:5])}")
        await anyio.sleep(min(REMOVE_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        running = running_on((await manager.list(WORKLOADS)).items, name)
    if running and not force:
        raise JoinError(still_running_message(name, running))
    if running:
        say(f"removing {name} although {len(running)} workload(s) still run there: {', '.join(running[:5])}")
    cluster = await manager.get_or_none(MULTIKUEUE_CLUSTERS, name)
    location = ""
    if cluster is not None:
        source = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
        location = str(source.get("location") or "") if source.get("locationType", "Secret") == "Secret" else ""
        await manager.delete(MULTIKUEUE_CLUSTERS, name, missing_ok=True)
        say(f"multikueuecluster {name} deleted")
    else:
        say(f"multikueuecluster {name} not found")
    secret = await manager.get_or_none(SECRETS, location or secret_name(name), namespace=namespace)
    if secret is None:
        return
    labels = (secret.get("metadata") or {}).get("labels") or {}
    if labels.get("app.kubernetes.io/managed-by") == FIELD_MANAGER and labels.get(WORKER_LABEL) == name:
        await manager.delete(SECRETS, secret["metadata"]["name"], namespace=namespace, missing_ok=True)
        say(f"secret {namespace}/{secret['metadata']['name']} deleted")
    else:
        say(f"secret {namespace}/{secret['metadata']['name']} left alone (not made by kubectl kfed add-worker)")


async def _update_config(manager: KubeApi, config: str, worker: str, *, add: bool, say: Callable[[str], None]) -> None:
    for _ in range(5):
        current = await manager.get_or_none(MULTIKUEUE_CONFIGS, config)
        if current is None:
            if not add:
                return
            try:
                await manager.create(
                    MULTIKUEUE_CONFIGS,
                    {"metadata": {"name": config, "labels": dict(MANAGED_BY)}, "spec": {"clusters": [worker]}},
                    field_manager=FIELD_MANAGER,
                )
            except AlreadyExists:
                continue  # created meanwhile: read it again
            say(f"multikueueconfig {config} created with {worker}")
            return
        clusters = list((current.get("spec") or {}).get("clusters") or [])
        changed = with_cluster(clusters, worker) if add else without_cluster(clusters, worker)
        if changed is None:
            say(f"multikueueconfig {config} already {'lists' if add else 'omits'} {worker}")
            return
        try:
            if changed:
                await manager.replace(
                    MULTIKUEUE_CONFIGS,
                    {**current, "spec": {**current["spec"], "clusters": changed}},
                    field_manager=FIELD_MANAGER,
                )
                say(f"multikueueconfig {config}: {worker} {'added' if add else 'removed'}")
            elif (current["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") == FIELD_MANAGER:
                # A config lists at least one cluster; the one add-worker created goes with its last worker.
                await manager.delete(
                    MULTIKUEUE_CONFIGS, config, resource_version=current["metadata"]["resourceVersion"]
                )
                say(f"multikueueconfig {config} deleted (it listed only {worker})")
            else:
                say(f"multikueueconfig {config} still lists {worker}: it is its only cluster; edit or delete it")
            return
        except Conflict:
            continue  # changed meanwhile: read it again
    raise JoinError(f"multikueueconfig {config} kept changing under us; try again")


async def wait_connected(
    manager: KubeApi, name: str, *, seconds: float, say: Callable[[str], None], interval: float = 0.5
) -> bool:
    """Wait until the manager reports the MultiKueueCluster Active=True; say each condition seen on the way."""
    last = ""
    with anyio.move_on_after(seconds):
        while True:
            cluster = await manager.get_or_none(MULTIKUEUE_CLUSTERS, name)
            active = find_condition(cluster, "Active") if cluster else None
            seen = (
                f"Active={active.get('status')} {active.get('reason', '')}: {active.get('message', '')}"
                if active
                else "no Active condition yet (is kfed-manager running?)"
            )
            if seen != last:
                say(f"{name}: {seen}")
                last = seen
            if active and active.get("status") == "True":
                return True
            await anyio.sleep(interval)
    say(f"{name} not connected after {seconds:.0f}s (last: {last}); the objects stay, see `kubectl kfed workers`")
    return False
