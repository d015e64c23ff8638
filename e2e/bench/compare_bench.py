"""kfed side by side with direct submission (and stock MultiKueue when built): the same Jobs on the same rig shape.

Each system gets a fresh rig (manager + 2 workers x 40 kwok nodes x 16 cpu; with ``KFED_COMPARE_WORKERS=10``,
10 workers x 8 nodes sharing the manager's etcd) and the same ``N`` one-pod Jobs of
1 cpu that complete 2 s after they run:

- ``direct``: the Jobs created straight on the workers, split evenly, no federation: the rig's own ceiling;
- ``kfed``: the Jobs created on the manager with the queue label, kfed-manager and one kfed-agent per worker;
- ``kueue`` / ``kueue-qps`` / ``kueue-equal-qps``: stock Kueue MultiKueue (``e2e.bench.stock_kueue``), with its
  shipped defaults, with kfed's QPS/burst on its own cluster's client, and with its worker clients at kfed's limits
  too (a one-line source change: v0.19.1 cannot set those).

Figures per system: time to all reserved / admitted (manager Workload conditions, watched) and all Complete,
Jobs/s, submit→running and submit→complete p50/p99 (submit: the create in the audit log; running: the node
agent's first pod status write in the audit log; complete: when the user's watch saw the Job Complete), writes
per Job per cluster and per client (events separately) and 409 Conflicts per client from the audit logs,
CPU-seconds per process from the first create to the last Complete, and CPU per Job by cluster (each process
charged to the cluster it serves: what each would bear on machines of its own). Results go to ``DIR/compare.json``
and PNG plots (throughput over time, latency CDF, writes per Job by writer); the table and the paths are printed.
Ratios are what to compare: the machine is shared.

Environment: ``KFED_COMPARE_SIZES`` (default ``300``; e.g. ``300,1000``), ``KFED_COMPARE_SYSTEMS`` (default
``direct,kfed``, add ``kueue,kueue-qps,kueue-equal-qps``), ``KFED_COMPARE_WORKERS`` (default 2),
``KFED_BENCH_PROFILE`` (py-spy profiles of kfed's processes, and a Go CPU profile of every apiserver over the first
``KFED_BENCH_PROFILE_SECONDS`` (default 60) of the run, ``apiserver-SYSTEM-CLUSTER.pprof``: read it with
``go tool pprof -top``), ``KFED_COMPARE_FROM_CHARTS`` (default 1: kfed installed with helm from ``charts/`` and run
with its ServiceAccounts' tokens, as the e2e tests run it; 0 runs it with the rig's admin certificates),
``KFED_COMPARE_MANAGER_ARGS`` /
``KFED_COMPARE_AGENT_ARGS`` (extra flags for kfed-manager / kfed-agent), ``KFED_BENCH_KEEP_LOGS`` (logs and audit
logs to the output dir), ``KFED_BENCH_OUT`` (default ``.bench/compare`` under the repository),
``KFED_COMPARE_STREAMS`` (kubectl processes creating the burst at once, default one per worker; direct gives each
worker an equal share of them), ``KFED_COMPARE_PACE`` (seconds; default 0, a burst): one Job per kubectl call with
this pause between them instead of a burst, for latency on an otherwise idle rig.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.queues import apply_sample_queues, job_manifest
from e2e.rig.audit import JobTimes, conflicts_in, job_times_in, writes_in
from e2e.rig.federation import MANAGER, REPO_ROOT, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.toolchain import ensure_built

NAMESPACE = "default"
JOB_SECONDS = 2
TIMEOUT = 1800.0
CONTROLLERS = ("kfed-manager", "kfed-agent", "kueue")
"""Clients whose writes are the federation's cost (the rest — kube's own controllers, kwok — is the same for all)."""
BY_TIME = frozenset(
    {
        "leases",
        "clustercapacities",
        "clustercapacities/status",
        "clusterqueues",
        "clusterqueues/status",
        "localqueues",
        "localqueues/status",
        "cohorts/status",
        "multikueueclusters/status",
        "admissionchecks/status",
    }
)
"""Resources a controller writes by the clock or as aggregates (leader leases, capacity reports, queue counts at most
once a second), not once per Job: their share of the writes per Job falls as a run gets faster."""


def write_kind(resource: str) -> str:
    """``events``, ``by time`` (:data:`BY_TIME`) or ``per job``: how a controller's write to ``resource`` counts."""
    if resource == "events":
        return "events"
    return "by time" if resource in BY_TIME else "per job"


