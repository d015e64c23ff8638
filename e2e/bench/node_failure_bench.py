"""Node failures under one TAS workload on the rig: time from the failure being observable to every replacement
pod ungated, bound and running, for 1, 3 and 8 failed nodes at once.

A manager and one worker of 32 kwok nodes (2 blocks x 2 racks x 8 hosts, 8 cpu each). Each round submits a Job of
16 pods of 4 cpu requiring one block (so it uses 8 hosts, two pods each), waits until it runs, then fails N of
its nodes at once -- deleting them, or tainting them NoExecute (untolerated) -- and measures from the moment the
last kubectl call returned (the failure is in the API) until 16 live pods of the Job run on healthy nodes. Then
the Job is deleted and the nodes restored. ``KFED_NODE_FAILURE_ROUNDS`` rounds (default 3) per N and kind;
``KFED_NODE_FAILURE_KINDS`` (default ``delete,taint``) picks the kinds; printed: p50 and max per N and kind.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.queues import TAS_QUEUE, apply_tas_queues
from e2e.rig import node_faults
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import BLOCK_LABEL, NodeShape
from e2e.toolchain import ensure_built

WORKER = "worker-1"
PODS = 16
TAINT = "example.com/broken"


def _pods(fed: Federation, job: str) -> list[dict[str, Any]]:
    out = fed.kubectl(WORKER, "get", "pods", "-n", "default", "-l", f"job-name={job}", "-o", "json").stdout
    return [
        pod
        for pod in json.loads(out)["items"]
        if pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")
    ]


def _running_on(fed: Federation, job: str) -> dict[str, str] | None:
    pods = _pods(fed, job)
    if len(pods) != PODS or any(p["status"].get("phase") != "Running" or not p["spec"].get("nodeName") for p in pods):
        return None
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}


def _wait(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def _submit(fed: Federation, name: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": TAS_QUEUE}},
        "spec": {
            "parallelism": PODS,
            "completions": PODS,
            "backoffLimit": 100,
            "template": {
                "metadata": {
                    "annotations": {
                        "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
                        "kueue.x-k8s.io/podset-required-topology": BLOCK_LABEL,
                    }
                },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
                },
            },
        },
    }
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(job))


def _round(fed: Federation, name: str, failed: int, kind: str) -> float:
    _submit(fed, name)
    before = _wait(lambda: _running_on(fed, name), 120, f"{name} running")
    victims = sorted(set(before.values()))[:failed]
    try:
        for node in victims:
            if kind == "delete":
                node_faults.delete_node(fed, WORKER, node)
            else:
                node_faults.taint(fed, WORKER, node, TAINT)
        start = time.monotonic()
        _wait(
            lambda: (nodes := _running_on(fed, name)) is not None and not set(nodes.values()) & set(victims),
            180,
            f"{name}: pods of {failed} failed nodes replaced",
        )
        return time.monotonic() - start
    finally:
        fed.kubectl(MANAGER, "delete", "job", name, "-n", "default", "--wait=false")
        _wait(lambda: not _pods(fed, name), 120, f"{name} gone")
        for node in victims:
            if kind == "delete":
                node_faults.restore_node(fed, WORKER, node)
            else:
                node_faults.untaint(fed, WORKER, node, TAINT)
        for node in victims:
            _wait(lambda n=node: node_faults.node_ready(fed, WORKER, n), 60, f"{node} Ready")


def main() -> None:
    rounds = int(os.environ.get("KFED_NODE_FAILURE_ROUNDS", "3"))
    spec = FederationSpec(
        workers=1,
        node_shapes={WORKER: NodeShape(count=32, hosts_per_rack=8, racks_per_block=2)},
        controllers=True,
        agent_args=("--node-failure-delay", "5"),
    )
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="kfed-bench-nf-") as tmp, running(Path(tmp), ensure_built(), spec) as fed:
        apply_tas_queues(fed)
        serial = 0
        for kind in os.environ.get("KFED_NODE_FAILURE_KINDS", "delete,taint").split(","):
            for failed in (1, 3, 8):
                seconds = []
                for _ in range(rounds):
                    serial += 1
                    seconds.append(_round(fed, f"nf-{serial}", failed, kind))
                results[f"{kind} {failed}"] = {
                    "p50_s": round(statistics.median(seconds), 2),
                    "max_s": round(max(seconds), 2),
                    "samples": [round(s, 2) for s in seconds],
                }
                print(f"{kind:6} {failed} node(s): {results[f'{kind} {failed}']}", flush=True)
    print(json.dumps({"node_failure_replacement": results}, indent=2))
