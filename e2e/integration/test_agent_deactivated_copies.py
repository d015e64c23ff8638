"""kfed-agent against a real worker apiserver: a running Workload copy that a user deactivates on the worker
(``spec.active: false``) is evicted as Kueue evicts it (reason ``Deactivated``), its Job stopped and its quota
released (``Requeued=False`` reason ``Deactivated``), with an Event and a log line, so that the manager (played by
kubectl here) sees the eviction and takes it back; set active again, it gets ``Requeued=True`` reason
``Reactivated`` and is admitted again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.integration.test_agent import (
    WORKER,
    RunningAgent,
    condition,
    get_json,
    is_true,
    make_queues,
    running_agent,
)
from e2e.integration.test_agent_job_copies import events_of, job_copy, released, workload_copy
from e2e.rig.federation import Federation
from e2e.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def agent(rig: Federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    log_path = tmp_path_factory.mktemp("agent-deactivated-copies") / "agent.log"
    with running_agent(rig, log_path) as running:
        yield running


def test_a_copy_deactivated_on_the_worker_is_evicted_released_and_requeued_reactivated_when_active_again(
    rig: Federation, agent: RunningAgent
) -> None:
    q = make_queues(rig)
    ns = q.namespace
    try:
        copy = workload_copy(ns, "off", queue=q.local_queue, cpu="1")
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(copy))

        def workload() -> dict[str, Any]:
            return get_json(rig, "workloads.kueue.x-k8s.io", "off", "-n", ns) or {}

        def job() -> dict[str, Any]:
            return get_json(rig, "job", "off", "-n", ns) or {}

        wait_for(workload, until=lambda w: is_true(w, "Admitted"), timeout=30, what="the copy admitted")
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(job_copy(copy)))
        wait_for(job, until=lambda j: j["spec"]["suspend"] is False, timeout=30, what="its Job copy started")

        rig.kubectl(
            WORKER,
            "patch",
            "workloads.kueue.x-k8s.io",
            "off",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"spec":{"active":false}}',
        )
        evicted = wait_for(
            lambda: condition(workload(), "Evicted"),
            until=lambda c: c is not None and c["status"] == "True",
            timeout=30,
            what="the deactivated copy evicted",
        )
        assert evicted is not None
        assert (evicted["reason"], evicted["message"]) == ("Deactivated", "The workload is deactivated")
        after = wait_for(workload, until=released, timeout=30, what="the deactivated copy's quota released")
        requeued = condition(after, "Requeued") or {}
        assert (requeued.get("status"), requeued.get("reason")) == ("False", "Deactivated")
        assert job()["spec"]["suspend"] is True, "its Job copy is stopped"
        found = wait_for(
            lambda: events_of(rig, ns, "off", "EvictedDueToDeactivated"), until=bool, timeout=15, what="the Event"
        )
        assert found == [("Normal", "The workload is deactivated")]
        logged = [
            line.get("reason")
            for line in agent.log_lines()
            if line.get("event") == "workload.evicted" and line.get("workload") == f"{ns}/off"
        ]
        assert logged == ["Deactivated"]

        rig.kubectl(
            WORKER,
            "patch",
            "workloads.kueue.x-k8s.io",
            "off",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"spec":{"active":true}}',
        )
        again = wait_for(
            workload,
            until=lambda w: (condition(w, "Requeued") or {}).get("status") == "True" and is_true(w, "Admitted"),
            timeout=30,
            what="the reactivated copy requeued and admitted again",
        )
        requeued = condition(again, "Requeued") or {}
        assert (requeued.get("reason"), requeued.get("message")) == ("Reactivated", "The workload was reactivated")
        wait_for(job, until=lambda j: j["spec"]["suspend"] is False, timeout=30, what="its Job copy started again")
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)
