"""Connections to worker clusters: one per MultiKueueCluster, from its validated kubeconfig.

For each MultiKueueCluster the pool reads the kubeconfig (a Secret in the manager's namespace, or a file under the
one configured directory), validates it (no exec or auth-provider plugins, no credential or CA file paths, no
insecure TLS, no basic auth), connects,
and runs that worker's caches (our remote Workloads and Jobs, its ClusterCapacity) in a task of their own, so a
slow or dead worker never stalls the others. The cluster's ``Active`` condition says whether it is usable and,
if not, why. A changed Secret reconnects; a broken one disconnects and says so.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import structlog

from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.api.multikueue import KUBECONFIG_SECRET_KEY
from federation.conditions import set_condition
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.clients import ClientOptions, connect_kubeconfig_text
from federation.kube.errors import KubeError
from federation.kube.kubeconfig import KubeconfigError, read_kubeconfig_file
from federation.kube.resources import CLUSTER_CAPACITIES, JOBS, MULTIKUEUE_CLUSTERS, WORKLOADS
from federation.kube.workqueue import WorkQueue
from federation.protocol import CAPACITY_STALE_SECONDS
from manager.config import ManagerConfig
from manager.decisions.capacity_view import ParsedReport, parse_report

log = structlog.get_logger(__name__)

RemoteHandler = Callable[[str, str, dict[str, Any]], None]
"""``handler(worker, kind, obj)`` with kind ``Workload``, ``Job`` or ``ClusterCapacity``."""

# Kueue's reasons for the MultiKueueCluster Active condition.
REASON_ACTIVE = "Active"
REASON_BAD_KUBECONFIG = "BadKubeConfig"
"""The kubeconfig is missing (no Secret, key or file, or a path kfed must not read) or malformed."""
REASON_INSECURE_KUBECONFIG = "InsecureKubeConfig"
"""The kubeconfig uses a form refused as unsafe (plugins, file references, no TLS verification, basic auth)."""
REASON_CONNECTION_FAILED = "ClientConnectionFailed"
"""The worker's apiserver cannot be reached or stopped answering."""


def kubeconfig_reason(err: KubeconfigError) -> str:
    return REASON_INSECURE_KUBECONFIG if err.insecure else REASON_BAD_KUBECONFIG


@dataclass
class WorkerConnection:
    name: str
    fingerprint: str
    api: KubeApi
    workloads: WatchCache
    jobs: WatchCache
    capacity: WatchCache
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    report: ParsedReport | None = None

    @property
    def connected(self) -> bool:
        caches = (self.workloads, self.jobs, self.capacity)
        return all(c.synced for c in caches) and all(c.connected for c in caches)

    def unusable_reason(self, now: dt.datetime) -> str:
        if not self.connected:
            return "not connected"
        if self.report is None:
            return "no capacity report yet (is kfed-agent running there?)"
        age = (now - self.report.observed_at).total_seconds()
        if age > CAPACITY_STALE_SECONDS:
            return f"capacity report is {age:.0f}s old"
        return ""


