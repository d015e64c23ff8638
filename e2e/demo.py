"""`make demo`: a local federation (manager + two workers of different sizes), 20 Jobs submitted with kubectl on
the manager, live progress, then a summary of where each Job ran and how long it took.

KEEP=1 leaves the rig running and prints the kubeconfigs to explore with kubectl; otherwise it is torn down.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from e2e.queues import apply_sample_queues, job_manifest
from e2e.rig.audit import created_names, writes_in
from e2e.rig.federation import MANAGER, Federation, FederationSpec
from e2e.rig.nodes import NodeShape
from e2e.rig.ports import free_port
from e2e.toolchain import ensure_built

NAMESPACE = "default"
JOBS = 20
# worker-1: 4 nodes x 8 cpu; worker-2: 8 nodes x 8 cpu. The manager's global quota is the sum.
SHAPES = {"worker-1": NodeShape(count=4), "worker-2": NodeShape(count=8)}


def _ts(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _jobs(fed: Federation) -> dict[str, dict[str, Any]]:
    out = fed.kubectl(MANAGER, "get", "jobs", "-n", NAMESPACE, "-o", "json").stdout
    return {j["metadata"]["name"]: j for j in json.loads(out)["items"]}


def _workloads(fed: Federation) -> dict[str, dict[str, Any]]:
    out = fed.kubectl(MANAGER, "get", "workloads.kueue.x-k8s.io", "-n", NAMESPACE, "-o", "json").stdout
    by_job: dict[str, dict[str, Any]] = {}
    for wl in json.loads(out)["items"]:
        for ref in wl["metadata"].get("ownerReferences") or ():
            by_job[ref["name"]] = wl
    return by_job


def _state(job: dict[str, Any], workload: dict[str, Any] | None) -> str:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    if (job.get("status") or {}).get("active"):
        return "Running"
    status = (workload or {}).get("status") or {}
    if status.get("clusterName"):
        return "Admitted"
    if status.get("nominatedClusterNames"):
        return "Dispatched"
    return "Pending"


def run_demo(directory: Path) -> int:
    bins = ensure_built()
    keep = os.environ.get("KEEP") == "1"
    dashboard = free_port() if keep else None  # KEEP=1: the live dashboard, to watch the federation afterwards
    spec = FederationSpec(
        workers=2,
        node_shapes=SHAPES,
        job_seconds=8,
        controllers=True,
        manager_args=(f"--dashboard-port={dashboard}",) if dashboard else (),
    )
    fed = Federation(directory, bins, spec, die_with_parent=False)
    print(f"starting a local federation in {directory} ...", flush=True)
    print(f"federation up in {fed.up():.1f}s (manager + worker-1 with 32 cpu + worker-2 with 64 cpu)", flush=True)
    if dashboard:
        print(f"dashboard (live, read-only): http://127.0.0.1:{dashboard}/", flush=True)
    try:
        apply_sample_queues(fed, namespace=NAMESPACE)
        sizes = [(2, 1), (4, 2), (8, 2), (6, 1), (16, 2)]
        manifests = [
            job_manifest(
                f"demo-{i:02d}",
                namespace=NAMESPACE,
                cpu=str(sizes[i % 5][0] // sizes[i % 5][1]),
                parallelism=sizes[i % 5][1],
                seconds=5 + (i % 4) * 3,
            )
            for i in range(JOBS)
        ]
        print(f"submitting {JOBS} Jobs with kubectl on the manager ...", flush=True)
        fed.kubectl(
            MANAGER, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        )
        return _follow(fed, keep=keep)
    finally:
        if keep:
            print("\nKEEP=1: the federation keeps running. Explore it with kubectl:")
            for name in fed.clusters:
                print(f"  {bins / 'kubectl'} --kubeconfig {fed.kubeconfig(name)} get jobs,workloads -A")
            print(f"  the dashboard: http://127.0.0.1:{dashboard}/")
            print(f"stop it with: python -m e2e.rig down --dir {directory}")
        else:
            fed.down()


def _follow(fed: Federation, *, keep: bool) -> int:
    deadline = time.monotonic() + 600
    last = ""
    while True:
        jobs, workloads = _jobs(fed), _workloads(fed)
        states = Counter(_state(jobs[n], workloads.get(n)) for n in jobs)
        line = "  " + "  ".join(
            f"{k}: {states[k]}" for k in ("Pending", "Dispatched", "Admitted", "Running", "Complete", "Failed")
        )
        if line != last:
            print(f"{time.strftime('%H:%M:%S')}{line}", flush=True)
            last = line
        if states["Complete"] + states["Failed"] == len(jobs) == JOBS:
            break
        if time.monotonic() > deadline:
            print("gave up waiting after 10 minutes", file=sys.stderr)
            return 1
        time.sleep(1)
    return _summary(fed, jobs, workloads)


def _summary(fed: Federation, jobs: dict[str, dict[str, Any]], workloads: dict[str, dict[str, Any]]) -> int:
    print(f"\n{'job':10} {'worker':9} {'state':9} {'pods':>4} {'to running':>10} {'to complete':>11}")
    to_running: list[float] = []
    to_complete: list[float] = []
    ok = True
    for name in sorted(jobs):
        job, wl = jobs[name], workloads.get(name) or {}
        status = job.get("status") or {}
        created = _ts(job["metadata"]["creationTimestamp"])
        started, completed = _ts(status.get("startTime")), _ts(status.get("completionTime"))
        run_s = (started - created).total_seconds() if started and created else None
        done_s = (completed - created).total_seconds() if completed and created else None
        if run_s is not None:
            to_running.append(run_s)
        if done_s is not None:
            to_complete.append(done_s)
        state = _state(job, wl)
        ok = ok and state == "Complete" and status.get("succeeded") == job["spec"]["completions"]
        print(
            f"{name:10} {(wl.get('status') or {}).get('clusterName', '-'):9} {state:9} "
            f"{status.get('succeeded', 0):>4} {run_s if run_s is not None else '-':>10} "
            f"{done_s if done_s is not None else '-':>11}"
        )
    created_on: dict[str, list[str]] = {}
    for worker in fed.workers:
        for key in created_names(fed.clusters[worker].audit_log, resource="jobs", client="kfed-manager"):
            created_on.setdefault(key, []).append(worker)
    twice = {k: v for k, v in created_on.items() if len(v) != 1}
    print(f"\nJobs created on workers (audit logs): {len(created_on)}; on more than one worker: {len(twice)}")
    if to_running:
        print(
            f"submit -> running:  median {sorted(to_running)[len(to_running) // 2]:.0f}s, "
            f"worst {max(to_running):.0f}s (API timestamps, 1 s resolution)"
        )
    if to_complete:
        print(
            f"submit -> complete: median {sorted(to_complete)[len(to_complete) // 2]:.0f}s, "
            f"worst {max(to_complete):.0f}s"
        )
    for cluster in fed.clusters:
        counts = writes_in(fed.clusters[cluster].audit_log)
        for client in ("kfed-manager", "kfed-agent"):
            total = sum(v for (c, _, _), v in counts.items() if c == client)
            if total:
                print(f"API writes by {client} on {cluster}: {total} ({total / JOBS:.1f} per Job)")
    if twice or not ok:
        print("DEMO FAILED: a Job did not complete, or ran on more than one worker", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    if os.environ.get("KEEP") == "1":
        directory = Path(os.environ.get("KFED_DEMO_DIR", "rig-demo")).resolve()
        return run_demo(directory)
    with tempfile.TemporaryDirectory(prefix="kfed-demo-") as tmp:
        return run_demo(Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
