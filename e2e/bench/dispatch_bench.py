"""Dispatch throughput on a real local federation: how fast kfed takes a burst of Jobs from kubectl to a worker.

A manager and two workers (real apiservers, kwok nodes); ``JOBS`` one-pod Jobs created in one kubectl call on the
manager, every one fitting somewhere. Measured: Workloads reserved per second on the manager, Workloads admitted
per second (the worker admitted the copy), seconds from the first create to the last Complete, and API writes per
Job counted from the apiservers' audit logs. Kueue's own MultiKueue benchmark (1 manager + 3 workers) reports about
38 workloads/s at 300 QPS per worker client; kfed uses the same 300 QPS default.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.queues import apply_sample_queues, job_manifest
from e2e.rig.audit import writes_in
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.toolchain import ensure_built

JOBS = 300
NAMESPACE = "default"


def _workloads(fed: Federation) -> list[dict[str, Any]]:
    out = fed.kubectl(MANAGER, "get", "workloads.kueue.x-k8s.io", "-n", NAMESPACE, "-o", "json", timeout=300).stdout
    return list(json.loads(out)["items"])


def _count(workloads: list[dict[str, Any]], condition: str) -> int:
    return sum(
        1
        for w in workloads
        if any(c["type"] == condition and c["status"] == "True" for c in (w.get("status") or {}).get("conditions", ()))
    )


def main() -> None:
    bins = ensure_built()
    shapes = {w: NodeShape(count=40, cpu="16", memory="64Gi") for w in ("worker-1", "worker-2")}
    spec = FederationSpec(workers=2, node_shapes=shapes, job_seconds=2, controllers=True)
    with tempfile.TemporaryDirectory(prefix="kfed-bench-") as tmp, running(Path(tmp), bins, spec) as fed:
        apply_sample_queues(fed, namespace=NAMESPACE)
        manifests = [job_manifest(f"b-{i:04d}", namespace=NAMESPACE, cpu="1", seconds=2) for i in range(JOBS)]
        started = time.monotonic()
        fed.kubectl(
            MANAGER,
            "create",
            "-f",
            "-",
            timeout=300,
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}),
        )
        created = time.monotonic() - started
        milestones: dict[str, float] = {}
        while len(milestones) < 3 and time.monotonic() - started < 600:
            workloads = _workloads(fed)
            for name, condition in (("reserved", "QuotaReserved"), ("admitted", "Admitted"), ("finished", "Finished")):
                if name not in milestones and len(workloads) == JOBS and _count(workloads, condition) == JOBS:
                    milestones[name] = time.monotonic() - started
            time.sleep(0.5)
        print(f"{JOBS} one-pod Jobs, 1 manager + 2 workers (40 nodes x 16 cpu each), created in {created:.1f}s")
        for name in ("reserved", "admitted", "finished"):
            if name in milestones:
                print(f"  all {name:8} after {milestones[name]:6.1f}s: {JOBS / milestones[name]:6.1f} workloads/s")
            else:
                print(f"  not all {name} within 600 s")
        cpu: dict[str, float] = {}
        for record in [r for c in fed.clusters.values() for r in c.records] + fed.controller_records:
            kind = record.name.split("/")[-1].removeprefix("kfed-agent-").split("-worker")[0]
            kind = "kfed-agent" if record.name.startswith("kfed-agent") else kind
            cpu[kind] = cpu.get(kind, 0.0) + (record.cpu_seconds() or 0.0)
        total_cpu = sum(cpu.values())
        print(f"  CPU seconds over the run ({total_cpu:.0f} s in all on this machine's cores):")
        for kind, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]):
            print(f"    {kind:24} {seconds:6.1f} s  ({1000 * seconds / JOBS:.0f} ms per Job)")
        for cluster in fed.clusters:
            counts = writes_in(fed.clusters[cluster].audit_log)
            for client in ("kfed-manager", "kfed-agent"):
                total = sum(v for (c, _, _), v in counts.items() if c == client)
                if total:
                    print(f"  API writes by {client:12} on {cluster:8}: {total:5} ({total / JOBS:.1f} per Job)")
