"""`kubectl kfed`: what the manager cluster knows about the federation, in the shape a kubectl user expects.

    kubectl kfed workloads [-n NAMESPACE | -A]   each Workload with its queue, state and the worker it runs on
    kubectl kfed workers                         each worker cluster: connected or not, and why

Reads with the current kubeconfig context (``--kubeconfig`` or ``$KUBECONFIG`` or ``~/.kube/config``).
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
from federation.kube.clients import connect_kubeconfig_file
from federation.kube.errors import KubeError
from federation.kube.kubeconfig import KubeconfigError
from federation.kube.resources import MULTIKUEUE_CLUSTERS, WORKLOADS
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


async def _run(args: argparse.Namespace) -> str:
    api = await connect_kubeconfig_file(_kubeconfig(args.kubeconfig), cluster="manager")
    async with api:
        now = dt.datetime.now(dt.UTC)
        if args.command == "workers":
            return render_workers((await api.list(MULTIKUEUE_CLUSTERS)).items, now=now)
        namespace = None if args.all_namespaces else args.namespace
        items = (await api.list(WORKLOADS, namespace=namespace)).items
        return render_workloads(items, now=now, all_namespaces=args.all_namespaces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubectl kfed", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig")
    sub = parser.add_subparsers(dest="command", required=True)
    workloads = sub.add_parser("workloads", help="Workloads with the worker each runs on")
    workloads.add_argument("-n", "--namespace", default="default")
    workloads.add_argument("-A", "--all-namespaces", action="store_true")
    sub.add_parser("workers", help="worker clusters and whether they are connected")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        print(anyio.run(_run, args))
    except (KubeError, KubeconfigError, OSError) as err:
        print(f"kubectl kfed: {err}", file=sys.stderr)
        return 1
    return 0
