"""Chaos soak (`make bench BENCH=soak`): hundreds of Jobs of mixed sizes and priorities while kfed is hurt.

A manager and two workers (real apiservers, kwok nodes) run kfed as its charts install it (only their
ServiceAccounts' tokens) with a short worker-lost timeout. Jobs (1 to 4 cpu,
1 or 2 pods, two WorkloadPriorityClasses, a manager ClusterQueue smaller than the workers so Jobs queue and
high-priority ones preempt) are submitted at a steady rate while a driver, on a fixed timetable: kills
kfed-manager (SIGKILL) and starts it again, kills each kfed-agent, freezes a worker's apiserver short of the
worker-lost timeout and another past it, and deletes nodes under running Jobs. Then it waits for every Job to
finish and checks (``e2e.bench.soak_checks``):

* every Job reached a final state on the manager (Complete, or Failed with its worker's reason), and every Job
  made to fail (one in ten: its pods exit 1, ``backoffLimit: 0``) ended Failed there, never Complete;
* no Job ran on two workers at once (audit logs of the workers; partitions reported on their own);
* no copy on a worker outlived its manager Job;
* no sampled moment had a ClusterQueue reserving more than its quota;
* every kfed process is alive at the end (nothing crashed besides what the driver killed), no Traceback in its
  logs, and no call refused by the charts' RBAC;
* no Job moved to another worker by a blip shorter than the worker-lost timeout (one preempted meanwhile moves).

It prints the counts, the recovery times per fault (p50/max from the fault to the affected Jobs Running again),
writes them to ``soak.json`` and exits non-zero when an invariant broke. Environment: ``KFED_SOAK_JOBS``
(default 500), ``KFED_SOAK_RATE`` (Jobs per second, default 4). The e2e suite runs it on a small scale
(``e2e/scenarios/test_chaos_soak.py``).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.bench.soak_checks import (
    Freeze,
    PodLife,
    QuotaSamples,
    clip_to_partitions,
    deletes,
    overlaps,
    pod_lives,
    recovered_jobs,
)
from e2e.queues import FLAVOR, job_manifest, named_queue_objects
from e2e.rig.audit import job_times_in
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION
from e2e.rig.node_faults import delete_node
from e2e.rig.nodes import NodeShape, node_manifests
from e2e.toolchain import ensure_built
from federation.conditions import parse_time

NAMESPACE = "default"
QUEUE = "soak"
WORKER_LOST_TIMEOUT = 20.0
BLIP = 8.0
PARTITION = WORKER_LOST_TIMEOUT + 15.0
FINISH_WITHIN = 900.0
FAILING_EVERY = 10
MADE_TO_FAIL_LABEL = "soak.kfed.io/made-to-fail"


def _queues(fed: Federation) -> None:
    preemption = {"withinClusterQueue": "LowerPriority"}
    for cluster in (MANAGER, *fed.workers):
        objects = [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
            *named_queue_objects(QUEUE, cpu="96" if cluster == MANAGER else "128", manager=cluster == MANAGER),
        ]
        if cluster == MANAGER:
            objects[1]["spec"]["preemption"] = preemption
            objects += [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": f"soak-{name}"},
                    "value": value,
                }
                for name, value in (("low", 10), ("high", 1000))
            ]
        fed.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )


def _jobs(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        manifest = job_manifest(
            f"soak-{i:04d}",
            namespace=NAMESPACE,
            cpu=str(rng.choice((1, 1, 2, 4))),
            parallelism=rng.choice((1, 1, 2)),
            seconds=rng.choice((2, 4, 8)),
            queue=QUEUE,
            memory="256Mi",
        )
        manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = (
            "soak-high" if rng.random() < 0.2 else "soak-low"
        )
        if i % FAILING_EVERY == FAILING_EVERY - 1:  # its worker's Job controller fails it at its first pod's exit
            manifest["metadata"]["labels"][MADE_TO_FAIL_LABEL] = "true"
            manifest["spec"]["backoffLimit"] = 0
            manifest["spec"]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
        jobs.append(manifest)
    return jobs


def _list(fed: Federation, cluster: str, kind: str, *selector: str) -> list[dict[str, Any]]:
    result = fed.kubectl(cluster, "get", kind, "-A", *selector, "-o", "json", check=False, timeout=60)
    return list(json.loads(result.stdout)["items"]) if result.returncode == 0 else []


def _stale_copies_deleted(fed: Federation, lives: list[PodLife], freezes: list[Freeze]) -> list[float]:
    """For each Job whose pods ran on through a partition of their worker: seconds from the worker's return until
    kfed-manager had that Job's copies there deleted (the Workload copy, which owns the Job copy, or the Job copy;
    the worker's garbage collector takes what they own, down to the pods)."""
    workload_of = {job: name for name, job in _workload_jobs(fed).items()}
    seconds = []
    for freeze in (f for f in freezes if f.past_timeout):
        with fed.clusters[freeze.worker].audit_log.open(encoding="utf-8", errors="replace") as handle:
            deleted = deletes(handle, resources={"jobs", "workloads"}, client="kfed-manager")
        jobs = {life.job for life in lives if life.worker == freeze.worker and life.start < freeze.start < life.end}
        for job in jobs:
            times = [*deleted.get(job, ()), *deleted.get(workload_of.get(job, ""), ())]
            after = sorted(at for at in times if at >= freeze.start)
            if after:
                seconds.append(max(0.0, after[0] - freeze.end))
    return seconds


