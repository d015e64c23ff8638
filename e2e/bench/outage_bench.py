"""Worker outage: how long Jobs bound for the healthy worker wait while another worker's apiserver is frozen.

A manager and two workers (real apiservers, kwok nodes). worker-1's apiserver is frozen (SIGSTOP) for
``OUTAGE_SECONDS`` (the worker-lost timeout stays at kfed's default, 15 min, so nothing is requeued); meanwhile a
one-pod Job is submitted every ``INTERVAL`` seconds. Measured per Job: seconds from its creation to its Workload's
``Admitted`` condition on the manager (kfed marks it when the worker admitted the copy), and which worker ran it;
and how long after the freeze the manager showed worker-1 ``Active=False``. Environment: ``KFED_OUTAGE_SECONDS``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.queues import apply_sample_queues, job_manifest
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.toolchain import ensure_built

INTERVAL = 5.0
NAMESPACE = "default"


def _seconds(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _workloads(fed: Federation) -> list[dict[str, Any]]:
    out = fed.kubectl(MANAGER, "get", "workloads.kueue.x-k8s.io", "-n", NAMESPACE, "-o", "json").stdout
    return list(json.loads(out)["items"])


def _admitted_after(workload: dict[str, Any]) -> float | None:
    for condition in (workload.get("status") or {}).get("conditions") or ():
        if condition["type"] == "Admitted" and condition["status"] == "True":
            return _seconds(condition["lastTransitionTime"]) - _seconds(workload["metadata"]["creationTimestamp"])
    return None


def _worker_1_active(fed: Federation) -> str:
    out = fed.kubectl(MANAGER, "get", "multikueuecluster", "worker-1", "-o", "json").stdout
    for condition in (json.loads(out).get("status") or {}).get("conditions") or ():
        if condition["type"] == "Active":
            return str(condition["status"])
    return "?"


def main() -> None:
    outage = float(os.environ.get("KFED_OUTAGE_SECONDS", "150"))
    bins = ensure_built()
    shapes = {w: NodeShape(count=8, cpu="16", memory="64Gi") for w in ("worker-1", "worker-2")}
    spec = FederationSpec(workers=2, node_shapes=shapes, job_seconds=2, controllers=True)
    with tempfile.TemporaryDirectory(prefix="kfed-bench-") as tmp, running(Path(tmp), bins, spec) as fed:
        apply_sample_queues(fed, namespace=NAMESPACE)
        submitted = 0
        detected: float | None = None
        with fed.paused("worker-1"):
            frozen_at = time.monotonic()
            next_submit = frozen_at
            while time.monotonic() - frozen_at < outage:
                now = time.monotonic()
                if now >= next_submit:
                    manifest = job_manifest(f"o-{submitted:03d}", namespace=NAMESPACE, cpu="1", seconds=2)
                    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
                    submitted += 1
                    next_submit += INTERVAL
                if detected is None and _worker_1_active(fed) == "False":
                    detected = time.monotonic() - frozen_at
                time.sleep(0.2)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            workloads = _workloads(fed)
            if sum(1 for w in workloads if _admitted_after(w) is not None) >= submitted:
                break
            time.sleep(1)
        workloads = _workloads(fed)
        waits: dict[str, list[float]] = {}
        for wl in workloads:
            waited = _admitted_after(wl)
            if waited is not None:
                waits.setdefault((wl.get("status") or {}).get("clusterName") or "none", []).append(waited)
        print(f"worker-1 apiserver frozen for {outage:.0f}s; {submitted} Jobs submitted, one every {INTERVAL:.0f}s")
        print(f"worker-1 shown Active=False after: {detected:.1f}s" if detected is not None else "never shown inactive")
        for worker, times in sorted(waits.items()):
            print(
                f"ran on {worker}: {len(times)} Jobs; submit -> Admitted on the manager (1 s resolution): "
                f"p50 {statistics.median(times):.0f}s, max {max(times):.0f}s"
            )
