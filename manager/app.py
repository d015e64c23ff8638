"""`kfed-manager`: command line, logging, health endpoint, leader election, then the runtime."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.abc
import structlog

from federation.eventloop import run_process
from federation.kube import clients
from federation.kube.api import KubeApi
from federation.kube.leader import LeaderElectionConfig, LeaderElector
from federation.kube.recorder import EventRecorder
from federation.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS
from federation.kueue_config import ConfigError, label_selector
from federation.obs.config_file import (
    CONFIG_HELP,
    add_fair_sharing_arguments,
    add_pods_ready_arguments,
    add_resources_arguments,
    cycle_config,
    log_config_warnings,
    parse_with_config,
    pods_ready_policy,
)
from federation.obs.health import HealthEndpoints
from federation.obs.logging import configure_logging
from federation.obs.metrics import ROLE_FOLLOWER, ROLE_LEADER, ROLE_STANDALONE, Metrics
from federation.obs.serving import cancel_on_signal, start_listeners
from federation.version import package_version
from manager.config import ManagerConfig
from manager.dashboard_page import PAGE
from manager.decisions.dashboard_view import dashboard_state
from manager.decisions.dispatch import DispatchPolicy
from manager.decisions.dispatch_policy import DispatchChoice, large_share
from manager.decisions.retention import RetentionPolicy
from manager.decisions.visibility import QueueObjects
from manager.runtime import ManagerRuntime
from manager.visibility_certificate import CertificateKeeper
from manager.visibility_server import VisibilityServer

log = structlog.get_logger("kfed-manager")


def _label_selector(text: str) -> dict[str, Any]:
    try:
        return label_selector(json.loads(text), "--managed-jobs-namespace-selector")
    except (ValueError, ConfigError) as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _share(text: str) -> float:
    """A share of a worker's quota: a number above 0 and at most 1."""
    share = large_share(text)
    if share is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number above 0 and at most 1 (a share of a worker's quota)"
        )
    return share


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kfed-manager", description="kfed manager: global queues and dispatch")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument("--kubeconfig", help="kubeconfig of the manager cluster (default: in-cluster config)")
    parser.add_argument("--namespace", default="kfed-system", help="namespace of kubeconfig Secrets and the Lease")
    parser.add_argument("--origin", default=ManagerConfig.origin, help="value of the multikueue-origin label")
    parser.add_argument("--health-port", type=int, default=8081, help="/healthz /readyz /metrics (0: any free port)")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="separate /metrics listener (0: pick a free port; -1: serve metrics on the health port only)",
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the health and metrics ports listen on")
    parser.add_argument(
        "--visibility-port",
        type=int,
        default=-1,
        help="serve Kueue's visibility API (visibility.kueue.x-k8s.io/v1beta2) over HTTPS on this port, for the "
        "APIService the chart registers (0: any free port; -1: off, the default)",
    )
    parser.add_argument(
        "--visibility-cert-dir",
        help="directory holding the visibility API's serving certificate (tls.crt, tls.key: the chart mounts its "
        "Secret, whose CA is the APIService's caBundle); read again every minute. Unset: a self-signed certificate "
        "made at start, which only an APIService with insecureSkipTLSVerify accepts",
    )
    parser.add_argument(
        "--visibility-cert-secret",
        metavar="NAMESPACE/NAME",
        help="keep the visibility API's CA and serving certificate in this Secret: made when missing, renewed 30 days "
        "before it ends, its CA written into the APIService's caBundle (the chart's visibility.certificate.generatedBy"
        "=kfed-manager, for helm template, Argo CD and Flux); replaces --visibility-cert-dir",
    )
    parser.add_argument(
        "--visibility-service",
        default="kfed-manager-visibility",
        help="with --visibility-cert-secret: the Service the APIService sends to, in the Secret's namespace",
    )
    parser.add_argument(
        "--visibility-api-service",
        default="v1beta2.visibility.kueue.x-k8s.io",
        help="with --visibility-cert-secret: the APIService whose caBundle is kept",
    )
    parser.add_argument(
        "--dashboard-port",
        type=int,
        default=-1,
        help="serve the read-only federation dashboard on this port (0: any free port; -1: off, the default)",
    )
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--worker-lost-timeout", type=float, default=ManagerConfig.worker_lost_timeout)
    parser.add_argument("--gc-interval", type=float, default=ManagerConfig.gc_interval)
    parser.add_argument(
        "--dispatch-timeout",
        type=float,
        default=ManagerConfig.dispatch_timeout,
        help="seconds a worker has to admit a dispatched workload before it is withdrawn and dispatched again",
    )
    parser.add_argument(
        "--refusal-backoff",
        type=float,
        default=ManagerConfig.refusal_backoff,
        help="seconds a worker that refused a workload's copy (403 Forbidden) is avoided for that workload the first "
        "time; doubled with each further refusal, up to --refusal-backoff-max",
    )
    parser.add_argument(
        "--refusal-backoff-max",
        type=float,
        default=ManagerConfig.refusal_backoff_max,
        help="the longest a refusing worker is avoided for a workload in one go (seconds)",
    )
    parser.add_argument(
        "--reservation-hold",
        type=float,
        default=ManagerConfig.reservation_hold,
        help="seconds a quota reservation for a kfed-agent worker may wait to be written together with the worker's "
        "admission (one Workload status write instead of two; 0: never)",
    )
    parser.add_argument(
        "--dispatch-policy",
        choices=[p.value for p in DispatchPolicy],
        default=ManagerConfig.dispatch.policy.value,
        help="among workers that fit: BestFit packs, LeastAllocated spreads, Balanced spreads small workloads and "
        "packs large ones (a MultiKueueConfig's annotation kfed.io/dispatch-policy overrides it for its queues)",
    )
    parser.add_argument(
        "--dispatch-large-share",
        type=_share,
        default=ManagerConfig.dispatch.large_share,
        help="Balanced: a workload taking at least this share of a worker's quota is placed by best fit "
        "(a MultiKueueConfig's annotation kfed.io/dispatch-large-share overrides it for its queues)",
    )
    add_pods_ready_arguments(parser)
    add_fair_sharing_arguments(parser)
    add_resources_arguments(parser)
    unlabelled = parser.add_argument_group(
        "Jobs without a queue-name label",
        "Kueue's LocalQueue defaulting (a LocalQueue named default), manageJobsWithoutQueueName and "
        "managedJobsNamespaceSelector, applied by the Job admission policy",
    )
    unlabelled.add_argument(
        "--manage-jobs-without-queue-name",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep Jobs without a queue-name label suspended in selected namespaces that have no default LocalQueue",
    )
    unlabelled.add_argument(
        "--managed-jobs-namespace-selector",
        type=_label_selector,
        default=None,
        help="a LabelSelector as JSON: the namespaces where Jobs without a queue-name label are defaulted or kept "
        "suspended (default: all but kube-system and --namespace)",
    )
    retention = parser.add_argument_group(
        "objectRetentionPolicies.workloads", "Kueue's Workload retention (off by default)"
    )
    retention.add_argument(
        "--workload-retention-after-finished",
        type=float,
        default=None,
        help="delete a finished Workload this many seconds after it finished (its Job stays)",
    )
    retention.add_argument(
        "--workload-retention-after-deactivated-by-kueue",
        type=float,
        default=None,
        help="delete the Job of a Workload kfed deactivated this many seconds after the deactivation",
    )
    parser.add_argument(
        "--concurrent-reconciles",
        type=int,
        default=ManagerConfig.workers,
        help="reconciles at once per controller, and status writes at once per scheduling pass",
    )
    parser.add_argument("--qps", type=float, default=ManagerConfig.client_qps, help="client rate limit per cluster")
    parser.add_argument("--burst", type=int, default=ManagerConfig.client_burst)
    parser.add_argument(
        "--multikueue-kubeconfig-dir",
        default=ManagerConfig.kubeconfig_dir,
        help="the only directory MultiKueueCluster kubeconfigs with locationType: Path are read from",
    )
    return parse_with_config(parser, argv, component="manager")