def _workload_jobs(fed: Federation) -> dict[str, str]:
    """The manager's Workloads (``namespace/name``) and their Jobs'."""
    return {
        f"{wl['metadata']['namespace']}/{wl['metadata']['name']}": f"{wl['metadata']['namespace']}/{ref['name']}"
        for wl in _list(fed, MANAGER, "workloads.kueue.x-k8s.io")
        for ref in wl["metadata"].get("ownerReferences") or ()
        if ref.get("kind") == "Job"
    }


def _evictions(fed: Federation) -> dict[str, list[tuple[str, float]]]:
    """Per Job (``namespace/name``), the reasons and times of the Events kfed-manager recorded on its Workload that
    take a Workload back (``Preempted``, ``Evicted…``, ``Requeued``…)."""
    job_of = _workload_jobs(fed)
    found: dict[str, list[tuple[str, float]]] = {}
    for event in _list(fed, MANAGER, "events"):
        involved = event.get("involvedObject") or {}
        job = job_of.get(f"{involved.get('namespace')}/{involved.get('name')}")
        reason = str(event.get("reason") or "")
        stamp = event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp")
        if job is None or not stamp or not (reason == "Preempted" or "Evict" in reason or "Requeue" in reason):
            continue
        found.setdefault(job, []).append((reason, parse_time(stamp).timestamp()))
    return {job: sorted(items, key=lambda item: item[1]) for job, items in found.items()}


def _finished(job: dict[str, Any]) -> str | None:
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


