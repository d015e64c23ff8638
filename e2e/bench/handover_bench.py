"""kfed-manager leader hand-over: how long after the leader dies a standby replica leads.

A rig from the charts (`--from-charts`: the manager with its chart's ServiceAccount token) and one worker; two
kfed-manager replicas as the chart deploys them (leader election on the Lease kfed-manager, Kueue's 15 s lease,
10 s renew deadline, 2 s retry period). ``ROUNDS`` times: the leader is killed and the seconds until the Lease
names the other replica are measured (polled every 0.1 s); then a new replica replaces the dead one. Killed with
SIGKILL (a crash or a lost node: the Lease must expire) and with SIGTERM (a rolling update: the leader releases
the Lease on its way out). Environment: ``KFED_HANDOVER_ROUNDS`` (default 3).
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from e2e.rig.controllers import lease_holder, start_manager_replica
from e2e.rig.federation import Federation, FederationSpec, running
from e2e.rig.processes import ProcessRecord, stop_records
from e2e.toolchain import ensure_built


def _holder_pid(fed: Federation) -> int | None:
    holder = lease_holder(fed)
    return int(holder.rsplit("_", 1)[1]) if "_" in holder else None


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
        results: dict[str, list[float]] = {}
        for how in (signal.SIGKILL, signal.SIGTERM):
            for _ in range(rounds):
                results.setdefault(how.name, []).append(_handover(fed, replicas, how))
                another()
        for name, times in results.items():
            shown = ", ".join(f"{t:.1f}" for t in times)
            print(f"hand-over after {name} of the leader: median {statistics.median(times):.1f}s ({shown})")
