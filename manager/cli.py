"""`kubectl kfed`: the federation as a kubectl user expects to see and steer it (kueuectl's commands, and more).

    kubectl kfed list workloads|clusterqueues|localqueues|resourceflavors   (workloads: also `kubectl kfed workloads`)
        workloads: --clusterqueue/-c, --localqueue/-q, --status, --worker; all: -n/-A, -l, --field-selector, -o
    kubectl kfed pending [-c CQ] [-q LQ]        pending workloads with Kueue's positions, and what each waits for
    kubectl kfed stop|resume workload|clusterqueue|localqueue NAME [--keep-already-running]
    kubectl kfed create clusterqueue|cq NAME [--cohort ...] [--nominal-quota FLAVOR:RES=Q;RES=Q,...] [...]
    kubectl kfed create localqueue|lq NAME -c CQ      kubectl kfed create resourceflavor|rf NAME [...]
    kubectl kfed describe job NAME              a Job across the federation: Workload, worker, copy, pods, events
    kubectl kfed pods --for job/NAME            the Job's pods, read from the worker that runs it
    kubectl kfed workers                        each worker cluster: connected or not, and why
    kubectl kfed add-worker NAME --worker-context CTX   join a worker (token, kubeconfig Secret, MultiKueueCluster,
                                                        MultiKueueConfig entry); see manager/join.py
    kubectl kfed remove-worker NAME [--wait S]  undo add-worker on the manager cluster once the Jobs still
                                                running there finished ([--force]: at once)

Talks to the manager cluster with ``--kubeconfig`` (or ``$KUBECONFIG``, or ``~/.kube/config``) and ``--context``;
the namespace is ``-n``, else the context's, as kubectl does. A worker is read (``describe``, ``pods``) through
``--worker-kubeconfig``, else the kubeconfig context named like the worker, else the kubeconfig Secret the manager
uses for it (which may not be allowed to read pods and events: the command says so).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import yaml

from federation.kube.api import KubeApi
from federation.kube.clients import connect_kubeconfig_file, connect_kubeconfig_text
from federation.kube.errors import KubeError
from federation.kube.kubeconfig import KubeconfigError, load_kubeconfig_text
from federation.kube.resources import (
    CLUSTER_QUEUES,
    CORE_EVENTS,
    JOBS,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    PODS,
    RESOURCE_FLAVORS,
    SECRETS,
    WORKLOADS,
    Resource,
)
from manager import join
from manager.cli_views import (
    STATUSES,
    EventView,
    WorkloadFilter,
    cluster_queue_object,
    describe_job,
    key_values,
    local_queue_object,
    render_cluster_queues,
    render_local_queues,
    render_pending,
    render_pods,
    render_workers,
    render_workloads,
    resource_flavor_object,
    table,
    worker_of,
)
from manager.decisions.visibility import local_queue_targets, pending_positions

__all__ = ["main", "namespace_of_context", "render_workers", "render_workloads"]

Obj = Mapping[str, Any]
FIELD_MANAGER = "kubectl-kfed"
KINDS: Mapping[str, Resource] = {
    "workload": WORKLOADS,
    "workloads": WORKLOADS,
    "wl": WORKLOADS,
    "kwl": WORKLOADS,
    "clusterqueue": CLUSTER_QUEUES,
    "clusterqueues": CLUSTER_QUEUES,
    "cq": CLUSTER_QUEUES,
    "localqueue": LOCAL_QUEUES,
    "localqueues": LOCAL_QUEUES,
    "lq": LOCAL_QUEUES,
    "resourceflavor": RESOURCE_FLAVORS,
    "resourceflavors": RESOURCE_FLAVORS,
    "rf": RESOURCE_FLAVORS,
}


def _kubeconfig(explicit: str | None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("KUBECONFIG", "")
    return env.split(os.pathsep)[0] if env else str(Path.home() / ".kube" / "config")


def _say(line: str) -> None:
    print(line, flush=True)


async def _join(args: argparse.Namespace, manager: KubeApi) -> str:
    if args.command == "remove-worker":
        await join.remove_worker(
            manager, args.name, namespace=args.namespace, say=_say, wait=args.remove_wait, force=args.force
        )
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


def _namespace(args: argparse.Namespace) -> str | None:
    """None for -A, else -n, else the context's namespace (kubectl's rule)."""
    if getattr(args, "all_namespaces", False):
        return None
    return str(getattr(args, "namespace", None) or context_namespace(args.kubeconfig, args.context))


def _dump(items: Sequence[Obj], output: str, *, single: bool = False) -> str:
    body: Any = (
        dict(items[0]) if single and len(items) == 1 else {"apiVersion": "v1", "kind": "List", "items": list(items)}
    )
    if output == "json":
        return json.dumps(body, indent=2, sort_keys=False)
    return yaml.safe_dump(json.loads(json.dumps(body)), sort_keys=False).rstrip()


async def _local_queue_map(api: KubeApi) -> dict[str, str]:
    return local_queue_targets((await api.list(LOCAL_QUEUES)).items)


async def _list(args: argparse.Namespace, api: KubeApi, now: dt.datetime) -> str:
    resource = KINDS[args.kind]
    output = args.output or ""
    namespace = _namespace(args) if resource.namespaced else None
    items = (
        await api.list(resource, namespace=namespace, label_selector=args.selector, field_selector=args.field_selector)
    ).items
    if resource is WORKLOADS:
        local_queues = await _local_queue_map(api)
        wanted = WorkloadFilter(
            cluster_queue=args.clusterqueue,
            local_queue=args.localqueue,
            statuses=tuple(args.status),
            worker=args.worker,
        )
        items = [wl for wl in items if wanted.matches(wl, local_queues)]
        if output in ("json", "yaml"):
            return _dump(items, output)
        positions: dict[str, tuple[int, int]] = {}
        if output == "wide":
            everything = (await api.list(WORKLOADS)).items  # a position counts every namespace's workloads
            positions = {
                p.key: (p.in_cluster_queue, p.in_local_queue) for p in pending_positions(everything, local_queues)
            }
        return render_workloads(
            items,
            now=now,
            all_namespaces=namespace is None,
            wide=output == "wide",
            local_queues=local_queues,
            positions=positions,
        )
    if output in ("json", "yaml"):
        return _dump(items, output)
    if resource is CLUSTER_QUEUES:
        return render_cluster_queues(items, now=now, wide=output == "wide")
    if resource is LOCAL_QUEUES:
        return render_local_queues(items, now=now, all_namespaces=namespace is None)
    rows = [
        [
            f["metadata"]["name"],
            ",".join(f"{k}={v}" for k, v in sorted(((f.get("spec") or {}).get("nodeLabels") or {}).items())) or "-",
            str((f.get("spec") or {}).get("topologyName") or "-"),
        ]
        for f in sorted(items, key=lambda o: o["metadata"]["name"])
    ]
    return table(["NAME", "NODE LABELS", "TOPOLOGY"], rows, squeeze="NODE LABELS")


async def _pending(args: argparse.Namespace, api: KubeApi, now: dt.datetime) -> str:
    local_queues = await _local_queue_map(api)
    positions = pending_positions((await api.list(WORKLOADS)).items, local_queues)
    namespace = _namespace(args)
    shown = [
        p
        for p in positions
        if (args.clusterqueue is None or p.cluster_queue == args.clusterqueue)
        and (args.localqueue is None or (p.workload.get("spec") or {}).get("queueName") == args.localqueue)
        and (namespace is None or args.clusterqueue is not None or p.workload["metadata"].get("namespace") == namespace)
    ]
    if args.output in ("json", "yaml"):
        records = [
            {
                "namespace": p.workload["metadata"].get("namespace", ""),
                "name": p.workload["metadata"]["name"],
                "clusterQueue": p.cluster_queue,
                "localQueueName": (p.workload.get("spec") or {}).get("queueName", ""),
                "positionInClusterQueue": p.in_cluster_queue,
                "positionInLocalQueue": p.in_local_queue,
                "priority": (p.workload.get("spec") or {}).get("priority") or 0,
            }
            for p in shown
        ]
        return json.dumps(records, indent=2) if args.output == "json" else yaml.safe_dump(records, sort_keys=False)
    return render_pending(shown, now=now, wide=args.output == "wide")


async def _stop_resume(args: argparse.Namespace, api: KubeApi) -> str:
    resource = KINDS[args.kind]
    stop = args.command == "stop"
    namespace = _namespace(args) if resource.namespaced else None
    if resource is WORKLOADS:
        patch: dict[str, Any] = {"spec": {"active": not stop}}
    elif resource in (CLUSTER_QUEUES, LOCAL_QUEUES):
        policy = ("Hold" if args.keep_already_running else "HoldAndDrain") if stop else "None"  # Kueue's value
        patch = {"spec": {"stopPolicy": policy}}
    else:
        raise ValueError(f"{args.kind} cannot be stopped or resumed")
    await api.patch(resource, args.name, patch, namespace=namespace, field_manager=FIELD_MANAGER)
    kind = resource.kind.lower()
    return f"{kind}.kueue.x-k8s.io/{args.name} {'stopped' if stop else 'resumed'}"


async def _create(args: argparse.Namespace, api: KubeApi) -> str:
    kind = KINDS[args.kind]
    if kind is CLUSTER_QUEUES:
        obj = cluster_queue_object(
            args.name,
            cohort=args.cohort,
            queuing_strategy=args.queuing_strategy,
            namespace_selector=key_values(args.namespace_selector),
            reclaim_within_cohort=args.reclaim_within_cohort,
            preemption_within_cluster_queue=args.preemption_within_cluster_queue,
            nominal_quota=args.nominal_quota or "",
            borrowing_limit=args.borrowing_limit or "",
            lending_limit=args.lending_limit or "",
            admission_checks=args.admission_check,
        )
    elif kind is LOCAL_QUEUES:
        if not args.clusterqueue:
            raise ValueError("a LocalQueue needs --clusterqueue/-c")
        if not args.ignore_unknown_cq:  # as kueuectl: a typo would leave its Jobs waiting on a queue that never is
            await api.get(CLUSTER_QUEUES, args.clusterqueue)
        obj = local_queue_object(args.name, namespace=_namespace(args) or "default", cluster_queue=args.clusterqueue)
    elif kind is RESOURCE_FLAVORS:
        obj = resource_flavor_object(args.name, node_labels=key_values(args.node_labels), node_taints=args.node_taint)
    else:
        raise ValueError(f"cannot create {args.kind}")
    dry = args.dry_run in ("client", "server")
    if args.dry_run != "client":
        obj = await api.create(kind, obj, field_manager=FIELD_MANAGER, dry_run=args.dry_run == "server")
    if args.output in ("json", "yaml"):
        return _dump([obj], args.output, single=True)
    suffix = " (dry run)" if dry else ""
    return f"{kind.kind.lower()}.kueue.x-k8s.io/{args.name} created{suffix}"


def _contexts(kubeconfig: str | None) -> dict[str, Any]:
    try:
        return load_kubeconfig_text(Path(_kubeconfig(kubeconfig)).read_text())
    except (OSError, KubeconfigError):
        return {}


async def _worker_api(args: argparse.Namespace, manager: KubeApi, worker: str) -> tuple[KubeApi, str]:
    """A client for ``worker`` and how it was found (see the module docstring for the order)."""
    if args.worker_kubeconfig:
        names = {c.get("name") for c in _contexts(args.worker_kubeconfig).get("contexts") or ()}
        context = worker if worker in names else None
        api = await connect_kubeconfig_file(args.worker_kubeconfig, cluster=worker, context=context)
        return api, f"--worker-kubeconfig {args.worker_kubeconfig}"
    names = {c.get("name") for c in _contexts(args.kubeconfig).get("contexts") or ()}
    if worker in names:
        return await connect_kubeconfig_file(_kubeconfig(args.kubeconfig), cluster=worker, context=worker), (
            f"context {worker}"
        )
    cluster = await manager.get_or_none(MULTIKUEUE_CLUSTERS, worker)
    source = (((cluster or {}).get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
    if source.get("locationType", "Secret") != "Secret":
        raise ValueError(f"no way to reach worker {worker}: pass --worker-kubeconfig, or add a context named {worker}")
    secret = await manager.get(
        SECRETS, str(source.get("location") or join.secret_name(worker)), namespace=args.kfed_namespace
    )
    text = base64.b64decode((secret.get("data") or {}).get(join.SECRET_KEY, "")).decode()
    return await connect_kubeconfig_text(text, cluster=worker), "the manager's kubeconfig Secret"


async def _events(api: KubeApi, namespace: str, names: Sequence[str]) -> list[Obj]:
    out: list[Obj] = []
    for name in dict.fromkeys(names):
        out += (await api.list(CORE_EVENTS, namespace=namespace, field_selector=f"involvedObject.name={name}")).items
    return out


async def _job_and_workload(api: KubeApi, namespace: str, name: str) -> tuple[Obj, Obj | None]:
    job = await api.get(JOBS, name, namespace=namespace)
    uid = job["metadata"].get("uid")
    for wl in (await api.list(WORKLOADS, namespace=namespace)).items:
        if any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or ()):
            return job, wl
    return job, None


def _job_name(target: str) -> str:
    kind, sep, name = target.partition("/")
    if not sep:
        return kind
    if kind.lower() not in ("job", "jobs", "job.batch"):
        raise ValueError(f"{target}: only Jobs are followed across the federation (job/NAME)")
    return name


async def _describe(args: argparse.Namespace, api: KubeApi, now: dt.datetime) -> str:
    namespace = _namespace(args) or "default"
    if args.kind in ("job", "jobs") and not args.name:
        raise ValueError("describe job needs the Job's name: describe job NAME (or job/NAME)")
    target = args.kind if not args.name else args.name if args.kind in ("job", "jobs") else f"{args.kind}/{args.name}"
    name = _job_name(target)
    job, workload = await _job_and_workload(api, namespace, name)
    worker = worker_of(workload).split(",")[0] if workload is not None else ""
    events = [
        EventView("manager", e)
        for e in await _events(api, namespace, [name, *([workload["metadata"]["name"]] if workload else [])])
    ]
    remote_wl = remote_job = None
    pods: list[Obj] = []
    problems: list[str] = []
    if worker:
        try:
            remote, how = await _worker_api(args, api, worker)
        except (KubeError, KubeconfigError, OSError, ValueError) as err:
            problems.append(f"worker {worker} not read: {err}")
        else:
            async with remote:
                if workload is not None:
                    remote_wl = await remote.get_or_none(WORKLOADS, workload["metadata"]["name"], namespace=namespace)
                remote_job = await remote.get_or_none(JOBS, name, namespace=namespace)
                try:
                    pods = list((await remote.list(PODS, namespace=namespace, label_selector=f"job-name={name}")).items)
                    names = [name, *(p["metadata"]["name"] for p in pods)]
                    if workload is not None:
                        names.append(workload["metadata"]["name"])
                    events += [EventView(worker, e) for e in await _events(remote, namespace, names)]
                except KubeError as err:
                    problems.append(f"pods and events on {worker} not read through {how}: {err}")
    return describe_job(
        job=job,
        workload=workload,
        worker=worker or None,
        remote_workload=remote_wl,
        remote_job=remote_job,
        pods=pods,
        events=events,
        now=now,
        problems=problems,
    )


async def _pods(args: argparse.Namespace, api: KubeApi, now: dt.datetime) -> str:
    namespace = _namespace(args) or "default"
    name = _job_name(args.for_)
    _job, workload = await _job_and_workload(api, namespace, name)
    worker = worker_of(workload).split(",")[0] if workload is not None else ""
    if not worker:
        raise ValueError(f"job/{name} is not running on any worker yet")
    remote, _how = await _worker_api(args, api, worker)
    async with remote:
        pods = (await remote.list(PODS, namespace=namespace, label_selector=f"job-name={name}")).items
    if args.output in ("json", "yaml"):
        return _dump(pods, args.output)
    if not pods:
        return f"No pods of job/{name} on {worker}."
    return render_pods(pods, now=now, worker=worker)


async def _run(args: argparse.Namespace) -> str:
    api = await connect_kubeconfig_file(_kubeconfig(args.kubeconfig), cluster="manager", context=args.context)
    async with api:
        if args.command in ("add-worker", "remove-worker"):
            return await _join(args, api)
        now = dt.datetime.now(dt.UTC)
        if args.command == "workers":
            items = (await api.list(MULTIKUEUE_CLUSTERS)).items
            return _dump(items, args.output) if args.output in ("json", "yaml") else render_workers(items, now=now)
        if args.command in ("list", "workloads"):
            return await _list(args, api, now)
        if args.command == "pending":
            return await _pending(args, api, now)
        if args.command in ("stop", "resume"):
            return await _stop_resume(args, api)
        if args.command == "create":
            return await _create(args, api)
        if args.command == "describe":
            return await _describe(args, api, now)
        if args.command == "pods":
            return await _pods(args, api, now)
        raise ValueError(f"unknown command {args.command}")


def _common() -> argparse.ArgumentParser:
    """kubectl's flags, accepted before or after the command (``SUPPRESS``: a later copy never resets one)."""
    common = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    common.add_argument("--kubeconfig", default=s)
    common.add_argument(
        "--context", default=s, help="the manager cluster's context in the kubeconfig (default: current)"
    )
    common.add_argument("-n", "--namespace", default=s, help="default: the context's namespace, as kubectl does")
    common.add_argument("-A", "--all-namespaces", action="store_true", default=s)
    common.add_argument("-o", "--output", choices=("wide", "json", "yaml"), default=s)
    common.add_argument("-l", "--selector", default=s, help="label selector, as kubectl's")
    common.add_argument("--field-selector", default=s)
    common.add_argument("--worker-kubeconfig", default=s, help="kubeconfig to read workers with (describe, pods)")
    return common


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--clusterqueue", help="only workloads of this ClusterQueue")
    parser.add_argument("-q", "--localqueue", help="only workloads of this LocalQueue")
    parser.add_argument(
        "--status",
        action="append",
        default=[],
        type=str.lower,
        choices=STATUSES,
        metavar="STATUS",
        help=f"repeatable; one of {', '.join(STATUSES)}",
    )
    parser.add_argument("--worker", help="only workloads on (or nominated for) this worker")