async def run(args: argparse.Namespace) -> None:
    config = ManagerConfig(
        namespace=args.namespace,
        origin=args.origin,
        worker_lost_timeout=args.worker_lost_timeout,
        gc_interval=args.gc_interval,
        dispatch_timeout=args.dispatch_timeout,
        refusal_backoff=args.refusal_backoff,
        refusal_backoff_max=args.refusal_backoff_max,
        reservation_hold=args.reservation_hold,
        dispatch=DispatchChoice(DispatchPolicy(args.dispatch_policy), args.dispatch_large_share),
        workers=args.concurrent_reconciles,
        client_qps=args.qps,
        client_burst=args.burst,
        kubeconfig_dir=args.multikueue_kubeconfig_dir,
        cycle=cycle_config(args),
        resource_rules=args.resource_rules,
        manage_jobs_without_queue_name=args.manage_jobs_without_queue_name,
        managed_jobs_namespace_selector=args.managed_jobs_namespace_selector,
        retention=RetentionPolicy(
            after_finished=args.workload_retention_after_finished,
            after_deactivated_by_kueue=args.workload_retention_after_deactivated_by_kueue,
        ),
        wait_for_pods_ready=pods_ready_policy(args),
    )
    metrics = Metrics()
    health = HealthEndpoints(metrics=metrics.exposition)
    options = clients.ClientOptions(qps=config.client_qps, burst=config.client_burst, user_agent=config.user_agent)
    if args.kubeconfig:
        api = await clients.connect_kubeconfig_file(args.kubeconfig, cluster="manager", options=options)
    else:
        api = await clients.connect_in_cluster(cluster="manager", options=options)
    # Files only this process needs (the visibility API's certificate and key) live in one directory that goes
    # with it, on a normal stop as on SIGTERM; a serving key is not left behind in /tmp.
    with tempfile.TemporaryDirectory(prefix="kfed-manager-") as scratch:
        async with api, anyio.create_task_group() as tg:
            tg.start_soon(partial(cancel_on_signal, tg.cancel_scope, component="kfed-manager"))
            port, metrics_port = await start_listeners(
                tg,
                health,
                metrics=metrics,
                bind_address=args.bind_address,
                health_port=args.health_port,
                metrics_port=args.metrics_port,
            )
            log.info(
                "kfed-manager starting",
                health_port=port,
                metrics_port=metrics_port,
                namespace=config.namespace,
                identity=config.identity,
            )
            terms = LeadershipTerms(lambda: ManagerRuntime(api, config, metrics), metrics=metrics)
            if args.dashboard_port >= 0:
                dashboard = HealthEndpoints()
                dashboard.add_route("/", lambda: ("text/html; charset=utf-8", PAGE.encode()))
                dashboard.add_route(
                    "/api/state", lambda: ("application/json", json.dumps(terms.dashboard_state()).encode())
                )
                dashboard_port = int(
                    await tg.start(partial(dashboard.serve, host=args.bind_address, port=args.dashboard_port))
                )
                log.info("dashboard serving", dashboard_port=dashboard_port)
            if args.visibility_port >= 0:
                await _serve_visibility(
                    tg,
                    args,
                    api=api,
                    terms=terms,
                    health=health,
                    field_manager=config.field_manager,
                    identity=config.identity,
                    scratch=Path(scratch),
                )
            health.add_readiness_check("caches", terms.ready)
            health.add_readiness_check("remotes-connected", terms.remotes_connected)
            if not args.leader_elect:
                metrics.role = ROLE_STANDALONE
                await terms.lead()
                return
            metrics.role = ROLE_FOLLOWER
            elector = LeaderElector(
                api,
                LeaderElectionConfig(name="kfed-manager", namespace=config.namespace, identity=config.identity),
                on_started_leading=terms.lead,
            )
            health.add_readiness_check("leader-election", lambda: (True, elector.leader or "no leader yet"))
            await elector.run()


