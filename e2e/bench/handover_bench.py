"""kfed-manager leader hand-over: how long after the leader dies a standby replica leads.

A rig from the charts (`--from-charts`: the manager with its chart's ServiceAccount token) and one worker; two
kfed-manager replicas as the chart deploys them (leader election on the Lease kfed-manager, Kueue's 15 s lease,
10 s renew deadline, 2 s retry period). ``ROUNDS`` times: the leader is killed and the seconds until the Lease
names the other replica are measured (polled every 0.1 s); then a new replica replaces the dead one. Killed with
SIGKILL (a crash or a lost node: the Lease must expire) and with SIGTERM (a rolling update: the leader releases
the Lease on its way out). Environment: ``KFED_HANDOVER_ROUNDS`` (default 3).

Each round also times what users see of it: ``JOBS`` one-pod Jobs run on the worker when the leader is killed and
finish there during the hand-over; the seconds from the new leader taking the Lease until every one of them shows
``Complete`` on the manager are printed too (their copies finished meanwhile: only the new leader's sync of each
Workload, and its look at the worker it connects to, stand between).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from e2e.queues import apply_sample_queues, job_manifest
from e2e.rig.controllers import lease_holder, start_manager_replica
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.processes import ProcessRecord, stop_records
from e2e.toolchain import ensure_built


def _holder_pid(fed: Federation) -> int | None:
    holder = lease_holder(fed)
    return int(holder.rsplit("_", 1)[1]) if "_" in holder else None


JOBS = 5
JOB_SECONDS = 4


def _manager_jobs(fed: Federation, names: list[str]) -> list[dict[str, object]]:
    listed = json.loads(fed.kubectl(MANAGER, "get", "jobs", "-n", "default", "-o", "json").stdout)["items"]
    return [job for job in listed if job["metadata"]["name"] in names]


def _wait_jobs(fed: Federation, names: list[str], state: str, timeout: float = 120) -> None:
    """Until every Job of ``names`` runs (``state`` "active": pods mirrored on the manager) or is ``Complete``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = _manager_jobs(fed, names)
        if len(jobs) == len(names) and all(_in_state(job, state) for job in jobs):
            return
        time.sleep(0.2)
    raise RuntimeError(f"Jobs {names} not all {state} within {timeout:.0f}s")


def _in_state(job: dict[str, object], state: str) -> bool:
    status = job.get("status") or {}
    assert isinstance(status, dict)
    if state == "active":
        return bool(status.get("active")) or _in_state(job, "Complete")
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in status.get("conditions") or ())


def _submit(fed: Federation, prefix: str) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(JOBS)]
    manifests = [job_manifest(name, namespace="default", cpu="1", seconds=JOB_SECONDS) for name in names]
    fed.kubectl(
        MANAGER, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    )
    return names


def _handover(fed: Federation, replicas: list[ProcessRecord], how: signal.Signals, timeout: float = 60) -> float:
    leader_pid = _holder_pid(fed)
    leader = next(r for r in replicas if r.pid == leader_pid)
    started = time.monotonic()
    os.kill(leader.pid, how)
    while time.monotonic() - started < timeout:
        pid = _holder_pid(fed)
        if pid is not None and pid != leader.pid and any(r.pid == pid for r in replicas):
            seconds = time.monotonic() - started
            stop_records([leader])
            replicas.remove(leader)
            return seconds
        time.sleep(0.1)
    raise RuntimeError(f"no hand-over within {timeout:.0f}s after {how.name}")


def main() -> None:
    rounds = int(os.environ.get("KFED_HANDOVER_ROUNDS", "3"))
    spec = FederationSpec(workers=1, controllers=True, from_charts=True)
    with tempfile.TemporaryDirectory(prefix="kfed-bench-") as tmp, running(Path(tmp), ensure_built(), spec) as fed:
        logs = fed.directory / "logs"
        replicas = [next(r for r in fed.controller_records if r.name == "kfed-manager")]
        count = 0

        def another() -> None:
            nonlocal count
            count += 1
            record = start_manager_replica(fed, f"kfed-manager-{count}", logs / f"kfed-manager-{count}.log")
            fed.controller_records.append(record)
            replicas.append(record)

        another()
        apply_sample_queues(fed)
        results: dict[str, list[float]] = {}
        finishes: dict[str, list[float]] = {}
        for how in (signal.SIGKILL, signal.SIGTERM):
            for round_ in range(rounds):
                names = _submit(fed, f"ho-{how.name.lower()}-{round_}")
                _wait_jobs(fed, names, "active")
                results.setdefault(how.name, []).append(_handover(fed, replicas, how))
                led = time.monotonic()
                _wait_jobs(fed, names, "Complete")
                finishes.setdefault(how.name, []).append(time.monotonic() - led)
                another()
        for name, times in results.items():
            shown = ", ".join(f"{t:.1f}" for t in times)
            print(f"hand-over after {name} of the leader: median {statistics.median(times):.1f}s ({shown})")
            done = finishes[name]
            print(
                f"  {JOBS} Jobs that ran on the worker across it: all Complete on the manager "
                f"{statistics.median(done):.1f}s (median) after the new leader took the Lease "
                f"({', '.join(f'{t:.1f}' for t in done)})"
            )