class Chaos:
    """The fault timetable, run in its own thread; records what it did and when."""

    def __init__(self, fed: Federation) -> None:
        self.fed = fed
        self.freezes: list[Freeze] = []
        self.node_deletions: list[tuple[str, float, set[str]]] = []
        """(worker, when, Jobs with pods on the deleted node)"""
        self.kills: list[tuple[str, float, float]] = []
        self.errors: list[str] = []

    def _kill(self, name: str, down: float) -> None:
        started = time.time()
        with self.fed.stopped_controller(name, kill=True):
            time.sleep(down)
        self.kills.append((name, started, time.time()))

    def _freeze(self, worker: str, seconds: float) -> None:
        with self.fed.paused(worker):
            started = time.time()
            time.sleep(seconds)
        self.freezes.append(Freeze(worker, started, time.time(), past_timeout=seconds > WORKER_LOST_TIMEOUT))

    def _delete_nodes(self, worker: str, count: int) -> None:
        names = [m["metadata"]["name"] for m in node_manifests(worker, self.fed.spec.shape(worker))][:count]
        for node in names:
            pods = _list(self.fed, worker, "pods", "--field-selector", f"spec.nodeName={node}")
            jobs = {f"{p['metadata']['namespace']}/{p['metadata']['name'].rsplit('-', 1)[0]}" for p in pods}
            self.node_deletions.append((worker, time.time(), jobs))
            delete_node(self.fed, worker, node)

    def timetable(self) -> list[tuple[float, str, Callable[[], None]]]:
        w1, w2 = self.fed.workers
        return [
            (10, "kill kfed-manager", lambda: self._kill("kfed-manager", 4)),
            (30, f"kill kfed-agent-{w1}", lambda: self._kill(f"kfed-agent-{w1}", 3)),
            (45, f"freeze {w2} {BLIP:.0f}s", lambda: self._freeze(w2, BLIP)),
            (65, f"delete 2 nodes of {w1}", lambda: self._delete_nodes(w1, 2)),
            (80, f"kill kfed-agent-{w2}", lambda: self._kill(f"kfed-agent-{w2}", 3)),
            (95, f"freeze {w1} {PARTITION:.0f}s", lambda: self._freeze(w1, PARTITION)),
            (140, "kill kfed-manager", lambda: self._kill("kfed-manager", 2)),
        ]

    def run(self, t0: float) -> None:
        for at, what, action in self.timetable():
            time.sleep(max(0.0, t0 + at - time.time()))
            print(f"  t={time.time() - t0:5.1f}s chaos: {what}", flush=True)
            try:
                action()
            except Exception as err:  # report and go on: the soak checks what kfed made of it
                self.errors.append(f"{what}: {err}")


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    return f"n={len(values)} p50 {statistics.median(values):.1f}s max {max(values):.1f}s"