class Term(Protocol):
    """What one leadership term runs (a :class:`ManagerRuntime`)."""

    def synced(self) -> tuple[bool, str]: ...

    def remotes_connected(self) -> tuple[bool, str]: ...

    def dashboard_state(self) -> dict[str, Any]: ...

    def queue_objects(self) -> QueueObjects: ...

    async def run(self) -> None: ...


async def _serve_visibility(
    tg: anyio.abc.TaskGroup,
    args: argparse.Namespace,
    *,
    api: KubeApi,
    terms: LeadershipTerms,
    health: HealthEndpoints,
    field_manager: str,
    identity: str,
    scratch: Path,
) -> None:
    """Start the visibility API server, and with ``--visibility-cert-secret`` the keeper of its certificate (its
    first round before the server starts, so the server starts with the Secret's pair when it can be had), which
    writes the pair under ``scratch``."""
    cert_dir = Path(args.visibility_cert_dir) if args.visibility_cert_dir else None
    keeper: CertificateKeeper | None = None
    visibility: VisibilityServer | None = None

    async def renewed() -> None:
        if visibility is not None:
            await visibility.reload()

    if args.visibility_cert_secret:
        namespace, _, name = str(args.visibility_cert_secret).rpartition("/")
        cert_dir = scratch / "visibility-certificate"
        cert_dir.mkdir(mode=0o700)
        events = EventRecorder(api, controller="kfed.io/kfed-manager", instance=identity)
        tg.start_soon(events.run)
        keeper = CertificateKeeper(
            api=api,
            secret=(namespace or args.namespace, name),
            service=args.visibility_service,
            api_service=args.visibility_api_service,
            cert_dir=cert_dir,
            field_manager=field_manager,
            on_renewed=renewed,
            events=events,
        )
        await keeper.sync_once()
    visibility = VisibilityServer(api=api, objects=partial(terms.queue_objects, api), cert_dir=cert_dir)
    await tg.start(partial(visibility.serve, host=args.bind_address, port=args.visibility_port))
    health.add_readiness_check("visibility-api", visibility.readiness)
    if keeper is not None:
        tg.start_soon(keeper.run)
        health.add_readiness_check("visibility-certificate", keeper.readiness)