def cluster_of(process: str) -> str:
    """The cluster a rig process serves: ``worker-1/kube-apiserver`` → ``worker-1``, ``kfed-agent-worker-1`` →
    ``worker-1``, ``kfed-manager`` and ``kueue-manager`` → ``manager``, ``kueue-worker-2`` → ``worker-2``."""
    if "/" in process:
        return process.split("/", 1)[0]
    for prefix in ("kfed-agent-", "kueue-"):
        if process.startswith(prefix):
            return process.removeprefix(prefix)
    return MANAGER if process == "kfed-manager" else process


def cpu_per_job_by_cluster(cpu_seconds: dict[str, float], *, jobs: int, ran: dict[str, int]) -> dict[str, float]:
    """Milliseconds of CPU per Job each cluster's processes (its control plane, kwok and its controllers) used: per
    Job submitted for the manager, per Job it ran for a worker (``ran``), as if each cluster had machines of its own.
    A worker that ran nothing is left out."""
    totals: dict[str, float] = {}
    for process, seconds in cpu_seconds.items():
        cluster = cluster_of(process)
        totals[cluster] = totals.get(cluster, 0.0) + seconds
    out: dict[str, float] = {}
    for cluster, seconds in sorted(totals.items()):
        count = jobs if cluster == MANAGER else ran.get(cluster, 0)
        if count:
            out[cluster] = round(1000 * seconds / count, 1)
    return out


def shapes(workers: int) -> dict[str, NodeShape]:
    """The same 80 nodes x 16 cpu in all, split evenly over the workers."""
    count = max(1, 80 // workers)
    return {f"worker-{i}": NodeShape(count=count, cpu="16", memory="64Gi") for i in range(1, workers + 1)}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def record_true_conditions(first_true: dict[str, dict[str, float]], document: object, now: float) -> None:
    """Note when each object of one document kubectl printed first showed each True condition. The document is an
    object, or the List kubectl prints first (the state when the watch started: after a restart, Jobs that
    completed meanwhile are only in it)."""
    items = document.get("items") if isinstance(document, dict) else None
    for obj in items if isinstance(items, list) else [document]:
        if not isinstance(obj, dict) or not (name := (obj.get("metadata") or {}).get("name")):
            continue  # e.g. a Status document after the watch expired: not a Job, and no reason to stop reading
        seen = first_true.setdefault(name, {})
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("status") == "True":
                seen.setdefault(condition["type"], now)


class ConditionWatch:
    """``kubectl get RESOURCE -w``: when each object first showed each True condition, as seen by the bench.

    The reader thread starts kubectl again at once whenever it ends (the server closed the watch, kubectl failed):
    the new one lists everything first, so nothing is lost, but a condition is only seen when it is read, so a
    restart that waited for the bench's main loop (busy creating the burst) would date every Job that finished
    meanwhile to the restart."""

    MAX_RESTARTS = 20

    def __init__(self, fed: Federation, cluster: str, resource: str) -> None:
        self.first_true: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._argv = [
            str(fed.bin_dir / "kubectl"),
            f"--kubeconfig={fed.kubeconfig(cluster)}",
            "get",
            resource,
            "-n",
            NAMESPACE,
            "-w",
            "-o",
            "json",
        ]
        self.restarts = 0
        self.errors: list[str] = []
        self._stopped = threading.Event()
        self._proc = self._popen()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _popen(self) -> subprocess.Popen[str]:
        return subprocess.Popen(self._argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def _run(self) -> None:
        while True:
            self._read(self._proc)
            self._proc.wait()
            if self._stopped.is_set():
                return
            error = (self._proc.stderr.read() if self._proc.stderr else "").strip()
            with self._lock:
                self.errors.append(error or f"exit {self._proc.returncode}")
                self.restarts += 1
                if self.restarts > self.MAX_RESTARTS:
                    return
            print(f"  kubectl get -w ended ({error or self._proc.returncode}); watching again", flush=True)
            self._proc = self._popen()

    def ensure_running(self) -> None:
        """Raises once kubectl kept ending (more than ``MAX_RESTARTS`` times)."""
        with self._lock:
            if self.restarts > self.MAX_RESTARTS:
                raise RuntimeError(f"kubectl get -w keeps ending: {self.errors[-1]}")

    def _read(self, proc: subprocess.Popen[str]) -> None:
        """kubectl prints one JSON document per object and change, back to back."""
        assert proc.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in proc.stdout:
            buffer += line
            if not line.startswith("}"):
                continue
            try:
                obj, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                continue
            buffer = buffer.lstrip()[end:]
            self.observe(obj, time.time())

    def observe(self, document: object, now: float) -> None:
        with self._lock:
            record_true_conditions(self.first_true, document, now)

    def count(self, condition: str) -> int:
        with self._lock:
            return sum(1 for seen in self.first_true.values() if condition in seen)

    def last(self, condition: str) -> float | None:
        with self._lock:
            times = [seen[condition] for seen in self.first_true.values() if condition in seen]
        return max(times) if times else None

    def stop(self) -> None:
        self._stopped.set()
        proc = self._proc
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._thread.join(timeout=10)


@dataclass
class System:
    """How one system is set up on a fresh rig and where its Jobs go."""

    name: str
    controllers: bool
    setup: Callable[[Federation], None]
    submit: Callable[[Federation, list[dict[str, Any]]], None]
    user_clusters: Callable[[Federation], list[str]]
    """Where users submit and watch their Jobs."""
    teardown: Callable[[Federation], None] = lambda fed: None
    extra_records: Callable[[], list[Any]] = lambda: []
    workers: int = field(default_factory=lambda: int(os.environ.get("KFED_COMPARE_WORKERS", "2")))


def _create(fed: Federation, cluster: str, manifests: list[dict[str, Any]]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(fed.bin_dir / "kubectl"), f"--kubeconfig={fed.kubeconfig(cluster)}", "create", "-f", "-", "-o", "name"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}))
    proc.stdin.close()
    return proc


