"""kfed-agent against a real worker apiserver: a Workload copy kfed-manager sent and the agent admitted, whose Job
copy never comes, is deactivated and evicted after ``--job-copy-timeout`` and its quota released; a copy whose Job
exists is left alone; a finished copy nobody deletes gets its ``Finished`` written after the grace. The manager
is played by kubectl; the agent runs with a 3 s timeout (its own process, so
the module-scoped agent of ``test_agent`` keeps the default)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.integration.test_agent import (
    MANAGER_UID_LABEL,
    ORIGIN_LABEL,
    PREBUILT_LABEL,
    WORKER,
    Queues,
    RunningAgent,
    capacity_of,
    condition,
    cpu_of,
    get_json,
    holds_for,
    is_true,
    make_queues,
    running_agent,
)
from e2e.queues import workload_manifest
from e2e.rig.federation import Federation
from e2e.waiting import wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 3


@pytest.fixture(scope="module")
def short_agent(rig: Federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    log_path = tmp_path_factory.mktemp("agent-job-copies") / "agent.log"
    with running_agent(rig, log_path, f"--job-copy-timeout={TIMEOUT}") as running:
        yield running


def workload_copy(namespace: str, name: str, *, queue: str, cpu: str) -> dict[str, Any]:
    """The Workload copy as kfed-manager creates it for a kfed-agent worker: alone, the Job copy comes later."""
    labels = {ORIGIN_LABEL: "multikueue", MANAGER_UID_LABEL: str(uuid.uuid4())}
    return workload_manifest(name, queue=queue, namespace=namespace, cpu=cpu, labels=labels)


def job_copy(workload: dict[str, Any], *, runs_for: str = "600s") -> dict[str, Any]:
    meta = workload["metadata"]
    pod_spec = workload["spec"]["podSets"][0]["template"]["spec"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {**meta["labels"], PREBUILT_LABEL: meta["name"]},
        },
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": runs_for}},
                "spec": pod_spec,
            },
        },
    }


def released(wl: dict[str, Any]) -> bool:
    """The copy's quota is released: QuotaReserved=False and no admission."""
    reserved = condition(wl, "QuotaReserved") or {}
    return reserved.get("status") == "False" and not (wl.get("status") or {}).get("admission")


def events_of(rig: Federation, namespace: str, name: str, reason: str) -> list[tuple[str, str]]:
    """(type, note) of the Events with ``reason`` about the object ``name`` in ``namespace``."""
    events = (get_json(rig, "events.events.k8s.io", "-n", namespace) or {}).get("items") or []
    return [
        (str(e["type"]), str(e.get("note")))
        for e in events
        if e.get("regarding", {}).get("name") == name and e["reason"] == reason
    ]


def logged_at(agent: RunningAgent, event: str, workload: str) -> dt.datetime | None:
    for line in agent.log_lines():
        if line.get("event") == event and line.get("workload") == workload:
            return dt.datetime.fromisoformat(str(line["ts"]).replace("Z", "+00:00"))
    return None


def reported_queues(rig: Federation) -> Queues:
    """New queues in their own namespace, once the agent's capacity report lists their ClusterQueue."""
    q = make_queues(rig)
    try:
        wait_for(
            lambda: capacity_of(rig, q.cluster_queue),
            until=bool,
            timeout=30,
            what="the capacity report to list the new ClusterQueue",
        )
    except BaseException:
        rig.kubectl(WORKER, "delete", "namespace", q.namespace, "--wait=false", check=False)
        raise
    return q


def test_an_admitted_copy_whose_job_copy_never_comes_is_evicted_and_its_quota_released(
    rig: Federation, short_agent: RunningAgent
) -> None:
    q = reported_queues(rig)
    ns = q.namespace
    try:
        orphan = workload_copy(ns, "orphan", queue=q.local_queue, cpu="2")
        claimed = workload_copy(ns, "claimed", queue=q.local_queue, cpu="1")
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(claimed))
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(job_copy(claimed)))

        def workload(name: str) -> dict[str, Any]:
            return get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns) or {}

        # the claimed copy's Job runs and settles first: after the orphan's admission nothing the agent watches
        # changes, so only the agent's own deadline can wake it for the eviction
        wait_for(
            lambda: (get_json(rig, "job", "claimed", "-n", ns) or {}).get("status") or {},
            until=lambda status: status.get("ready") == 1,
            timeout=60,
            what="the claimed copy's Job started and its pod ready",
        )
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(orphan))

        evicted = wait_for(
            lambda: condition(workload("orphan"), "Evicted"),
            until=lambda c: c is not None,
            timeout=30,
            what="the copy without a Job evicted",
        )
        assert evicted is not None
        message = f"no Job copy was created for the admitted workload within {TIMEOUT}s"
        assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", "JobCopyMissing", message)
        admitted_at = logged_at(short_agent, "workload.admitted", f"{ns}/orphan")
        evicted_at = logged_at(short_agent, "workload.evicted", f"{ns}/orphan")
        assert admitted_at is not None, "the copy was admitted first"
        assert evicted_at is not None, "the eviction is logged"
        assert (evicted_at - admitted_at).total_seconds() >= TIMEOUT - 1  # condition times are whole seconds

        after = wait_for(lambda: workload("orphan"), until=released, timeout=15, what="the evicted copy released")
        assert after["spec"]["active"] is False, "deactivated, so it is not admitted again at once"
        assert (condition(after, "Admitted") or {}).get("status") == "False"
        requeued = condition(after, "Requeued") or {}  # Kueue: a deactivated workload is released, not requeued
        assert (requeued.get("status"), requeued.get("reason"), requeued.get("message")) == (
            "False",
            "JobCopyMissing",
            message,
        )
        wait_for(
            lambda: cpu_of(capacity_of(rig, q.cluster_queue)),
            until=lambda cpu: cpu is not None and cpu["usage"] == "1",
            timeout=15,
            what="the report to show only the claimed copy's usage",
        )

        found = wait_for(
            lambda: events_of(rig, ns, "orphan", "JobCopyMissing"),
            until=bool,
            timeout=15,
            what="the JobCopyMissing Event on the copy",
        )
        assert found == [("Warning", message)]

        # the copy whose Job exists keeps its quota long past the timeout; the released one stays released
        holds_for(
            "the claimed copy admitted, not evicted, and the orphan released",
            lambda: (
                is_true(workload("claimed"), "Admitted")
                and not is_true(workload("claimed"), "Evicted")
                and released(workload("orphan"))
            ),
            seconds=TIMEOUT,
        )
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)