class LeadershipTerms:
    """Runs one fresh :class:`ManagerRuntime` per leadership term.

    A term's caches, queues, event recorder and worker connections all end with the term; reusing them for the
    next one ran on closed streams (the manager crashed on re-election). Readiness: a standby (no term running)
    is ready — it serves probes and waits for the Lease, and a rolling update must not stall on it; the leader is
    ready once its term's caches have synced.
    """

    def __init__(self, build: Callable[[], Term], *, metrics: Metrics | None = None) -> None:
        self._build = build
        self._metrics = metrics
        self.current: Term | None = None
        self.started = 0

    def ready(self) -> tuple[bool, str]:
        if self.current is None:
            return True, "standby"
        return self.current.synced()

    def remotes_connected(self) -> tuple[bool, str]:
        if self.current is None:
            return True, "standby"
        return self.current.remotes_connected()

    def dashboard_state(self) -> dict[str, Any]:
        if self.current is None:  # a standby has no caches: the page says so
            return dashboard_state(
                workers=[], cluster_queues=[], workloads=[], now=dt.datetime.now(dt.UTC), leader=False
            )
        return self.current.dashboard_state()

    async def queue_objects(self, api: KubeApi) -> QueueObjects:
        """The leader's cached Workloads and queues once synced; a standby (or a term still syncing) lists them."""
        if self.current is not None and self.current.synced()[0]:
            return self.current.queue_objects()
        workloads, local_queues, cluster_queues = (
            (await api.list(WORKLOADS)).items,
            (await api.list(LOCAL_QUEUES)).items,
            (await api.list(CLUSTER_QUEUES)).items,
        )
        return QueueObjects(workloads, local_queues, cluster_queues)

    async def lead(self) -> None:
        runtime = self._build()
        self.current = runtime
        self.started += 1
        if self._metrics is not None and self._metrics.role != ROLE_STANDALONE:
            self._metrics.role = ROLE_LEADER
        log.info("leadership term started", term=self.started)
        try:
            await runtime.run()
        finally:
            self.current = None
            if self._metrics is not None and self._metrics.role == ROLE_LEADER:
                self._metrics.role = ROLE_FOLLOWER
            log.info("leadership term ended", term=self.started)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(level=args.log_level, fmt=args.log_format, component="kfed-manager")
    log_config_warnings(args)
    run_process(run, args)
    return 0
