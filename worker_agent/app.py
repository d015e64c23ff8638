"""``kfed-agent``: the process that runs on each worker cluster (console script entry point ``main``).

Parses flags, sets up logging, connects to the worker's own apiserver (a kubeconfig file, or the pod's service
account), serves /healthz /readyz /metrics, and runs the agent's controllers — behind a Lease when leader election
is on, so standby replicas only wait. SIGTERM or SIGINT cancels everything, releases the Lease, closes the client
and exits 0.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import uuid
from collections.abc import Sequence
from functools import partial

import anyio
import anyio.abc
import structlog

from federation.eventloop import run_process
from federation.gc_freeze import thaw_after_term
from federation.kube.api import KubeApi
from federation.kube.clients import connect_in_cluster, connect_kubeconfig_file
from federation.kube.kubeconfig import KubeconfigError
from federation.kube.leader import LeaderElectionConfig, LeaderElector
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
from federation.obs.metrics import ROLE_FOLLOWER, ROLE_LEADER, Metrics
from federation.obs.serving import cancel_on_signal, start_listeners
from federation.version import package_version
from worker_agent.agent import Agent
from worker_agent.decisions.job_copies import DEFAULT_JOB_COPY_TIMEOUT_SECONDS

log = structlog.get_logger("worker_agent")

LEASE_NAME = "kfed-agent"


def _positive_seconds(text: str) -> float:
    seconds = float(text)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kfed-agent",
        description="kfed worker agent: admits dispatched Workloads locally, runs their Jobs, reports capacity.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument(
        "--kubeconfig", help="kubeconfig of this worker cluster (default: $KUBECONFIG, else in-cluster)"
    )
    parser.add_argument("--cluster-name", required=True, help="this worker's name, as the manager knows it")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--log-format", default="json", choices=["json", "console"])
    parser.add_argument("--health-port", type=int, default=8081, help="/healthz /readyz /metrics (0: pick a free port)")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="separate /metrics listener (0: pick a free port; -1: serve metrics on the health port only)",
    )
    parser.add_argument("--bind-address", default="0.0.0.0", help="address the health and metrics ports listen on")
    parser.add_argument(
        "--leader-elect", action=argparse.BooleanOptionalAction, default=True, help="run only while holding the Lease"
    )
    parser.add_argument("--namespace", default="kfed-system", help="namespace of the leader-election Lease")
    parser.add_argument(
        "--cluster-queue-status",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep local ClusterQueue status (counts, flavor usage, Active) current, like Kueue",
    )
    parser.add_argument(
        "--node-failure-delay",
        type=float,
        default=30.0,
        help="seconds a node must stay NotReady before TAS workloads' pods on it are replaced (Kueue: 30)",
    )
    parser.add_argument(
        "--job-copy-timeout",
        type=_positive_seconds,
        default=DEFAULT_JOB_COPY_TIMEOUT_SECONDS,
        help="seconds an admitted kfed-manager Workload copy may wait for its Job copy before it is "
        "deactivated and evicted (reason JobCopyMissing) and its quota released",
    )
    add_resources_arguments(parser)
    add_pods_ready_arguments(parser)
    add_fair_sharing_arguments(parser)
    parser.add_argument("--qps", type=float, default=300.0, help="client-side rate limit to the apiserver")
    parser.add_argument("--burst", type=int, default=500)
    return parse_with_config(parser, sys.argv[1:] if argv is None else argv, component="agent")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(level=args.log_level, fmt=args.log_format, component="kfed-agent")
    log_config_warnings(args)
    try:
        return run_process(run, args)
    except KeyboardInterrupt:  # pragma: no cover - SIGINT before the handler is installed
        return 0


async def connect(args: argparse.Namespace) -> KubeApi:
    from federation.kube.clients import ClientOptions

    options = ClientOptions(qps=args.qps, burst=args.burst, user_agent="kfed-agent/0.1.0")
    path = args.kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        return await connect_kubeconfig_file(path, cluster=args.cluster_name, options=options)
    return await connect_in_cluster(cluster=args.cluster_name, options=options)


async def run(args: argparse.Namespace) -> int:
    bound = log.bind(cluster=args.cluster_name)
    try:
        api = await connect(args)
    except (KubeconfigError, OSError, ValueError) as exc:
        bound.error("agent.connect_failed", error=str(exc)[:500])
        return 1
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    metrics = Metrics()
    agent = Agent(
        api,
        cluster=args.cluster_name,
        identity=identity,
        metrics=metrics,
        update_queue_status=args.cluster_queue_status,
        node_failure_delay=args.node_failure_delay,
        resource_rules=args.resource_rules,
        job_copy_timeout=args.job_copy_timeout,
        wait_for_pods_ready=pods_ready_policy(args),
        cycle=cycle_config(args),
    )
    health = HealthEndpoints(metrics=metrics.exposition)
    health.add_readiness_check("caches", agent.ready)
    async with api, anyio.create_task_group() as tg:
        tg.start_soon(partial(cancel_on_signal, tg.cancel_scope, component="kfed-agent"))
        health_port, metrics_port = await start_listeners(
            tg,
            health,
            metrics=metrics,
            bind_address=args.bind_address,
            health_port=args.health_port,
            metrics_port=args.metrics_port,
        )
        bound.info(
            "agent.listening",
            health_port=health_port,
            metrics_port=metrics_port,
            identity=identity,
            leader_elect=args.leader_elect,
        )
        if args.leader_elect:
            config = LeaderElectionConfig(name=LEASE_NAME, namespace=args.namespace, identity=identity)
            metrics.role = ROLE_FOLLOWER

            async def lead() -> None:
                metrics.role = ROLE_LEADER
                try:
                    await agent.run()
                finally:
                    thaw_after_term("kfed-agent")  # the term's caches were frozen at their first sync
                    metrics.role = ROLE_FOLLOWER

            elector = LeaderElector(api, config, on_started_leading=lead)
            health.add_readiness_check("leader", lambda: (True, "leader" if elector.is_leader else "standby"))
            tg.start_soon(elector.run)
        else:
            tg.start_soon(agent.run)
    bound.info("agent.exited")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
