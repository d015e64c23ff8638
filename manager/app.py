"""`kfed-manager`: command line, logging, health endpoint, leader election, then the runtime."""

from __future__ import annotations

import argparse
import sys
from functools import partial

import anyio
import anyio.abc
import structlog

from federation.kube import clients
from federation.kube.leader import LeaderElectionConfig, LeaderElector
from federation.obs.health import HealthEndpoints
from federation.obs.logging import configure_logging
from federation.obs.metrics import Metrics
from federation.obs.serving import cancel_on_signal, start_listeners
from manager.config import ManagerConfig
from manager.runtime import ManagerRuntime

log = structlog.get_logger("kfed-manager")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kfed-manager", description="kfed manager: global queues and dispatch")
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
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", choices=("json", "console"), default="json")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--worker-lost-timeout", type=float, default=ManagerConfig.worker_lost_timeout)
    parser.add_argument("--gc-interval", type=float, default=ManagerConfig.gc_interval)
    parser.add_argument("--qps", type=float, default=ManagerConfig.client_qps, help="client rate limit per cluster")
    parser.add_argument("--burst", type=int, default=ManagerConfig.client_burst)
    parser.add_argument(
        "--multikueue-kubeconfig-dir",
        default=ManagerConfig.kubeconfig_dir,
        help="the only directory MultiKueueCluster kubeconfigs with locationType: Path are read from",
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    config = ManagerConfig(
        namespace=args.namespace,
        origin=args.origin,
        worker_lost_timeout=args.worker_lost_timeout,
        gc_interval=args.gc_interval,
        client_qps=args.qps,
        client_burst=args.burst,
        kubeconfig_dir=args.multikueue_kubeconfig_dir,
    )
    metrics = Metrics()
    health = HealthEndpoints(metrics=metrics.exposition)
    options = clients.ClientOptions(qps=config.client_qps, burst=config.client_burst, user_agent=config.user_agent)
    if args.kubeconfig:
        api = await clients.connect_kubeconfig_file(args.kubeconfig, cluster="manager", options=options)
    else:
        api = await clients.connect_in_cluster(cluster="manager", options=options)
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
        runtime = ManagerRuntime(api, config, metrics)
        health.add_readiness_check("caches", runtime.synced)
        if not args.leader_elect:
            await runtime.run()
            return
        elector = LeaderElector(
            api,
            LeaderElectionConfig(name="kfed-manager", namespace=config.namespace, identity=config.identity),
            on_started_leading=runtime.run,
        )
        health.add_readiness_check("leader-election", lambda: (True, elector.leader))
        await elector.run()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(level=args.log_level, fmt=args.log_format, component="kfed-manager")
    anyio.run(run, args)
    return 0