class WorkerPool:
    def __init__(
        self,
        *,
        config: ManagerConfig,
        manager_api: KubeApi,
        clusters: WatchCache,
        secrets: WatchCache,
        on_remote_change: RemoteHandler,
    ) -> None:
        self._config = config
        self._manager_api = manager_api
        self._clusters = clusters
        self._secrets = secrets
        self._on_remote_change = on_remote_change
        self.connections: dict[str, WorkerConnection] = {}
        self.problems: dict[str, str] = {}
        self._failures: dict[str, int] = {}
        self.queue = WorkQueue("multikueue-clusters")
        self._tg: anyio.abc.TaskGroup | None = None
        clusters.add_handler(lambda _event, obj, _old: self.queue.add(obj["metadata"]["name"]))
        secrets.add_handler(lambda _event, obj, _old: self._secret_changed(obj))

    def unusable_reason(self, name: str, now: dt.datetime) -> str:
        """Why worker ``name`` cannot take new workloads now ("" when it can)."""
        conn = self.connections.get(name)
        if conn is None:
            return self.problems.get(name, "not connected")
        return conn.unusable_reason(now)

    def _secret_changed(self, secret: dict[str, Any]) -> None:
        name = secret["metadata"]["name"]
        for cluster in self._clusters.store:
            location = cluster["spec"]["clusterSource"]["kubeConfig"]
            if location.get("locationType", "Secret") == "Secret" and location["location"] == name:
                self.queue.add(cluster["metadata"]["name"])

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self.queue.run, self._reconcile)

    # -- reconcile one MultiKueueCluster --------------------------------------------------------------------------

    def _kubeconfig_text(self, cluster: dict[str, Any]) -> str:
        location = cluster["spec"]["clusterSource"]["kubeConfig"]
        if location.get("locationType", "Secret") == "Path":
            return read_kubeconfig_file(location["location"], self._config.kubeconfig_dir)
        secret = self._secrets.store.get_by_name(location["location"], namespace=self._config.namespace)
        if secret is None:
            raise KubeconfigError([f"Secret {self._config.namespace}/{location['location']} not found"])
        data = (secret.get("data") or {}).get(KUBECONFIG_SECRET_KEY)
        if not data:
            raise KubeconfigError(
                [f"Secret {self._config.namespace}/{location['location']} has no {KUBECONFIG_SECRET_KEY!r} key"]
            )
        try:
            return base64.b64decode(data).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as err:
            raise KubeconfigError([f"the {KUBECONFIG_SECRET_KEY!r} key is not valid base64 UTF-8 text"]) from err

    async def _reconcile(self, name: str) -> float | None:
        cluster = self._clusters.store.get_by_name(name)
        if cluster is None:
            await self._disconnect(name)
            self.problems.pop(name, None)
            return None
        try:
            text = self._kubeconfig_text(cluster)
        except KubeconfigError as err:
            await self._disconnect(name)
            return await self._report(cluster, active=False, reason=kubeconfig_reason(err), message=str(err))
        fingerprint = hashlib.sha256(text.encode()).hexdigest()
        current = self.connections.get(name)
        if current is not None and current.fingerprint == fingerprint:
            if current.connected:
                self._failures.pop(name, None)
                return await self._report(cluster, active=True, reason=REASON_ACTIVE, message="Connected")
            return 5.0  # caches are (re)connecting; look again soon
        await self._disconnect(name)
        try:
            api = await connect_kubeconfig_text(
                text,
                cluster=name,
                options=ClientOptions(
                    qps=self._config.client_qps, burst=self._config.client_burst, user_agent=self._config.user_agent
                ),
            )
        except KubeconfigError as err:
            return await self._report(cluster, active=False, reason=kubeconfig_reason(err), message=str(err))
        try:
            with anyio.fail_after(10):
                await api.server_version()
        except (KubeError, TimeoutError, OSError) as err:
            await api.aclose()
            failures = self._failures.get(name, 0) + 1
            self._failures[name] = failures
            delay = float(min(self._config.reconnect_max, self._config.reconnect_initial * 2.0 ** (failures - 1)))
            await self._report(
                cluster,
                active=False,
                reason=REASON_CONNECTION_FAILED,
                message=f"cannot reach the worker's apiserver: {err or type(err).__name__}; retrying in {delay:.0f}s",
            )
            return delay
        self._start(name, fingerprint, api)
        return 1.0  # report Active once the caches have synced

    def _start(self, name: str, fingerprint: str, api: KubeApi) -> None:
        selector = MULTIKUEUE_ORIGIN_LABEL + "=" + self._config.origin
        conn = WorkerConnection(
            name=name,
            fingerprint=fingerprint,
            api=api,
            workloads=WatchCache(api, WORKLOADS, label_selector=selector),
            jobs=WatchCache(api, JOBS, label_selector=selector),
            capacity=WatchCache(api, CLUSTER_CAPACITIES),
        )
        for kind, cache in (("Workload", conn.workloads), ("Job", conn.jobs), ("ClusterCapacity", conn.capacity)):
            cache.add_handler(self._remote_handler(conn, kind))
        self.connections[name] = conn
        assert self._tg is not None
        self._tg.start_soon(self._run_connection, conn)
        log.info("connecting to worker", cluster=name)

    def _remote_handler(self, conn: WorkerConnection, kind: str) -> Callable[[str, dict[str, Any], Any], None]:
        def handle(event: str, obj: dict[str, Any], _old: Any) -> None:
            if kind == "ClusterCapacity":
                conn.report = None if event == "DELETED" else parse_report(obj)
            self._on_remote_change(conn.name, kind, obj)

        return handle

    async def _run_connection(self, conn: WorkerConnection) -> None:
        with conn.scope:
            try:
                async with anyio.create_task_group() as tg:
                    for cache in (conn.workloads, conn.jobs, conn.capacity):
                        tg.start_soon(cache.run)
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.api.aclose()

    async def _disconnect(self, name: str) -> None:
        conn = self.connections.pop(name, None)
        if conn is not None:
            conn.scope.cancel()
            log.info("disconnected from worker", cluster=name)

    async def _report(self, cluster: dict[str, Any], *, active: bool, reason: str, message: str) -> float | None:
        name = cluster["metadata"]["name"]
        if active:
            self.problems.pop(name, None)
        else:
            self.problems[name] = f"{reason}: {message}"
            log.warning("worker cluster unusable", cluster=name, reason=reason, message=message)
        conditions, changed = set_condition(
            (cluster.get("status") or {}).get("conditions") or [],
            condition_type="Active",
            status=active,
            reason=reason,
            message=message,
            now=dt.datetime.now(dt.UTC),
            observed_generation=cluster["metadata"].get("generation"),
        )
        if changed:
            await self._manager_api.patch_status(
                MULTIKUEUE_CLUSTERS,
                name,
                {"status": {"conditions": conditions}},
                field_manager=self._config.field_manager,
            )
        return None
