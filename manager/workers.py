"""Connections to worker clusters: one per MultiKueueCluster, from its validated kubeconfig.

For each MultiKueueCluster the pool reads the kubeconfig (a Secret in the manager's namespace, or a file under the
one configured directory), validates it (no exec or auth-provider plugins, no credential or CA file paths, no
insecure TLS, no basic auth), connects, and runs that worker's caches (our remote Workloads and Jobs, its
ClusterCapacity) in a task of their own, so a slow or dead worker never stalls the others. A changed Secret
reconnects, as does a changed Path kubeconfig (each is read again every few seconds); a broken one disconnects and
says so. Of MultiKueueClusters whose kubeconfigs reach one API server, one is used and the others are inactive,
reason ``DuplicateServer``, and one found to reach the manager cluster itself is inactive, reason ``ManagerCluster``
(``manager.decisions.shared_servers``).

A worker that refuses the ClusterCapacity report (403 with only the permissions Kueue documents for the MultiKueue
manager, 404 where kfed's CRD is not installed, as with stock Kueue) stays usable: its ClusterQueues and
LocalQueues are watched instead and its capacity probed from their status (``capacity_from_queues``), and its
``Active`` message says so. Should the report appear later, it is preferred again.

A worker whose apiserver stops answering keeps its connections open and its watches merely go quiet, so each
connection is probed (``GET /version`` with a short timeout, every few seconds): a failed probe or a cache that
keeps failing makes the worker unusable for new workloads at once and ``Active=False`` (``ClientConnectionFailed``)
within seconds; when it answers again its watches restart and it is ``Active`` again. Every change of the
``Active`` condition also gets an Event on the MultiKueueCluster and a log line.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import structlog

from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.api.multikueue import KUBECONFIG_SECRET_KEY
from federation.conditions import find_condition, parse_time, set_condition
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.clients import ClientOptions, connect_kubeconfig_text
from federation.kube.errors import KubeError
from federation.kube.kubeconfig import (
    KubeconfigError,
    parse_validated_kubeconfig,
    read_kubeconfig_file,
    server_address,
)
from federation.kube.recorder import EventRecorder
from federation.kube.refusal import RefusalReporter
from federation.kube.resources import (
    CLUSTER_CAPACITIES,
    CLUSTER_QUEUES,
    JOBS,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    WORKLOADS,
)
from federation.kube.trigger import spec_changed
from federation.kube.workqueue import WorkQueue
from manager.config import ManagerConfig
from manager.decisions.admission_checks import missing_cluster_reason
from manager.decisions.capacity_view import capacity_from_queues, parse_report
from manager.decisions.shared_servers import (
    REASON_DUPLICATE_SERVER,
    REASON_MANAGER_CLUSTER,
    duplicate_message,
    names_reaching,
    used_name,
)
from manager.decisions.worker_health import (
    CacheView,
    ReconnectBackoff,
    connection_health,
    reconnect_message,
    workloads_looked_at_again,
)
from manager.worker_connection import (
    REASON_ACTIVE,
    REASON_CONNECTION_FAILED,
    WorkerConnection,
    kubeconfig_reason,
)
from manager.workload_writes import REMOTE_SYNC

log = structlog.get_logger(__name__)

RemoteHandler = Callable[[str, str, dict[str, Any], bool], None]
"""``handler(worker, kind, obj, deleted)`` with kind ``Workload``, ``Job`` or ``ClusterCapacity`` (``deleted``: the
event was the object's deletion), or ``HEALTH_CHANGED`` (with an empty obj) when a worker's connection fails, answers
again after failing, is made at last (``manager.decisions.worker_health.workloads_looked_at_again``) or is dropped
(its MultiKueueCluster deleted, its kubeconfig unusable)."""

HEALTH_CHANGED = "HealthChanged"


class WorkerPool:
    def __init__(
        self,
        *,
        config: ManagerConfig,
        manager_api: KubeApi,
        clusters: WatchCache,
        secrets: WatchCache,
        on_remote_change: RemoteHandler,
        events: EventRecorder,
        api_observer: Callable[[str], Callable[[str, float, str | None], None]] | None = None,
    ) -> None:
        self._config = config
        self._api_observer = api_observer
        """Makes the per-call observer of a worker's API client (its latency and error metrics)."""
        self._manager_api = manager_api
        self._clusters = clusters
        self._secrets = secrets
        self._on_remote_change = on_remote_change
        self._events = events
        self.connections: dict[str, WorkerConnection] = {}
        self.problems: dict[str, str] = {}
        self._backoff: dict[str, tuple[str, ReconnectBackoff]] = {}
        """cluster -> (kubeconfig fingerprint, its reconnect backoff); a new kubeconfig starts a fresh backoff."""
        self._lost_at: dict[str, dt.datetime] = {}
        """cluster -> when this process first saw it unusable (cleared once it is connected again)."""
        self._reported: dict[str, tuple[bool, str]] = {}
        """cluster -> (active, reason) last written, to tell a change of the condition from a rewrite."""
        self._addresses: dict[str, str] = {}
        """cluster -> the API server address its kubeconfig names (``shared_servers``), while that kubeconfig is
        usable; for a cluster in ``_same_as``, the address of the server it was found to reach."""
        self._moved: dict[str, tuple[str, dt.datetime]] = {}
        """cluster -> the server address it was last connected to before a connection to another, and when that was
        (``WorkerConnection.moved_from``)."""
        self._reached: dict[str, str] = {}
        """cluster -> the server address of its latest connection."""
        self._same_as: dict[str, tuple[str, str]] = {}
        """cluster -> (the address its kubeconfig names, the address of another cluster's server it was found to reach
        by the objects seen through both: ``same_server``), while its kubeconfig names that address."""
        self.queue = WorkQueue(
            "multikueue-clusters",
            observer=RefusalReporter(
                events=events, component="kfed-manager", lookup=clusters.store.get, action="Connect"
            ),
        )
        self._tg: anyio.abc.TaskGroup | None = None
        # Our own status writes change no spec: reacting to them re-ran connection attempts and burned the backoff.
        clusters.add_handler(
            lambda event, obj, old: self.queue.add(obj["metadata"]["name"]) if spec_changed(event, obj, old) else None
        )
        secrets.add_handler(lambda _event, obj, _old: self._secret_changed(obj))

    def unusable_reason(self, name: str, now: dt.datetime) -> str:
        """Why worker ``name`` cannot take new workloads now ("" when it can)."""
        conn = self.connections.get(name)
        if conn is None:
            if self.missing(name):
                return missing_cluster_reason(name)
            return self.problems.get(name, "not connected")
        return conn.unusable_reason(now)

    def reaches_manager(self, name: str, message: str) -> None:
        """Worker ``name``'s connection reaches the manager cluster itself (``shared_servers``): it takes no copies,
        and its ``Active`` condition says why, until its kubeconfig changes (a new connection)."""
        conn = self.connections.get(name)
        if conn is None or conn.manager_cluster is not None:
            return
        conn.manager_cluster = message
        self.queue.add(name)

    def last_reached(self, name: str) -> str | None:
        """The API server address worker ``name`` was last connected to by this process (None: never), also after
        its MultiKueueCluster was deleted."""
        return self._reached.get(name)

    def same_server(self, name: str, holder: str) -> None:
        """Worker ``name``'s connection sees an object that ``holder``'s sees too (``shared_servers.same_object``):
        the two reach one API server under two spellings. From now on the newer of the two MultiKueueClusters (by
        ``used_name``'s rule, whichever of them found out) counts as reaching the older one's address, so only the
        older one is used."""
        pair = frozenset((name, holder))
        created = {
            cluster: str(found["metadata"].get("creationTimestamp") or "")
            for cluster in pair
            if (found := self._clusters.store.get_by_name(cluster)) is not None
        }
        kept = used_name(pair, created)
        other = name if kept == holder else holder
        conn, theirs = self.connections.get(other), self._addresses.get(kept)
        if conn is None or theirs is None or self._addresses.get(other) == theirs:
            return
        log.warning("two worker clusters reach one API server", cluster=other, used=kept, address=conn.address)
        self._same_as[other] = (conn.address, theirs)
        self._note_address(other, conn.address)
        self.queue.add(other)

    def names_reaching(self, name: str) -> frozenset[str]:
        """The MultiKueueClusters whose kubeconfigs reach worker ``name``'s API server, ``name`` included: a copy
        that a Workload held by any of them has there is not a stray (``shared_servers``)."""
        return names_reaching(name, self._addresses)

    def missing(self, name: str) -> bool:
        """Whether no MultiKueueCluster named ``name`` exists (deleted, or never made), as far as the synced cache
        of them shows."""
        return self._clusters.synced and self._clusters.store.get_by_name(name) is None

    def dropped_reason(self, name: str) -> str:
        """Why kfed holds no connection to worker ``name`` at all ("" when it holds one, or is making one): its
        MultiKueueCluster is gone, or its kubeconfig cannot be used. Either way kfed cannot even ask the worker."""
        if name in self.connections:
            return ""
        if self.missing(name):
            return missing_cluster_reason(name)
        return self.problems.get(name, "")

    def unreachable_since(self, name: str) -> dt.datetime | None:
        """Since when worker ``name`` has been unusable (None while it is connected): the earlier of when this process
        saw it fail and when its ``Active`` condition turned False, so a manager restart during an outage neither
        starts the clock again nor counts a blip it never saw."""
        conn = self.connections.get(name)
        if conn is not None and conn.connected:
            self._lost_at.pop(name, None)
            return None
        since = self._lost_at.setdefault(name, dt.datetime.now(dt.UTC))
        cluster = self._clusters.store.get_by_name(name)
        written = find_condition(cluster, "Active") if cluster is not None else None
        if written is not None and written.get("status") == "False" and written.get("lastTransitionTime"):
            since = min(since, parse_time(str(written["lastTransitionTime"])))
        return since

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
            tg.start_soon(self._follow_kubeconfig_files)

    async def _follow_kubeconfig_files(self) -> None:
        """Read every ``locationType: Path`` kubeconfig again every ``kubeconfig_file_check_interval`` and reconcile
        its MultiKueueCluster when the file changed (or became readable or unreadable): files have no watch here,
        and a mounted Secret the kubelet updates (a rotated token, another server) must not wait for the connection
        to fail. A file's content is compared by digest; reading a few small files is cheap."""
        seen: dict[str, str] = {}
        while True:
            for cluster in list(self._clusters.store):
                location = cluster["spec"]["clusterSource"]["kubeConfig"]
                name = cluster["metadata"]["name"]
                if location.get("locationType", "Secret") != "Path":
                    seen.pop(name, None)
                    continue
                try:
                    content = read_kubeconfig_file(location["location"], self._config.kubeconfig_dir)
                except KubeconfigError as err:
                    content = f"unreadable: {err}"
                digest = hashlib.sha256(content.encode()).hexdigest()
                conn = self.connections.get(name)
                # connected: to what the file said then (its fingerprint is the same digest of the text)
                known = conn.fingerprint if conn is not None else seen.get(name, digest)
                if known != digest:
                    log.info("kubeconfig file changed; reconnecting", cluster=name, path=location["location"])
                    self.queue.add(name)
                seen[name] = digest
            for gone in set(seen) - {c["metadata"]["name"] for c in self._clusters.store}:
                del seen[gone]
            await anyio.sleep(self._config.kubeconfig_file_check_interval)

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

    def _note_address(self, name: str, address: str | None) -> None:
        """Record the server ``name``'s kubeconfig reaches (None: no usable kubeconfig, or no cluster); when that
        changes, the clusters that reached the old or reach the new one are looked at again, as which of them is
        used may change."""
        learned = self._same_as.get(name)
        if learned is not None and learned[0] == address:
            address = learned[1]
        elif learned is not None:
            del self._same_as[name]  # its kubeconfig names another server now
        before = self._addresses.get(name)
        if before == address:
            return
        if address is None:
            del self._addresses[name]
        else:
            self._addresses[name] = address
        for other, theirs in list(self._addresses.items()):
            if other != name and theirs in (before, address):
                self.queue.add(other)

    def _used_for_server(self, name: str) -> str:
        """Which of the clusters reaching ``name``'s server is used (``shared_servers.used_name``). The addresses of
        clusters not reconciled yet are read first, so that after a restart the one to be used is known before any
        of them connects."""
        for other in self._clusters.store:
            other_name = other["metadata"]["name"]
            if other_name not in self._addresses:
                try:
                    self._addresses[other_name] = server_address(
                        parse_validated_kubeconfig(self._kubeconfig_text(other))
                    )
                except ValueError:  # a KubeconfigError, or anything else wrong with one kubeconfig: not this one's
                    continue
        created = {
            other: str(found["metadata"].get("creationTimestamp") or "")
            for other in self.names_reaching(name)
            if (found := self._clusters.store.get_by_name(other)) is not None
        }
        address = self._addresses.get(name)
        return used_name(
            frozenset(created) | {name},
            created,
            in_use=frozenset(
                other
                for other in created
                if (conn := self.connections.get(other)) is not None and conn.address == address
            ),
        )

    def _backoff_for(self, name: str, fingerprint: str) -> ReconnectBackoff:
        known = self._backoff.get(name)
        if known is None or known[0] != fingerprint:
            known = (
                fingerprint,
                ReconnectBackoff(initial=self._config.reconnect_initial, maximum=self._config.reconnect_max),
            )
            self._backoff[name] = known
        return known[1]

    async def _reconcile(self, name: str) -> float | None:
        cluster = self._clusters.store.get_by_name(name)
        if cluster is None:
            await self._disconnect(name)
            self._same_as.pop(name, None)  # (where it was connected last stays known: it may come back elsewhere)
            self._note_address(name, None)
            self.problems.pop(name, None)
            self._backoff.pop(name, None)
            self._reported.pop(name, None)
            return None
        try:
            text = self._kubeconfig_text(cluster)
            address = server_address(parse_validated_kubeconfig(text))
        except KubeconfigError as err:
            await self._disconnect(name)
            self._note_address(name, None)
            return await self._report(cluster, active=False, reason=kubeconfig_reason(err), message=str(err))
        self._note_address(name, address)
        used = self._used_for_server(name)
        if used != name:
            await self._disconnect(name)
            return await self._report(
                cluster,
                active=False,
                reason=REASON_DUPLICATE_SERVER,
                message=duplicate_message(address=address, used=used, used_address=self._addresses.get(used)),
            )
        fingerprint = hashlib.sha256(text.encode()).hexdigest()
        current = self.connections.get(name)
        if current is not None and current.fingerprint == fingerprint:
            if current.manager_cluster is not None:
                return await self._report(
                    cluster, active=False, reason=REASON_MANAGER_CLUSTER, message=current.manager_cluster
                )
            if current.health.state == "healthy":
                self._backoff_for(name, fingerprint).reset()
                message = current.health.message
                if current.report_error is not None:
                    message = f"{message}; not used: {current.report_error}"
                return await self._report(cluster, active=True, reason=REASON_ACTIVE, message=message)
            if current.health.state == "failed":
                return await self._report(
                    cluster, active=False, reason=REASON_CONNECTION_FAILED, message=current.health.message
                )
            return None  # still connecting: the connection's monitor re-queues the cluster when that changes
        await self._disconnect(name)
        backoff = self._backoff_for(name, fingerprint)
        wait = backoff.remaining(time.monotonic())
        if wait > 0:
            return wait  # the last attempt failed; only the backoff decides when the next one is made
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
        if self._api_observer is not None:
            api.observer = self._api_observer(name)
        try:
            with anyio.fail_after(10):
                await api.server_version()
        except (KubeError, TimeoutError, OSError) as err:
            await api.aclose()
            delay = backoff.failed(time.monotonic())
            await self._report(
                cluster,
                active=False,
                reason=REASON_CONNECTION_FAILED,
                message=reconnect_message(
                    str(err) or type(err).__name__,
                    attempt=backoff.failures,
                    delay=delay,
                    now=dt.datetime.now(dt.UTC),
                    status=err.status if isinstance(err, KubeError) else None,
                ),
            )
            return delay
        self._start(name, fingerprint, address, api)
        return None  # the connection's monitor re-queues the cluster once its caches have synced (or failed)

    def _start(self, name: str, fingerprint: str, address: str, api: KubeApi) -> None:
        selector = MULTIKUEUE_ORIGIN_LABEL + "=" + self._config.origin
        reached = self._reached.get(name)
        if reached is not None and reached != address:
            self._moved[name] = (reached, dt.datetime.now(dt.UTC))
            log.warning("worker cluster now reaches another API server", cluster=name, was=reached, now=address)
        self._reached[name] = address
        conn = WorkerConnection(
            name=name,
            fingerprint=fingerprint,
            address=address,
            moved_from=self._moved.get(name),
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
            if kind in ("ClusterQueue", "LocalQueue"):
                assert conn.cluster_queues is not None
                assert conn.local_queues is not None
                # (during the first lists this is partial; the connection is not healthy, so not used, until both
                # caches have listed, and it is probed again then)
                conn.probed = capacity_from_queues(
                    conn.cluster_queues.store,
                    conn.local_queues.store,
                    # condition times have whole seconds: a reservation made in this second may not be in it yet
                    observed_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1),
                )
                if conn.report is None:
                    self._on_remote_change(conn.name, "ClusterCapacity", obj, False)
                return
            if kind == "ClusterCapacity":
                self._read_report(conn, None if event == "DELETED" else obj)
            elif (conn.workload_view if kind == "Workload" else conn.job_view).observe_echo(event, obj) == REMOTE_SYNC:
                return  # the answer to the remote sync's own create: the pass that created the copy has seen it
            self._on_remote_change(conn.name, kind, obj, event == "DELETED")

        return handle

    def _read_report(self, conn: WorkerConnection, obj: dict[str, Any] | None) -> None:
        """Take the worker's ClusterCapacity report (None: deleted). One that cannot be read is not used, the old one
        neither: the worker gets nothing until a report can be read, and its ``Active`` message, an Event and a log
        line say why."""
        error = None
        previous = conn.report
        try:
            conn.report = parse_report(obj) if obj is not None else None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            conn.report = None
            error = f"its ClusterCapacity report cannot be read ({type(err).__name__}: {str(err)[:300]})"
        if conn.report is None:
            conn.report_received_at, conn.report_renewed = None, False
        elif previous is None or (conn.report.generation, conn.report.observed_at) != (
            previous.generation,
            previous.observed_at,
        ):
            conn.report_received_at, conn.report_renewed = dt.datetime.now(dt.UTC), previous is not None
        if error == conn.report_error:
            return
        conn.report_error = error
        cluster = self._clusters.store.get_by_name(conn.name)
        if error is not None:
            log.warning("worker capacity report unreadable", cluster=conn.name, error=error)
            if cluster is not None:
                self._events.emit(
                    cluster, reason="CapacityReportUnreadable", note=error, action="Probe", event_type="Warning"
                )
        else:
            log.info(
                "worker capacity report " + ("readable again" if obj is not None else "deleted"), cluster=conn.name
            )
        self.queue.add(conn.name)  # its Active message says it

    async def _run_connection(self, conn: WorkerConnection) -> None:
        with conn.scope:
            try:
                async with anyio.create_task_group() as tg:
                    conn.tg = tg
                    for _kind, cache in conn.caches:
                        tg.start_soon(cache.run)
                    tg.start_soon(self._monitor, conn)
            finally:
                with anyio.CancelScope(shield=True):
                    await conn.api.aclose()

    async def _probe(self, conn: WorkerConnection) -> tuple[str, int | None] | None:
        """Why the worker's apiserver failed its liveness probe and the HTTP status it answered with (None: no
        answer), or None when it answered."""
        timeout = self._config.probe_timeout
        try:
            with anyio.fail_after(timeout):
                await conn.api.server_version(request_timeout=timeout, retry=False)
        except TimeoutError:
            return f"no answer to GET /version within {timeout:g}s", None
        except KubeError as err:
            return str(err) or type(err).__name__, err.status
        except OSError as err:
            return str(err) or type(err).__name__, None
        except Exception as err:  # e.g. an answer that is not JSON: the worker fails the probe, the pool lives on
            return f"{type(err).__name__}: {err}", None
        return None

    async def _monitor(self, conn: WorkerConnection) -> None:
        """Probe the worker every ``probe_interval`` and judge the connection; a change of its health re-queues the
        cluster (whose reconcile writes the condition). After failed probes, the first answer restarts the watches:
        they may sit on connections that will never deliver again, or in a backoff sleep."""
        probe_failed = False
        while True:
            probe_failure = await self._probe(conn)
            probe_error, probe_status = probe_failure if probe_failure is not None else (None, None)
            if probe_error is None and probe_failed:
                log.info("worker answers again; restarting its watches", cluster=conn.name)
                for _kind, cache in conn.caches:
                    cache.restart_watch()
            probe_failed = probe_error is not None
            now = time.monotonic()
            missing = conn.report_missing(now)
            if missing is not None and conn.cluster_queues is None:
                self._start_probing(conn, missing)
            health = connection_health(
                probe_error=probe_error,
                probe_status=probe_status,
                caches=[
                    CacheView(
                        kind,
                        synced=cache.synced,
                        failing_for=cache.failing_for(now),
                        error=missing if kind == "ClusterCapacity" and missing is not None else cache.last_error,
                        optional=kind == "ClusterCapacity",
                        refused=missing is not None and kind == "ClusterCapacity",
                    )
                    for kind, cache in conn.caches
                ],
                grace=self._config.probe_timeout,
            )
            if health != conn.health:
                (log.warning if health.state == "failed" else log.info)(
                    "worker connection health changed",
                    cluster=conn.name,
                    state=health.state,
                    was=conn.health.state,
                    message=health.message,
                )
                was = conn.health.state
                conn.health = health
                if health.state == "failed":
                    self._lost_at.setdefault(conn.name, dt.datetime.now(dt.UTC))
                elif health.state == "healthy":
                    self._lost_at.pop(conn.name, None)  # the next outage is timed from its own start
                if health.state == "healthy" and conn.cluster_queues is not None and conn.report is None:
                    self._on_remote_change(conn.name, "ClusterCapacity", {}, False)  # usable now: schedule
                if workloads_looked_at_again(was, health.state):
                    self._on_remote_change(conn.name, HEALTH_CHANGED, {}, False)
                self.queue.add(conn.name)
            await anyio.sleep(self._config.probe_interval if health.state != "connecting" else 0.5)

    def _start_probing(self, conn: WorkerConnection, missing: str) -> None:
        """The worker has no ClusterCapacity report: watch its ClusterQueues and LocalQueues instead."""
        conn.cluster_queues = WatchCache(conn.api, CLUSTER_QUEUES)
        conn.local_queues = WatchCache(conn.api, LOCAL_QUEUES)
        for kind, cache in (("ClusterQueue", conn.cluster_queues), ("LocalQueue", conn.local_queues)):
            cache.add_handler(self._remote_handler(conn, kind))
            assert conn.tg is not None
            conn.tg.start_soon(cache.run)
        log.warning(
            "worker has no capacity report; probing its ClusterQueue status instead",
            cluster=conn.name,
            error=missing[:300],
        )

    async def _disconnect(self, name: str) -> None:
        conn = self.connections.pop(name, None)
        if conn is not None:
            conn.scope.cancel()
            log.info("disconnected from worker", cluster=name)
            # The Workloads it holds are looked at again: no watch of that worker will bring them back now (its
            # MultiKueueCluster deleted, its kubeconfig broken), and each must say what it waits for.
            self._on_remote_change(name, HEALTH_CHANGED, {}, False)

    async def _report(self, cluster: dict[str, Any], *, active: bool, reason: str, message: str) -> float | None:
        name = cluster["metadata"]["name"]
        if active:
            self.problems.pop(name, None)
        else:
            self.problems[name] = f"{reason}: {message}"
        previous = self._reported.get(name)
        if previous is None:
            written = find_condition(cluster, "Active")
            if written is not None:
                previous = (written.get("status") == "True", str(written.get("reason", "")))
        if previous != (active, reason):
            self._reported[name] = (active, reason)
            if active:
                log.info("worker cluster active", cluster=name, reason=reason, message=message)
            else:
                log.warning("worker cluster unusable", cluster=name, reason=reason, message=message)
            self._events.emit(
                cluster,
                reason=reason,
                note=message,
                action="Connect",
                event_type="Normal" if active else "Warning",
            )
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