def _streams(fed: Federation) -> int:
    """kubectl processes creating Jobs at once: ``KFED_COMPARE_STREAMS``, by default one per worker. Each creates
    its Jobs one after the other, so on a loaded apiserver the number of streams paces the burst."""
    return int(os.environ.get("KFED_COMPARE_STREAMS", "0") or 0) or len(fed.workers)


def _pace() -> float:
    return float(os.environ.get("KFED_COMPARE_PACE", "0") or 0)


def _create_paced(fed: Federation, targets: list[tuple[str, dict[str, Any]]], pace: float) -> None:
    """One Job per kubectl call, ``pace`` seconds apart (a load generator's pacing, not a wait on a condition)."""
    for cluster, manifest in targets:
        _wait_created([_create(fed, cluster, [manifest])])
        time.sleep(pace)


def _wait_created(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise RuntimeError(f"kubectl create failed: {proc.stderr.read() if proc.stderr else ''}")


def submit_direct(fed: Federation, manifests: list[dict[str, Any]]) -> None:
    """Round-robin over the workers, without the queue label (no local queueing: the rig's ceiling)."""
    per_worker: dict[str, list[dict[str, Any]]] = {w: [] for w in fed.workers}
    targets: list[tuple[str, dict[str, Any]]] = []
    for index, manifest in enumerate(manifests):
        plain = json.loads(json.dumps(manifest))
        plain["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name", None)
        worker = fed.workers[index % len(fed.workers)]
        per_worker[worker].append(plain)
        targets.append((worker, plain))
    if _pace() > 0:
        _create_paced(fed, targets, _pace())
        return
    per_stream = max(1, _streams(fed) // len(fed.workers))
    _wait_created(
        [_create(fed, worker, items[i::per_stream]) for worker, items in per_worker.items() for i in range(per_stream)]
    )


def submit_manager(fed: Federation, manifests: list[dict[str, Any]]) -> None:
    """As many kubectl processes at once as ``submit_direct`` uses (one per worker), each with its share: one
    kubectl creates one Job after the other, so the number of clients alone would otherwise set the pace."""
    streams = _streams(fed)
    if _pace() > 0:
        _create_paced(fed, [(MANAGER, m) for m in manifests], _pace())
        return
    _wait_created([_create(fed, MANAGER, manifests[i::streams]) for i in range(streams)])


def systems() -> dict[str, System]:
    from e2e.bench import stock_kueue

    return {
        "direct": System("direct", False, lambda fed: None, submit_direct, lambda fed: fed.workers),
        "kfed": System("kfed", True, apply_sample_queues, submit_manager, lambda fed: [MANAGER]),
        **stock_kueue.systems(submit_manager),
    }


@dataclass
class Result:
    system: str
    jobs: int
    created_seconds: float
    milestones: dict[str, float | None] = field(default_factory=dict)
    """Seconds from the first create to all reserved / admitted (manager Workloads) and all Complete."""
    jobs_per_second: float | None = None
    latency: dict[str, dict[str, float | None]] = field(default_factory=dict)
    writes_detail: dict[str, int] = field(default_factory=dict)
    """``cluster client verb resource`` → count, for the federation's controllers."""
    writes_per_job: dict[str, dict[str, float]] = field(default_factory=dict)
    """cluster → client → writes per Job (Events under ``<client> events``)."""
    controller_writes_per_job: float = 0.0
    controller_events_per_job: float = 0.0
    by_time_writes_per_job: float = 0.0
    """The part of ``controller_writes_per_job`` made to :data:`BY_TIME` resources."""
    conflicts: dict[str, int] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    completions: list[float] = field(default_factory=list)
    """Seconds from the first create at which each Job finished (sorted), for the throughput plot."""
    submit_to_running: list[float] = field(default_factory=list)
    submit_to_complete: list[float] = field(default_factory=list)
    workers_used: dict[str, int] = field(default_factory=dict)
    create_latency: dict[str, float | None] = field(default_factory=dict)
    """p50/p99 seconds the apiserver took to serve the user's Job creates (audit log): the load the submitter felt.
    Creates are sequential per kubectl, so a loaded apiserver paces the whole burst."""
    after_last_create: float | None = None
    """Seconds from the last create to the last Complete: how far the system lags behind its submitters."""
    apiserver_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    """cluster → the 12 most served ``verb resource`` and ``watch-event kind`` during the run (all clients)."""
    watch_restarts: int = 0
    """How often the bench's own ``kubectl get -w`` had to be started again (each time, at once)."""
    shared_etcd: bool = False
    """The workers kept their objects in the manager's etcd (``KFED_COMPARE_WORKERS`` above 2): its CPU is charged
    to the manager cluster, though it served every cluster."""


def _profile(fed: Federation, system: str) -> list[subprocess.Popen[bytes]]:
    """``KFED_BENCH_PROFILE=1``: py-spy samples each controller process; collapsed stacks go to the output dir."""
    out = Path(os.environ.get("KFED_BENCH_OUT", str(REPO_ROOT / ".bench" / "compare")))
    py_spy = Path(sys.executable).parent / "py-spy"
    return [
        subprocess.Popen(
            [
                str(py_spy),
                "record",
                "--pid",
                str(record.pid),
                "--format",
                "raw",
                "--rate",
                "50",
                "--nonblocking",
                "-o",
                str(out / f"profile-{system}-{record.name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for record in fed.controller_records
    ]


def _profile_apiservers(fed: Federation, system: str) -> list[threading.Thread]:
    """``KFED_BENCH_PROFILE=1``: each apiserver's own CPU profile (``/debug/pprof/profile``) over the first
    ``KFED_BENCH_PROFILE_SECONDS`` of the run, fetched in the background while the Jobs are submitted."""
    out = Path(os.environ.get("KFED_BENCH_OUT", str(REPO_ROOT / ".bench" / "compare")))
    seconds = int(os.environ.get("KFED_BENCH_PROFILE_SECONDS", "60"))

    def fetch(cluster: str) -> None:
        path = f"/debug/pprof/profile?seconds={seconds}"
        cmd = [str(fed.bin_dir / "kubectl"), f"--kubeconfig={fed.kubeconfig(cluster)}", "get", "--raw", path]
        result = subprocess.run(cmd, capture_output=True, timeout=seconds + 60, check=False)
        if result.returncode == 0:
            (out / f"apiserver-{system}-{cluster}.pprof").write_bytes(result.stdout)
        else:
            print(f"apiserver profile of {cluster} failed: {result.stderr.decode(errors='replace')}", flush=True)

    threads = [threading.Thread(target=fetch, args=(name,), daemon=True) for name in fed.clusters]
    for thread in threads:
        thread.start()
    return threads


def _keep_logs(fed: Federation, label: str) -> None:
    """``KFED_BENCH_KEEP_LOGS=1``: the controllers' logs (kfed's, stock Kueue's) and each cluster's audit log go to
    the output dir."""
    if not os.environ.get("KFED_BENCH_KEEP_LOGS"):
        return
    out = Path(os.environ.get("KFED_BENCH_OUT", str(REPO_ROOT / ".bench" / "compare"))) / f"logs-{label}"
    out.mkdir(parents=True, exist_ok=True)
    for log in [*fed.directory.glob("logs/*.log"), *fed.directory.glob("kueue/*/kueue.log")]:
        target = out / (f"{log.parent.name}-{log.name}" if log.parent.parent.name == "kueue" else log.name)
        shutil.copyfile(log, target)
    for name, cluster in fed.clusters.items():  # the audit logs: every write's time, client and outcome
        if cluster.audit_log.exists():
            shutil.copyfile(cluster.audit_log, out / f"audit-{name}.log")


_SAMPLE = re.compile(r"^(apiserver_request_total|apiserver_watch_events_total)\{([^}]*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _apiserver_counts(fed: Federation) -> dict[str, Counter[str]]:
    """Per cluster: requests served by verb and resource (``apiserver_request_total``, all clients, reads too) and
    watch events sent by kind (``apiserver_watch_events_total``): where an apiserver's CPU goes besides writes."""
    counts: dict[str, Counter[str]] = {}
    for name in fed.clusters:
        out = fed.kubectl(name, "get", "--raw", "/metrics", check=False, timeout=60).stdout or ""
        per: Counter[str] = Counter()
        for line in out.splitlines():
            match = _SAMPLE.match(line)
            if match is None:
                continue
            labels = dict(_LABEL.findall(match.group(2)))
            if match.group(1) == "apiserver_request_total":
                key = f"{labels.get('verb', '')} {labels.get('resource', '')}"
                if labels.get("subresource"):
                    key += f"/{labels['subresource']}"
            else:
                key = f"watch-event {labels.get('kind', labels.get('resource', ''))}"
            per[key] += int(float(match.group(3)))
        counts[name] = per
    return counts


def _cpu(fed: Federation, system: System) -> dict[str, float]:
    """CPU-seconds so far of every process of the rig and of the system under test."""
    records = [r for c in fed.clusters.values() for r in c.records] + fed.controller_records + system.extra_records()
    return {record.name: record.cpu_seconds() or 0.0 for record in records}


def run_system(system: System, jobs: int, bins: Path) -> Result:
    spec = FederationSpec(
        workers=system.workers,
        node_shapes=shapes(system.workers),
        job_seconds=JOB_SECONDS,
        shared_etcd=system.workers > 2,
        apiserver_profiling=bool(os.environ.get("KFED_BENCH_PROFILE")),
    )
    spec.controllers = system.controllers
    # kfed as users install it: both charts with helm, each process with only its ServiceAccount's token (the
    # apiserver caches a token's review; an admin client certificate is verified again on every request)
    spec.from_charts = system.name == "kfed" and os.environ.get("KFED_COMPARE_FROM_CHARTS", "1") != "0"
    if system.name == "kfed":  # e.g. KFED_COMPARE_MANAGER_ARGS="--concurrent-reconciles 32" to try a setting
        spec.manager_args = tuple(shlex.split(os.environ.get("KFED_COMPARE_MANAGER_ARGS", "")))
        spec.agent_args = tuple(shlex.split(os.environ.get("KFED_COMPARE_AGENT_ARGS", "")))
    manifests = [
        job_manifest(f"b-{i:04d}", namespace=NAMESPACE, cpu="1", memory="1Gi", seconds=JOB_SECONDS) for i in range(jobs)
    ]
    with (
        tempfile.TemporaryDirectory(prefix=f"kfed-compare-{system.name}-") as tmp,
        running(Path(tmp), bins, spec) as fed,
    ):
        try:
            system.setup(fed)
            watches = [ConditionWatch(fed, c, "jobs.batch") for c in system.user_clusters(fed)]
            workload_watch = (
                ConditionWatch(fed, MANAGER, "workloads.kueue.x-k8s.io") if system.name != "direct" else None
            )
            profiling = bool(os.environ.get("KFED_BENCH_PROFILE"))
            profilers = _profile(fed, system.name) if profiling else []
            apiserver_profiles = _profile_apiservers(fed, system.name) if profiling else []
            try:
                cpu_before = _cpu(fed, system)
                requests_before = _apiserver_counts(fed)
                started = time.time()
                system.submit(fed, manifests)
                created = time.time() - started
                deadline = time.monotonic() + TIMEOUT
                while sum(w.count("Complete") for w in watches) < jobs and time.monotonic() < deadline:
                    for watch in [*watches, *([workload_watch] if workload_watch else [])]:
                        watch.ensure_running()
                    time.sleep(0.5)
                milestones: dict[str, float | None] = {}
                if workload_watch is not None:
                    for name, condition in (("reserved", "QuotaReserved"), ("admitted", "Admitted")):
                        last = workload_watch.last(condition)
                        done = workload_watch.count(condition) >= jobs
                        milestones[name] = last - started if last is not None and done else None
                complete = [w.last("Complete") for w in watches]
                all_complete = sum(w.count("Complete") for w in watches) >= jobs
                milestones["complete"] = (
                    max(t for t in complete if t is not None) - started if all_complete and any(complete) else None
                )
                completed_at = {
                    f"{NAMESPACE}/{name}": seen["Complete"]
                    for w in watches
                    for name, seen in w.first_true.items()
                    if "Complete" in seen
                }
            finally:
                for watch in [*watches, *([workload_watch] if workload_watch else [])]:
                    watch.stop()
                for profiler in profilers:
                    profiler.send_signal(signal.SIGINT)
                    profiler.wait(timeout=60)
                for thread in apiserver_profiles:
                    thread.join(timeout=120)
            cpu = {name: seconds - cpu_before.get(name, 0.0) for name, seconds in _cpu(fed, system).items()}
            requests = {
                cluster: dict((counts - requests_before.get(cluster, Counter())).most_common(12))
                for cluster, counts in _apiserver_counts(fed).items()
            }
        finally:
            system.teardown(fed)
            _keep_logs(fed, f"{system.name}-{jobs}")
        result = _collect(
            system,
            fed,
            jobs=jobs,
            created=created,
            milestones=milestones,
            cpu=cpu,
            completed_at=completed_at,
            burst={f"{NAMESPACE}/{m['metadata']['name']}" for m in manifests},
        )
        result.apiserver_requests = requests
        result.shared_etcd = spec.shared_etcd
        result.watch_restarts = sum(w.restarts for w in [*watches, *([workload_watch] if workload_watch else [])])
        return result


def _collect(
    system: System,
    fed: Federation,
    *,
    jobs: int,
    created: float,
    milestones: dict[str, float | None],
    cpu: dict[str, float],
    completed_at: dict[str, float],
    burst: set[str],
) -> Result:
    users = set(system.user_clusters(fed))
    times = JobTimes()
    writes: dict[str, dict[str, float]] = {}
    controller_writes = controller_events = by_time = 0
    conflicts: Counter[str] = Counter()
    workers_used: Counter[str] = Counter()
    detail: Counter[str] = Counter()
    for name, cluster in fed.clusters.items():
        cluster_times = job_times_in(cluster.audit_log, finish_here=name in users)
        if name != MANAGER:
            workers_used[name] = len(cluster_times.running)
        times.merge(cluster_times)
        per_client: Counter[str] = Counter()
        for (client, _verb, resource), count in writes_in(cluster.audit_log).items():
            if client == "kubectl":
                continue
            label = f"{client} events" if resource == "events" else client
            per_client[label] += count
            if client in CONTROLLERS:
                detail[f"{name} {client} {_verb} {resource}"] += count
                kind = write_kind(resource)
                if kind == "events":
                    controller_events += count
                else:
                    controller_writes += count
                    by_time += count if kind == "by time" else 0
        writes[name] = {k: round(v / jobs, 2) for k, v in sorted(per_client.items())}
        for (client, resource), count in conflicts_in(cluster.audit_log).items():
            conflicts[f"{client} {resource} on {name}"] += count
    times = times.only(burst)  # the clock starts at the burst's first create, not at the rig's own probe Job
    start = times.submitted
    first = min(start.values()) if start else 0.0
    running_lat = sorted(times.running[k] - start[k] for k in times.running if k in start)
    # Complete: when the user's watch saw the Job's Complete condition (a later status write, e.g. a mirror of
    # the same status, would move the audit log's last write but not what the user saw).
    complete_lat = sorted(completed_at[k] - start[k] for k in completed_at if k in start)
    completions = sorted(completed_at[k] - first for k in completed_at if k in start)
    result = Result(
        system=system.name,
        jobs=jobs,
        created_seconds=round(created, 2),
        milestones={k: None if v is None else round(v, 2) for k, v in milestones.items()},
        writes_per_job=writes,
        writes_detail=dict(sorted(detail.items())),
        controller_writes_per_job=round(controller_writes / jobs, 2),
        controller_events_per_job=round(controller_events / jobs, 2),
        by_time_writes_per_job=round(by_time / jobs, 2),
        conflicts=dict(conflicts),
        cpu_seconds={k: round(v, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])},
        completions=[round(c, 3) for c in completions],
        submit_to_running=[round(v, 3) for v in running_lat],
        submit_to_complete=[round(v, 3) for v in complete_lat],
        workers_used=dict(workers_used),
    )
    if len(completions) >= jobs:
        result.jobs_per_second = round(jobs / completions[-1], 2) if completions[-1] > 0 else None
    served = sorted(times.create_seconds.values())
    result.create_latency = {"p50": percentile(served, 50), "p99": percentile(served, 99)}
    if start and len(completions) >= jobs:
        result.after_last_create = round(max(completed_at.values()) - max(start.values()), 2)
    result.latency = {
        "submit_to_running": {"p50": percentile(running_lat, 50), "p99": percentile(running_lat, 99)},
        "submit_to_complete": {"p50": percentile(complete_lat, 50), "p99": percentile(complete_lat, 99)},
    }
    return result


def _fmt(value: float | None, spec: str = "6.1f") -> str:
    return "     -" if value is None else format(value, spec)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.0f}"


def table(results: list[Result]) -> str:
    lines = [
        f"{'system':10} {'jobs':>5} {'reserved':>8} {'admitted':>8} {'complete':>8} {'jobs/s':>6} "
        f"{'run p50':>7} {'run p99':>7} {'done p50':>8} {'done p99':>8} {'writes/J':>8} {'events/J':>8} "
        f"{'409s':>5} {'ctl CPU ms/J':>12} {'all CPU ms/J':>12} {'create p50/p99 ms':>17} {'tail s':>6}  workers"
    ]
    for r in results:
        conflicts = sum(v for k, v in r.conflicts.items() if k.startswith(CONTROLLERS))
        ctl_cpu = sum(v for k, v in r.cpu_seconds.items() if any(k.startswith(c) for c in CONTROLLERS))
        lines.append(
            f"{r.system:10} {r.jobs:5} {_fmt(r.milestones.get('reserved'), '8.1f')} "
            f"{_fmt(r.milestones.get('admitted'), '8.1f')} {_fmt(r.milestones.get('complete'), '8.1f')} "
            f"{_fmt(r.jobs_per_second)} {_fmt(r.latency['submit_to_running']['p50'], '7.1f')} "
            f"{_fmt(r.latency['submit_to_running']['p99'], '7.1f')} "
            f"{_fmt(r.latency['submit_to_complete']['p50'], '8.1f')} "
            f"{_fmt(r.latency['submit_to_complete']['p99'], '8.1f')} {r.controller_writes_per_job:8.2f} "
            f"{r.controller_events_per_job:8.2f} {conflicts:5} {1000 * ctl_cpu / r.jobs:12.1f} "
            f"{1000 * sum(r.cpu_seconds.values()) / r.jobs:12.1f} "
            f"{_ms(r.create_latency.get('p50')):>8}/{_ms(r.create_latency.get('p99')):<8} "
            f"{_fmt(r.after_last_create)}  " + ",".join(f"{k}={v}" for k, v in sorted(r.workers_used.items()))
        )
    by_size: dict[int, dict[str, Result]] = {}
    for r in results:
        by_size.setdefault(r.jobs, {})[r.system] = r
    for size, found in sorted(by_size.items()):
        base = found.get("kfed")
        if base is None or not base.jobs_per_second:
            continue
        for other, r in found.items():
            if other != "kfed" and r.jobs_per_second:
                lines.append(f"  {size} Jobs: kfed Jobs/s = {base.jobs_per_second / r.jobs_per_second:.2f} x {other}")
    return "\n".join(lines)


def plot(results: list[Result], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    sizes = sorted({r.jobs for r in results})
    for size in sizes:
        runs = [r for r in results if r.jobs == size]
        fig, ax = plt.subplots(figsize=(7, 4))
        for r in runs:
            ax.step(r.completions, range(1, len(r.completions) + 1), where="post", label=r.system)
        ax.set(xlabel="seconds since the first create", ylabel="Jobs complete", title=f"Throughput, {size} Jobs")
        ax.legend()
        paths.append(out / f"throughput-{size}.png")
        fig.savefig(paths[-1], dpi=100, bbox_inches="tight")
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(7, 4))
        for r in runs:
            for values, style, what in (
                (r.submit_to_running, "-", "running"),
                (r.submit_to_complete, "--", "complete"),
            ):
                if values:
                    ax.plot(
                        values, [(i + 1) / len(values) for i in range(len(values))], style, label=f"{r.system} {what}"
                    )
        ax.set(xlabel="seconds after submit", ylabel="fraction of Jobs", title=f"Latency CDF, {size} Jobs")
        ax.legend()
        paths.append(out / f"latency-{size}.png")
        fig.savefig(paths[-1], dpi=100, bbox_inches="tight")
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(7, 4))
        writers = sorted(
            {f"{client} on {cluster}" for r in runs for cluster, per in r.writes_per_job.items() for client in per}
        )
        bottoms = [0.0] * len(runs)
        for writer in writers:
            client, _, cluster = writer.rpartition(" on ")
            heights = [r.writes_per_job.get(cluster, {}).get(client, 0.0) for r in runs]
            ax.bar([r.system for r in runs], heights, bottom=bottoms, label=writer)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
        ax.set(ylabel="writes per Job", title=f"API writes per Job by writer, {size} Jobs")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1, 1))
        paths.append(out / f"writes-{size}.png")
        fig.savefig(paths[-1], dpi=100, bbox_inches="tight")
        plt.close(fig)
    return paths


def main() -> None:
    sizes = [int(s) for s in os.environ.get("KFED_COMPARE_SIZES", "300").split(",") if s]
    names = [s for s in os.environ.get("KFED_COMPARE_SYSTEMS", "direct,kfed").split(",") if s]
    out = Path(os.environ.get("KFED_BENCH_OUT", str(REPO_ROOT / ".bench" / "compare"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    known = systems()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown system(s) {unknown}; known: {', '.join(known)}")
    bins = ensure_built()
    results: list[Result] = []
    for size in sizes:
        for name in names:
            print(f"--- {name}, {size} Jobs", flush=True)
            result = run_system(known[name], size, bins)
            results.append(result)
            print(table([result]), flush=True)
            (out / "compare.json").write_text(json.dumps([r.__dict__ for r in results], indent=1) + "\n")
    print(table(results))
    for size in sizes:
        for r in results:
            if r.jobs == size:
                print(
                    f"  {r.system} {size}: writes/Job {r.controller_writes_per_job} + Events "
                    f"{r.controller_events_per_job}, of the writes {r.by_time_writes_per_job} by the clock (leases, "
                    "capacity reports, queue counts)"
                )
                print(
                    f"  {r.system} {size}: writes/Job "
                    + "; ".join(
                        f"{cluster}: " + ", ".join(f"{c} {v}" for c, v in per.items())
                        for cluster, per in r.writes_per_job.items()
                    )
                )
                top = list(r.cpu_seconds.items())[:6]
                print(f"  {r.system} {size}: CPU-s " + ", ".join(f"{k} {v}" for k, v in top))
                by_cluster = cpu_per_job_by_cluster(r.cpu_seconds, jobs=r.jobs, ran=r.workers_used)
                print(
                    f"  {r.system} {size}: CPU ms per Job by cluster (manager: per Job submitted; a worker: per Job it "
                    "ran"
                    + ("; the manager's etcd served every cluster" if r.shared_etcd else "")
                    + ") "
                    + ", ".join(f"{k} {v}" for k, v in by_cluster.items())
                )
                if r.conflicts:
                    print(f"  {r.system} {size}: 409s {r.conflicts}")
                for cluster, served in r.apiserver_requests.items():
                    print(
                        f"  {r.system} {size}: {cluster} apiserver served "
                        + ", ".join(f"{k} {v}" for k, v in served.items())
                    )
    print(f"results: {out / 'compare.json'}")
    for path in plot(results, out):
        print(f"plot: {path}")
