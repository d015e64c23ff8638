"""Two kfed-manager replicas, as the chart deploys them (issue 12, HA): the standby answers /readyz 200 while the
other leads; when the leader is killed (SIGKILL: no chance to release its Lease) the standby takes over within the
lease duration plus one retry period, and every Job submitted before, during and after the hand-over runs exactly
once (one Job created on one worker, per the workers' audit logs) and completes.

The second replica runs the rendered Deployment's command, args, env and token like the first; only its ports
differ (pods have a network each, local processes share one). Afterwards the federation is as it was: a fresh
`kfed-manager` (same command, same log) leads again and the standby is stopped (SIGTERM), leaving nothing in its
TMPDIR: the visibility API's serving certificate and key it wrote there go with it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from e2e.queues import CLUSTER_QUEUE
from e2e.rig.controllers import _wait_ready, lease_holder, scratch_dir, start_manager_replica
from e2e.rig.federation import Federation
from e2e.rig.ports import free_port
from e2e.rig.processes import ProcessRecord, start_process, stop_records
from e2e.scenarios.helpers import created_names_on_workers, submit, visibility_get, wait_complete
from e2e.waiting import wait_for
from federation.kube.leader import JITTER_FACTOR

pytestmark = pytest.mark.e2e

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0
"""kfed's leader election, Kueue's defaults (federation/kube/leader.py)."""


def _events(log: Path, event: str) -> list[dict[str, object]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == event:
            found.append(record)
    return found


def test_killing_the_leading_manager_hands_over_to_the_standby_without_duplicates(
    federation: Federation, tmp_path: Path
) -> None:
    fed = federation
    leader = next(r for r in fed.controller_records if r.name == "kfed-manager")
    standby_log = tmp_path / "kfed-manager-standby.log"
    standby_visibility = free_port()
    standby = start_manager_replica(  # ready (200) while the other leads
        fed, "kfed-manager-standby", standby_log, visibility_port=standby_visibility
    )
    replacement: ProcessRecord | None = None
    jobs = [f"ha-before-{i}" for i in range(3)]
    try:
        assert not _events(standby_log, "leader.started_leading"), "the standby took the Lease from a live leader"
        # A standby has no caches but still answers Kueue's visibility API (the Service sends it requests too).
        code, summary = visibility_get(
            fed,
            f"/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{CLUSTER_QUEUE}/pendingworkloads",
            port=standby_visibility,
            cert="front-proxy-client",
            headers={"X-Remote-User": "kfed-rig-admin", "X-Remote-Group": "system:masters"},
        )
        assert code == 200, summary
        assert summary["kind"] == "PendingWorkloadsSummary"
        for job in jobs:
            submit(fed, job, cpu="1", seconds=6)
        wait_for(
            lambda: [j for j in jobs if created_names_on_workers(fed, j)],
            until=lambda dispatched: len(dispatched) == len(jobs),
            timeout=60,
            what="the first Jobs to be dispatched by the leader",
        )
        killed = time.time()
        os.kill(leader.pid, signal.SIGKILL)
        during = [f"ha-during-{i}" for i in range(2)]
        for job in during:  # while no replica leads
            submit(fed, job, cpu="1", seconds=1)
        # As in client-go, the standby counts the lease from when it saw the last renewal (up to one jittered retry
        # period after it, which may be after the kill), and looks again every jittered retry period once it expired:
        # at most the lease duration and two jittered retry periods after the kill, and a second for the API calls.
        bound = LEASE_DURATION + 2 * RETRY_PERIOD * JITTER_FACTOR + 1
        started = wait_for(
            lambda: _events(standby_log, "leader.started_leading"),
            until=bool,
            timeout=bound + RETRY_PERIOD,
            interval=0.1,
            what="the standby to take the Lease over",
        )
        # timed by the standby's own log line, not by when this test (busy submitting Jobs) saw it
        handover = dt.datetime.fromisoformat(str(started[0]["ts"]).replace("Z", "+00:00")).timestamp() - killed
        print(f"kfed-manager hand-over after SIGKILL of the leader: {handover:.1f}s")
        assert handover <= bound, handover
        after = ["ha-after"]
        submit(fed, after[0], cpu="1", seconds=1)
        jobs += during + after
        for job in jobs:
            wait_complete(fed, job)
        for job in jobs:
            assert len(created_names_on_workers(fed, job)) == 1, f"{job}: created on workers more than once"
    finally:
        # The federation as it was: a fresh kfed-manager (same command, log and port), then the standby hands over.
        launch = fed.launches["kfed-manager"]
        fed.controller_records.remove(leader)
        if leader.alive():
            stop_records([leader])
        proc, replacement = start_process(
            "kfed-manager", launch.argv, log_path=launch.log, die_with_parent=fed.die_with_parent, env=launch.env
        )
        fed.controller_records.append(replacement)
        _wait_ready("kfed-manager", launch.health_port, proc, log=launch.log)
        assert stop_records([standby]) == []
    left = sorted(str(p.relative_to(scratch_dir(fed, standby.name))) for p in scratch_dir(fed, standby.name).rglob("*"))
    assert left == [], f"the standby, stopped by SIGTERM, left files in its TMPDIR: {left}"
    assert replacement is not None
    identity = f"_{replacement.pid}"
    wait_for(
        lambda: lease_holder(fed),
        until=lambda holder: holder.endswith(identity),
        timeout=LEASE_DURATION + 3 * RETRY_PERIOD,
        what="the restarted kfed-manager to lead again",
    )
    # ... and to have connected every worker, as the shared federation was before this test (a test run after it,
    # e.g. the dashboard's, reads the workers connected at once)
    connected = f"{len(fed.workers)}/{len(fed.workers)} connected"
    wait_for(
        lambda: _readyz_verbose(fed.launches["kfed-manager"].health_port),
        until=lambda text: connected in text,
        timeout=60,
        what=f"the restarted kfed-manager's /readyz to say {connected}",
    )


def _readyz_verbose(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz?verbose", timeout=5) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as err:  # 503 while a check fails: its body still lists every check
        return str(err.read().decode())
    except OSError as err:
        return str(err)
