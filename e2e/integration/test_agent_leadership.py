"""Two kfed-agent replicas on one worker, as the chart runs them with ``leaderElection.enabled``: only the holder of
the ``kfed-agent`` Lease admits (the standby answers ready, "standby", and admits nothing); when the leader is
killed (SIGKILL: no chance to release its Lease) the standby takes over within the lease duration plus a retry
period and admits what was dispatched meanwhile.

The Lease lives in a namespace of this test's own, so no other agent on the rig competes for it. Both replicas are
stopped whatever happens (``running_agent``; the killed one is only reaped).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.integration.test_agent import (
    WORKER,
    RunningAgent,
    capacity_of,
    dispatch,
    get_json,
    is_true,
    make_queues,
    running_agent,
    wait_for,
)
from e2e.rig.federation import Federation

pytestmark = pytest.mark.integration

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0
"""kfed's leader election, Kueue's defaults (federation/kube/leader.py)."""


def _logged(agent: RunningAgent, event: str) -> list[dict[str, object]]:
    return [line for line in agent.log_lines() if line.get("event") == event]


def _admitted(rig: Federation, namespace: str, name: str) -> bool:
    return is_true(get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", namespace), "QuotaReserved")


def _holder(rig: Federation, namespace: str) -> str:
    lease = get_json(rig, "lease", "kfed-agent", "-n", namespace) or {}
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


@contextlib.contextmanager
def _lease_namespace(rig: Federation) -> Iterator[str]:
    name = f"agent-lease-{uuid.uuid4().hex[:6]}"
    rig.kubectl(WORKER, "create", "namespace", name)
    try:
        yield name
    finally:
        rig.kubectl(WORKER, "delete", "namespace", name, "--wait=false", check=False)


def test_the_standby_agent_admits_nothing_until_the_killed_leaders_lease_runs_out(
    rig: Federation, tmp_path: Path
) -> None:
    queues = make_queues(rig)
    with _lease_namespace(rig) as lease_ns, contextlib.ExitStack() as stack:
        leader = stack.enter_context(running_agent(rig, tmp_path / "leader.log", f"--namespace={lease_ns}"))
        wait_for("the first replica to lead", lambda: _logged(leader, "leader.started_leading"))
        standby = stack.enter_context(running_agent(rig, tmp_path / "standby.log", f"--namespace={lease_ns}"))
        assert standby.get("/readyz")[0] == 200
        wait_for("the capacity report to list the new ClusterQueue", lambda: capacity_of(rig, queues.cluster_queue))

        dispatch(rig, queues.namespace, "before-kill", queue=queues.local_queue, cpu="1", seconds=600)
        wait_for("the leader to admit", lambda: _admitted(rig, queues.namespace, "before-kill"))
        with standby.log_on_failure():
            assert not _logged(standby, "leader.started_leading"), "the standby took the Lease from a live leader"
            assert not _logged(standby, "workload.admitted"), "the standby admitted while another replica led"
        leader_identity = _holder(rig, lease_ns)
        assert leader_identity

        os.kill(leader.process.pid, signal.SIGKILL)
        leader.process.wait(timeout=10)
        dispatch(rig, queues.namespace, "after-kill", queue=queues.local_queue, cpu="1", seconds=600)
        with standby.log_on_failure():
            wait_for(
                "the standby to take over",
                lambda: _logged(standby, "leader.started_leading"),
                timeout=LEASE_DURATION + RETRY_PERIOD + 15,
            )
            wait_for("the new leader to admit", lambda: _admitted(rig, queues.namespace, "after-kill"), timeout=30)
        assert _holder(rig, lease_ns) not in ("", leader_identity)
        admitted_by_standby = {str(line.get("workload")) for line in _logged(standby, "workload.admitted")}
        assert f"{queues.namespace}/after-kill" in admitted_by_standby, json.dumps(sorted(admitted_by_standby))