def test_a_finished_copy_nobody_deletes_gets_its_finished_written_after_the_grace(
    rig: Federation, short_agent: RunningAgent
) -> None:
    """kfed-manager deletes the copy of a finished Job, so the agent finishes it in memory first (its quota free at
    once) and writes ``Finished`` only if the copy is still there ``FINISH_GRACE_SECONDS`` later: here the manager
    (kubectl) never deletes it."""
    q = reported_queues(rig)
    ns = q.namespace
    try:
        copy = workload_copy(ns, "done", queue=q.local_queue, cpu="2")
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(copy))
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(job_copy(copy, runs_for="1s")))
        wait_for(
            lambda: cpu_of(capacity_of(rig, q.cluster_queue)),
            until=lambda cpu: cpu is not None and cpu["usage"] == "0",
            timeout=60,
            what="the copy's quota free in the report once its Job completed",
        )
        deferred_at = wait_for(
            lambda: logged_at(short_agent, "workload.finished", f"{ns}/done"),
            until=lambda at: at is not None,
            timeout=10,
            what="the finish in memory logged",
        )
        assert deferred_at is not None
        wl = get_json(rig, "workloads.kueue.x-k8s.io", "done", "-n", ns) or {}
        assert not is_true(wl, "Finished"), "not written while the grace runs"
        finished = wait_for(
            lambda: condition(get_json(rig, "workloads.kueue.x-k8s.io", "done", "-n", ns) or {}, "Finished"),
            until=lambda c: c is not None and c.get("status") == "True",
            timeout=40,
            what="Finished written on the copy after the grace",
        )
        assert finished is not None
        assert finished["reason"] == "Succeeded"
        written = [
            line
            for line in short_agent.log_lines()
            if line.get("event") == "workload.finished"
            and line.get("workload") == f"{ns}/done"
            and "written" not in line
        ]
        assert len(written) == 1, "written once"
        written_at = dt.datetime.fromisoformat(str(written[0]["ts"]).replace("Z", "+00:00"))
        assert (written_at - deferred_at).total_seconds() >= 10, "not before the grace"
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)


def test_a_stock_managers_copy_whose_job_copy_is_scaled_is_finished_out_of_sync_and_its_job_suspended(
    rig: Federation, short_agent: RunningAgent
) -> None:
    """A stock MultiKueue manager's copy (no kfed label; both copies come at once, the Job suspended): someone
    raises the running Job copy's parallelism on the worker. As Kueue on a worker does, the agent finishes the
    Workload copy ``OutOfSync`` with Kueue's message, which frees its quota, and suspends the Job copy, so its pods
    never run beyond the quota. (A Kueue v0.20 manager then takes the copy back and sends it again.)"""
    q = reported_queues(rig)
    ns = q.namespace
    try:
        stock = workload_copy(ns, "stock", queue=q.local_queue, cpu="1")
        del stock["metadata"]["labels"][MANAGER_UID_LABEL]
        job = job_copy(stock)
        job["spec"]["completions"] = 4  # one pod at a time
        for manifest in (stock, job):
            rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(manifest))
        wait_for(
            lambda: (get_json(rig, "job", "stock", "-n", ns) or {}).get("status") or {},
            until=lambda status: status.get("active") == 1,
            timeout=60,
            what="the agent to start the Job copy",
        )
        rig.kubectl(WORKER, "patch", "job", "stock", "-n", ns, "--type", "merge", "-p", '{"spec":{"parallelism":3}}')
        finished = wait_for(
            lambda: condition(get_json(rig, "workloads.kueue.x-k8s.io", "stock", "-n", ns) or {}, "Finished"),
            until=lambda c: c is not None,
            timeout=30,
            what="the Workload copy finished out of sync",
        )
        assert finished is not None
        assert (finished["status"], finished["reason"], finished["message"]) == (
            "True",
            "OutOfSync",
            "The prebuilt workload is out of sync with its user job",
        )
        suspended = wait_for(
            lambda: get_json(rig, "job", "stock", "-n", ns) or {},
            until=lambda j: j["spec"].get("suspend") is True and not (j.get("status") or {}).get("active"),
            timeout=30,
            what="the Job copy suspended, its pods gone",
        )
        assert suspended["spec"]["parallelism"] == 3, "the Job copy is left as it was edited, only suspended"
        wait_for(
            lambda: cpu_of(capacity_of(rig, q.cluster_queue)),
            until=lambda cpu: cpu is not None and cpu["usage"] == "0",
            timeout=15,
            what="the report to show the copy's quota free",
        )
        holds_for(
            "the Job copy stays suspended",
            lambda: (get_json(rig, "job", "stock", "-n", ns) or {}).get("spec", {}).get("suspend") is True,
            seconds=3,
        )
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)