def soak(count: int, rate: float) -> tuple[dict[str, Any], list[str]]:
    """Run the soak with ``count`` Jobs submitted at ``rate`` per second; print its figures as it goes and return
    its report and the invariants it broke, one line each (none: all kept)."""
    bins = ensure_built()
    shapes = {w: NodeShape(count=8, cpu="16", memory="64Gi") for w in ("worker-1", "worker-2")}
    spec = FederationSpec(
        workers=2,
        node_shapes=shapes,
        controllers=True,
        from_charts=True,
        worker_lost_timeout=WORKER_LOST_TIMEOUT,
        dispatch_timeout=60,
    )
    with tempfile.TemporaryDirectory(prefix="kfed-soak-") as tmp, running(Path(tmp), bins, spec) as fed:
        _queues(fed)
        jobs = _jobs(count)
        chaos = Chaos(fed)
        quota = QuotaSamples()
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(3):
                queues = {q["metadata"]["name"]: q for q in _list(fed, MANAGER, "clusterqueues.kueue.x-k8s.io")}
                quota.add(_list(fed, MANAGER, "workloads.kueue.x-k8s.io"), queues)

        t0 = time.time()

        def submit_all() -> None:
            batch = max(1, int(rate * 2))
            for start in range(0, count, batch):
                time.sleep(max(0.0, t0 + start / rate - time.time()))
                listed = {"apiVersion": "v1", "kind": "List", "items": jobs[start : start + batch]}
                fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(listed))
            print(f"  t={time.time() - t0:5.1f}s all {count} Jobs submitted", flush=True)

        # The chaos runs in the main thread: the processes it restarts die with the thread that started them
        # (PR_SET_PDEATHSIG), so that thread must outlive the soak.
        submitter = threading.Thread(target=submit_all, daemon=True)
        sampler = threading.Thread(target=sample, daemon=True)
        submitter.start()
        sampler.start()
        chaos.run(t0)
        submitter.join()
        outcomes: dict[str, str] = {}
        deadline = time.time() + FINISH_WITHIN
        while time.time() < deadline:
            outcomes = {
                j["metadata"]["name"]: state
                for j in _list(fed, MANAGER, "jobs", "-l", f"kueue.x-k8s.io/queue-name={QUEUE}")
                if (state := _finished(j)) is not None
            }
            if len(outcomes) >= count:
                break
            if int(time.time() - t0) % 30 < 3:
                print(f"  t={time.time() - t0:5.1f}s {len(outcomes)}/{count} Jobs finished", flush=True)
            time.sleep(3)
        all_done = time.time() - t0
        stop.set()
        sampler.join()
        leftovers: list[str] = []
        deadline = time.time() + 120
        while time.time() < deadline:
            leftovers = [
                f"{w}:{kind}/{obj['metadata']['name']}"
                for w in fed.workers
                for kind in ("jobs", "workloads.kueue.x-k8s.io")
                for obj in _list(fed, w, kind, "-l", "kueue.x-k8s.io/multikueue-origin")
            ]
            if not leftovers:
                break
            time.sleep(3)
        dead = [r.name for r in fed.controller_records if not r.alive()]
        refused = fed.forbidden_in_logs()
        tracebacks = sum(
            (fed.directory / "logs" / f"{r.name}.log").read_text(errors="replace").count("Traceback")
            for r in fed.controller_records
        )
        lives: list[PodLife] = []
        for worker in fed.workers:
            with fed.clusters[worker].audit_log.open(encoding="utf-8", errors="replace") as handle:
                lives += pod_lives(handle, worker=worker)
        clipped, stale = clip_to_partitions(lives, chaos.freezes)
        copy_deleted = _stale_copies_deleted(fed, lives, chaos.freezes)
        doubles = overlaps(clipped)
        finished_at = job_times_in(fed.clusters[MANAGER].audit_log).finished
        recovery = {
            "partition": [
                t
                for f in chaos.freezes
                if f.past_timeout
                for t in recovered_jobs(
                    lives, worker=f.worker, at=f.start, finished=finished_at, elsewhere=True
                ).values()
            ],
            "node deletion": [
                t
                for worker, at, jobs in chaos.node_deletions
                for t in recovered_jobs(lives, worker=worker, at=at, finished=finished_at, jobs=jobs).values()
            ],
        }
        moved = {
            job: (f.start, t)
            for f in chaos.freezes
            if not f.past_timeout
            for job, t in recovered_jobs(
                lives, worker=f.worker, at=f.start, finished=finished_at, elsewhere=True
            ).items()
        }
        evictions = _evictions(fed)
        # A Job preempted after the blip (a higher-priority one took its quota) moves as it should: not the blip.
        preempted_after = {
            job
            for job, (start, _) in moved.items()
            if any(r == "Preempted" and at >= start for r, at in evictions.get(job, ()))
        }
        moved_by_blip = [t for job, (_, t) in moved.items() if job not in preempted_after]
        for job in sorted(moved):
            reasons = ", ".join(f"{r} at t={at - t0:.1f}s" for r, at in evictions.get(job, ())) or "none"
            print(f"  ran elsewhere after a blip: {job} (manager Workload Events: {reasons})", flush=True)
    failed = sum(1 for state in outcomes.values() if state == "Failed")
    made_to_fail = [j["metadata"]["name"] for j in jobs if MADE_TO_FAIL_LABEL in j["metadata"]["labels"]]
    completed_anyway = [name for name in made_to_fail if outcomes.get(name) == "Complete"]
    report = {
        "jobs": count,
        "finished": len(outcomes),
        "failed": failed,
        "made_to_fail": len(made_to_fail),
        "made_to_fail_failed": sum(1 for name in made_to_fail if outcomes.get(name) == "Failed"),
        "seconds_to_all_finished": round(all_done, 1),
        "ran_on_two_workers_at_once": len(doubles),
        "stale_pods_after_partition": len(stale),
        "stale_pod_seconds_after_return_max": round(max(stale), 1) if stale else 0.0,
        "stale_copies_deleted_seconds_after_return": sorted(round(t, 1) for t in copy_deleted),
        "leftover_copies": len(leftovers),
        "quota_samples": quota.samples,
        "quota_violations": len(quota.violations),
        "quota_peak_share": round(quota.peak_share, 3),
        "dead_processes": dead,
        "tracebacks_in_logs": tracebacks,
        "chaos_errors": chaos.errors,
        "recovery_seconds": {k: sorted(round(v, 1) for v in vs) for k, vs in recovery.items()},
        "jobs_moved_by_a_blip": len(moved_by_blip),
        "jobs_preempted_after_a_blip": len(preempted_after),
        "jobs_with_pods_on_deleted_nodes": sum(len(jobs) for _, _, jobs in chaos.node_deletions),
    }
    print(
        f"Jobs: {count} submitted, {len(outcomes)} finished ({failed} Failed, {report['made_to_fail_failed']} of the "
        f"{len(made_to_fail)} made to fail) in {all_done:.0f}s"
    )
    print(
        f"ran on two workers at once: {len(doubles)}; stale pods on a partitioned worker: {len(stale)}, "
        f"gone at most {max(stale, default=0.0):.1f}s after it returned (their Job copies deleted by kfed-manager "
        f"{_summary(copy_deleted)} after)"
    )
    print(f"copies left on workers after everything finished: {len(leftovers)}")
    print(f"quota: {quota.samples} samples, {len(quota.violations)} over quota, peak {quota.peak_share:.0%}")
    print(f"dead kfed processes at the end: {dead or 'none'}; Tracebacks in logs: {tracebacks}")
    for kind, values in recovery.items():
        print(f"recovery after {kind}: {_summary(values)}")
    print(f"Jobs with pods on the deleted nodes: {report['jobs_with_pods_on_deleted_nodes']}")
    print(
        f"Jobs moved by a blip shorter than the worker-lost timeout: {len(moved_by_blip)} "
        f"(besides {len(preempted_after)} preempted after it, which moved as they should)"
    )
    broken = [f"{count - len(outcomes)} of {count} Jobs never finished"] if len(outcomes) < count else []
    for a, b in doubles[:5]:
        first, second = f"{a.pod} on {a.worker} {a.start:.1f}-{a.end:.1f}", f"{b.pod} on {b.worker} {b.start:.1f}"
        broken.append(f"two at once: {first}, {second}-{b.end:.1f}")
    broken += [f"made to fail, yet Complete on the manager: {name}" for name in completed_anyway[:5]]
    broken += [f"over quota: {line}" for line in quota.violations[:5]]
    broken += [f"left on a worker: {line}" for line in leftovers[:5]]
    broken += [f"chaos step failed: {line}" for line in chaos.errors]
    broken += [f"kfed process dead at the end: {name}" for name in dead]
    broken += [f"Traceback in kfed's logs ({tracebacks})"] if tracebacks else []
    broken += (
        [f"{len(moved_by_blip)} Jobs moved by a blip shorter than the worker-lost timeout"] if moved_by_blip else []
    )
    broken += [f"refused by the charts' RBAC: {line}" for line in refused[:5]]
    return report, broken


def main() -> None:
    report, broken = soak(int(os.environ.get("KFED_SOAK_JOBS", "500")), float(os.environ.get("KFED_SOAK_RATE", "4")))
    Path("soak.json").write_text(json.dumps(report, indent=2))
    print("results: soak.json")
    if broken:
        for line in broken:
            print(f"  {line}")
        print("INVARIANT BROKEN", file=sys.stderr)
        raise SystemExit(1)
