"""`kubectl kfed`: what the manager cluster knows about the federation, in the shape a kubectl user expects.

    kubectl kfed workloads [-n NAMESPACE | -A]   each Workload with its queue, state and the worker it runs on
    kubectl kfed workers                         each worker cluster: connected or not, and why
    kubectl kfed add-worker NAME --worker-context CTX   join a worker (token, kubeconfig Secret, MultiKueueCluster,
                                                        MultiKueueConfig entry); see manager/join.py
    kubectl kfed remove-worker NAME              undo add-worker on the manager cluster

Talks to the manager cluster with ``--kubeconfig`` (or ``$KUBECONFIG``, or ``~/.kube/config``) and ``--context``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from federation.conditions import find_condition, parse_time
from federation.kube.api import KubeApi
from federation.kube.clients import connect_kubeconfig_file
from federation.kube.errors import KubeError
from federation.kube.kubeconfig import KubeconfigError, load_kubeconfig_text
from federation.kube.resources import MULTIKUEUE_CLUSTERS, WORKLOADS
from manager import join
from manager.decisions.lifecycle import phase_of

Obj = Mapping[str, Any]


def workload_state(workload: Obj) -> str:
    """The workload's lifecycle phase (``manager.decisions.lifecycle``), as shown in the STATE column."""
    return phase_of(workload).value