_DEFAULTS = {
    "kubeconfig": None,
    "context": None,
    "namespace": None,
    "all_namespaces": False,
    "output": None,
    "selector": None,
    "field_selector": None,
    "worker_kubeconfig": None,
}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    common = _common()
    parser = argparse.ArgumentParser(prog="kubectl kfed", description=__doc__.splitlines()[0], parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    workloads = sub.add_parser("workloads", parents=[common], help="Workloads with the worker each runs on")
    _filters(workloads)
    workloads.set_defaults(kind="workloads")
    lister = sub.add_parser(
        "list", parents=[common], help="list workloads, clusterqueues, localqueues, resourceflavors"
    )
    lister.add_argument("kind", choices=sorted(KINDS))
    _filters(lister)
    pending = sub.add_parser("pending", parents=[common], help="pending workloads with their positions in the queues")
    pending.add_argument("-c", "--clusterqueue")
    pending.add_argument("-q", "--localqueue")
    for verb in ("stop", "resume"):
        cmd = sub.add_parser(verb, parents=[common], help=f"{verb} a workload, clusterqueue or localqueue")
        cmd.add_argument("kind", choices=sorted(k for k, r in KINDS.items() if r is not RESOURCE_FLAVORS))
        cmd.add_argument("name")
        cmd.add_argument(
            "--keep-already-running",
            action="store_true",
            help="stop: queues only; let admitted workloads run (stopPolicy Hold, else HoldAndDrain)",
        )
    create = sub.add_parser(
        "create", parents=[common], help="create a clusterqueue (cq), localqueue (lq) or resourceflavor (rf)"
    )
    create.add_argument("kind", choices=sorted(k for k, r in KINDS.items() if r is not WORKLOADS))
    create.add_argument("name")
    create.add_argument("-c", "--clusterqueue", help="localqueue: its ClusterQueue")
    create.add_argument(
        "-i",
        "--ignore-unknown-cq",
        action="store_true",
        help="localqueue: create it even if the ClusterQueue does not exist",
    )
    create.add_argument("--cohort")
    create.add_argument("--queuing-strategy", choices=("BestEffortFIFO", "StrictFIFO"))
    create.add_argument("--namespace-selector", help="KEY=VALUE,... (default: every namespace)")
    create.add_argument("--reclaim-within-cohort", choices=("Never", "LowerPriority", "Any"))
    create.add_argument(
        "--preemption-within-cluster-queue", choices=("Never", "LowerPriority", "LowerOrNewerEqualPriority")
    )
    create.add_argument("--nominal-quota", help="FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY][,FLAVOR:...]")
    create.add_argument("--borrowing-limit", help="same syntax as --nominal-quota")
    create.add_argument("--lending-limit", help="same syntax as --nominal-quota")
    create.add_argument("--admission-check", action="append", default=[], help="repeatable; e.g. the MultiKueue check")
    create.add_argument("--node-labels", help="resourceflavor: KEY=VALUE,...")
    create.add_argument("--node-taint", action="append", default=[], help="resourceflavor: KEY[=VALUE]:EFFECT")
    create.add_argument("--dry-run", choices=("none", "client", "server"), default="none")
    describe = sub.add_parser("describe", parents=[common], help="describe job NAME: a Job across the federation")
    describe.add_argument("kind", help="job (or job/NAME)")
    describe.add_argument("name", nargs="?", default="")
    pods = sub.add_parser("pods", parents=[common], help="pods --for job/NAME: the Job's pods on its worker")
    pods.add_argument("--for", dest="for_", required=True, metavar="job/NAME")
    sub.add_parser("workers", parents=[common], help="worker clusters and whether they are connected")
    add = sub.add_parser(
        "add-worker",
        parents=[common],
        help="join a worker: mint a token for its kfed-manager-access ServiceAccount, store a kubeconfig for it "
        "in a Secret and create the MultiKueueCluster and MultiKueueConfig entry",
    )
    add.add_argument("name", help="the worker's MultiKueueCluster name")
    add.add_argument("--worker-context", help="the worker's context (default: the worker kubeconfig's current one)")
    add.add_argument(
        "--worker-server", help="the worker's apiserver URL as the manager reaches it (default: the context's)"
    )
    add.add_argument("--worker-namespace", default="kfed-system", help="the kfed-agent release namespace")
    add.add_argument("--service-account", default=join.DEFAULT_ACCESS_ACCOUNT)
    add.add_argument("--token-duration", default="8760h", help="lifetime of the token (run again to renew it)")
    add.add_argument("--multikueue-config", help="default: the only MultiKueueConfig, or a new one named kfed")
    add.add_argument("--wait", type=float, default=60, help="seconds to wait for Active=True (0: do not wait)")
    remove = sub.add_parser(
        "remove-worker", parents=[common], help="undo add-worker on the manager cluster once its Jobs finished"
    )
    remove.add_argument("name")
    remove.add_argument(
        "--wait",
        dest="remove_wait",
        type=float,
        default=0,
        help="seconds to wait for the Jobs still running there to finish (it gets no new ones meanwhile)",
    )
    remove.add_argument(
        "--force",
        action="store_true",
        help="remove it even though Jobs still run there (requeued after the worker-lost timeout; their copies stay)",
    )
    args = parser.parse_args(list(argv))
    for key, default in _DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, default)
    if args.command in ("add-worker", "remove-worker"):  # their -n is kfed-manager's namespace (the Secrets)
        args.namespace = args.namespace or "kfed-system"
    args.kfed_namespace = "kfed-system"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        print(anyio.run(_run, args))
    except (KubeError, KubeconfigError, OSError, ValueError, join.JoinError) as err:
        print(f"kubectl kfed: {err}", file=sys.stderr)
        return 1
    return 0