def _age(created: str | None, now: dt.datetime) -> str:
    if not created:
        return "-"
    seconds = int((now - parse_time(created)).total_seconds())
    # Like kubectl: a unit is used until the next one would read at least 2.
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    rows = [header, *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def render_workloads(workloads: Iterable[Obj], *, now: dt.datetime, all_namespaces: bool) -> str:
    header = ["NAMESPACE"] if all_namespaces else []
    header += ["NAME", "QUEUE", "STATE", "WORKER", "MESSAGE", "AGE"]
    rows = []
    for wl in sorted(workloads, key=lambda w: (w["metadata"].get("namespace", ""), w["metadata"]["name"])):
        status = wl.get("status") or {}
        worker = status.get("clusterName") or ",".join(status.get("nominatedClusterNames") or []) or "-"
        state = workload_state(wl)
        message = ""
        if state == "Pending":
            pending = find_condition(wl, "QuotaReserved")
            message = str(pending.get("message", "")) if pending else ""
        elif state in {"Reserved", "Dispatched"}:  # what it waits for: e.g. a ProvisioningRequest on the worker
            waiting = [c for c in status.get("admissionChecks") or () if c.get("state") != "Ready"]
            message = str(waiting[0].get("message") or "") if waiting else ""
        row = [wl["metadata"].get("namespace", "")] if all_namespaces else []
        row += [
            wl["metadata"]["name"],
            str((wl.get("spec") or {}).get("queueName", "")),
            state,
            worker,
            message[:80],
            _age(wl["metadata"].get("creationTimestamp"), now),
        ]
        rows.append(row)
    return _table(header, rows)


def render_workers(clusters: Iterable[Obj], *, now: dt.datetime) -> str:
    rows = []
    for cluster in sorted(clusters, key=lambda c: c["metadata"]["name"]):
        active = find_condition(cluster, "Active")
        rows.append(
            [
                cluster["metadata"]["name"],
                str(active.get("status", "Unknown")) if active else "Unknown",
                str(active.get("reason", "")) if active else "",
                str(active.get("message", "")) if active else "not reconciled yet (is kfed-manager running?)",
                _age(cluster["metadata"].get("creationTimestamp"), now),
            ]
        )
    return _table(["WORKER", "CONNECTED", "REASON", "MESSAGE", "AGE"], rows)


def _kubeconfig(explicit: str | None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("KUBECONFIG", "")
    return env.split(os.pathsep)[0] if env else str(Path.home() / ".kube" / "config")


def _say(line: str) -> None:
    print(line, flush=True)


async def _join(args: argparse.Namespace, manager: KubeApi) -> str:
    if args.command == "remove-worker":
        await join.remove_worker(manager, args.name, namespace=args.namespace, say=_say)
        return f"worker {args.name} removed from the manager"
    path = args.worker_kubeconfig or _kubeconfig(args.kubeconfig)
    text = await anyio.Path(path).read_text()
    base = Path(path).parent
    endpoint = join.context_endpoint(
        load_kubeconfig_text(text), args.worker_context, read_file=lambda f: (base / f).read_bytes()
    )
    if args.worker_server:
        endpoint = join.Endpoint(args.worker_server, endpoint.ca_data)
    spec = join.AddWorker(
        name=args.name,
        endpoint=endpoint,
        namespace=args.namespace,
        worker_namespace=args.worker_namespace,
        service_account=args.service_account,
        token_seconds=join.parse_duration(args.token_duration),
        multikueue_config=args.multikueue_config,
    )
    async with await connect_kubeconfig_file(path, cluster=args.name, context=args.worker_context) as worker:
        await join.add_worker(manager, worker, spec, say=_say)
    if args.wait > 0 and not await join.wait_connected(manager, args.name, seconds=args.wait, say=_say):
        raise join.JoinError(f"worker {args.name} joined but not connected")
    return f"worker {args.name} joined"


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of ``context`` (default: the current one) in the kubeconfig, else ``default`` (kubectl's rule)."""
    try:
        config = load_kubeconfig_text(Path(_kubeconfig(kubeconfig)).read_text())
    except (OSError, KubeconfigError):
        return "default"
    return namespace_of_context(config, context)


def namespace_of_context(config: Mapping[str, Any], context: str | None) -> str:
    name = context or config.get("current-context")
    for entry in config.get("contexts") or ():
        if entry.get("name") == name:
            return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


async def _run(args: argparse.Namespace) -> str:
    api = await connect_kubeconfig_file(_kubeconfig(args.kubeconfig), cluster="manager", context=args.context)
    async with api:
        if args.command in ("add-worker", "remove-worker"):
            return await _join(args, api)
        now = dt.datetime.now(dt.UTC)
        if args.command == "workers":
            return render_workers((await api.list(MULTIKUEUE_CLUSTERS)).items, now=now)
        namespace = (
            None if args.all_namespaces else (args.namespace or context_namespace(args.kubeconfig, args.context))
        )
        items = (await api.list(WORKLOADS, namespace=namespace)).items
        return render_workloads(items, now=now, all_namespaces=args.all_namespaces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubectl kfed", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context", help="the manager cluster's context in the kubeconfig (default: current)")
    sub = parser.add_subparsers(dest="command", required=True)
    workloads = sub.add_parser("workloads", help="Workloads with the worker each runs on")
    workloads.add_argument("-n", "--namespace", help="default: the context's namespace, as kubectl does")
    workloads.add_argument("-A", "--all-namespaces", action="store_true")
    sub.add_parser("workers", help="worker clusters and whether they are connected")
    add = sub.add_parser(
        "add-worker",
        help="join a worker: mint a token for its kfed-manager-access ServiceAccount, store a kubeconfig for it "
        "in a Secret and create the MultiKueueCluster and MultiKueueConfig entry",
    )
    add.add_argument("name", help="the worker's MultiKueueCluster name")
    add.add_argument("--worker-context", help="the worker's context (default: the worker kubeconfig's current one)")
    add.add_argument("--worker-kubeconfig", help="kubeconfig holding --worker-context (default: --kubeconfig)")
    add.add_argument(
        "--worker-server", help="the worker's apiserver URL as the manager reaches it (default: the context's)"
    )
    add.add_argument("--worker-namespace", default="kfed-system", help="the kfed-agent release namespace")
    add.add_argument("--service-account", default=join.DEFAULT_ACCESS_ACCOUNT)
    add.add_argument("--token-duration", default="8760h", help="lifetime of the token (run again to renew it)")
    add.add_argument("--multikueue-config", help="default: the only MultiKueueConfig, or a new one named kfed")
    add.add_argument("--wait", type=float, default=60, help="seconds to wait for Active=True (0: do not wait)")
    add.add_argument("-n", "--namespace", default="kfed-system", help="kfed-manager's namespace (Secrets)")
    remove = sub.add_parser("remove-worker", help="undo add-worker on the manager cluster")
    remove.add_argument("name")
    remove.add_argument("-n", "--namespace", default="kfed-system", help="kfed-manager's namespace (Secrets)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        print(anyio.run(_run, args))
    except (KubeError, KubeconfigError, OSError, ValueError, join.JoinError) as err:
        print(f"kubectl kfed: {err}", file=sys.stderr)
        return 1
    return 0
