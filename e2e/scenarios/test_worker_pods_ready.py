"""Kueue's waitForPodsReady for the Jobs queued on a worker itself, on a federation of its own whose kfed-agent reads
it from a Kueue configuration file (as Kueue on that worker would): a Job whose pods never become ready is evicted
with ``PodsReadyTimeout``, requeued after its backoff, and deactivated once past the requeuing limit; a healthy one
runs with ``PodsReady=True``; with ``blockAdmission``, nothing else is admitted while one holds quota without ready
pods. (kfed-manager's copies are the manager's to judge: ``test_pods_ready``.)
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, LOCAL_QUEUE, apply_sample_queues, job_manifest
from e2e.rig.federation import Federation, FederationSpec, running
from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, get, is_true, items
from e2e.scenarios.scraping import changes, scrape
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

WORKER = "worker-1"
CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 8s
  recoveryTimeout: 40s
  blockAdmission: true
  requeuingStrategy:
    backoffLimitCount: 1
    backoffBaseSeconds: 1
"""
"""All of it applies to the Jobs queued on the worker itself. The recovery timeout outlasts the worker's Job
controller's 10 s backoff before it replaces a failed pod."""


@pytest.fixture(scope="module")
def waiting() -> Iterator[Federation]:
    with tempfile.TemporaryDirectory(prefix="kfed-agent-ready-") as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG)
        spec = FederationSpec(
            workers=1,
            node_shapes={WORKER: NodeShape(count=2)},
            job_seconds=2,
            controllers=True,
            from_charts=True,  # as installed: with its ServiceAccount's token, and its /metrics served
            agent_args=("--config", str(config)),
        )
        with running(Path(tmp) / "rig", ensure_built(), spec) as fed:
            apply_sample_queues(fed)
            yield fed


def _workload_of(fed: Federation, job: dict[str, Any]) -> dict[str, Any] | None:
    uid = job["metadata"]["uid"]
    owned = [
        w
        for w in items(fed, WORKER, "workloads")
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or ())
    ]
    return owned[0] if len(owned) == 1 else None


def _create(fed: Federation, manifest: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(fed.kubectl(WORKER, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout))


def test_a_worker_queued_job_never_ready_is_evicted_requeued_then_deactivated(waiting: Federation) -> None:
    manifest = job_manifest("never-ready", namespace="default", cpu="1", seconds=600)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    job = _create(waiting, manifest)
    reason = "DeactivatedDueToRequeuingLimitExceeded"
    workload = wait_for(
        lambda: _workload_of(waiting, job),
        until=lambda wl: (
            wl is not None
            and (condition(wl, "Evicted") or {}).get("reason") == reason
            and not is_true(wl, "QuotaReserved")
        ),
        timeout=90,
        what="the never-ready Job's Workload evicted for its pods, requeued, then deactivated at the limit",
    )
    assert workload is not None
    assert workload["spec"]["active"] is False
    assert (condition(workload, "Requeued") or {}).get("status") == "False", "not queued again"
    assert workload["status"]["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1},
        {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1},
    ]
    selector = f"involvedObject.name={workload['metadata']['name']},reason=EvictedDueToPodsReadyTimeout"
    events = items(waiting, WORKER, "events", "--field-selector", selector)
    assert [e["message"] for e in events] == ["Exceeded the PodsReady timeout default/" + workload["metadata"]["name"]]
    stopped = wait_for(
        lambda: get(waiting, WORKER, "job", "never-ready"),
        until=lambda j: j is not None and bool(j["spec"].get("suspend")),
        timeout=30,
        what="the never-ready Job suspended",
    )
    assert stopped is not None


def test_a_healthy_worker_queued_job_runs_with_pods_ready(waiting: Federation) -> None:
    job = _create(waiting, job_manifest("healthy", namespace="default", cpu="1", seconds=6))
    workload = wait_for(
        lambda: _workload_of(waiting, job),
        until=lambda wl: wl is not None and is_true(wl, "Finished"),
        timeout=60,
        what="the healthy worker-queued Job's Workload finished",
    )
    assert workload is not None
    ready = condition(workload, "PodsReady") or {}
    assert (ready.get("status"), ready.get("reason")) == ("True", "Started")
    assert (condition(workload, "Finished") or {}).get("reason") == "Succeeded"
    assert not workload["status"].get("schedulingStats"), "never evicted"


def test_block_admission_holds_a_job_back_while_another_holds_quota_without_ready_pods(waiting: Federation) -> None:
    """Kueue's blockAdmission on the worker: while a Job whose pods are not ready holds quota, a Job that fits waits
    with ``WaitingForPodsReady`` and Kueue's message; once the first is evicted for its pods, the second runs."""
    manifest = job_manifest("stuck", namespace="default", cpu="1", seconds=600)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    stuck = _create(waiting, manifest)
    try:
        wait_for(
            lambda: _workload_of(waiting, stuck),
            until=lambda wl: wl is not None and is_true(wl, "Admitted"),
            timeout=30,
            what="the Job whose pods cannot start admitted",
        )
        held = _create(waiting, job_manifest("held", namespace="default", cpu="1", seconds=2))
        waiting_workload = wait_for(
            lambda: _workload_of(waiting, held),
            until=lambda wl: (
                wl is not None and (condition(wl, "QuotaReserved") or {}).get("reason") == "WaitingForPodsReady"
            ),
            timeout=30,
            what="the second Job held back while the first holds quota without ready pods",
        )
        assert waiting_workload is not None
        message = (condition(waiting_workload, "QuotaReserved") or {}).get("message")
        assert message == "waiting for all admitted workloads to be in PodsReady condition"
        done = wait_for(
            lambda: _workload_of(waiting, held),
            until=lambda wl: wl is not None and is_true(wl, "Finished"),
            timeout=60,
            what="the held Job admitted once the first was evicted for its pods, and finished",
        )
        assert done is not None
        assert (condition(done, "Finished") or {}).get("reason") == "Succeeded"
        first = _workload_of(waiting, stuck) or {}
        evictions = first.get("status", {}).get("schedulingStats", {}).get("evictions") or []
        assert any(e.get("reason") == "PodsReadyTimeout" for e in evictions), first.get("status")
    finally:
        waiting.kubectl(WORKER, "delete", "job", "stuck", "-n", "default", "--wait=false", check=False)


def test_a_worker_queued_job_whose_pod_is_replaced_recovers_and_kueues_wait_histograms_count_it(
    waiting: Federation,
) -> None:
    """A worker-queued Job's only pod fails and the Job controller replaces it after its 10 s backoff: the Workload's
    ``PodsReady`` goes ``WaitForRecovery`` then ``Recovered`` (not evicted: the recovery timeout is longer), and
    kfed-agent records Kueue's ready-wait histograms once and the v0.20 recovery histograms once."""
    agent = f"kfed-agent-{WORKER}"
    before = scrape(waiting, agent)
    manifest = job_manifest("recovering", namespace="default", cpu="1", seconds=8)
    manifest["spec"]["backoffLimit"] = 1
    manifest["spec"]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
    job = _create(waiting, manifest)
    try:
        recovered = wait_for(
            lambda: _workload_of(waiting, job),
            until=lambda wl: wl is not None and (condition(wl, "PodsReady") or {}).get("reason") == "Recovered",
            timeout=60,
            what="the recovering Job's PodsReady to turn True with Recovered once its pod was replaced",
        )
        assert recovered is not None
        assert not recovered["status"].get("schedulingStats"), "never evicted"
        cq = {"cluster_queue": CLUSTER_QUEUE, "replica_role": "leader"}
        lq = {"name": LOCAL_QUEUE, "namespace": "default", "replica_role": "leader"}
        delta = changes(before, scrape(waiting, agent))
        assert delta("kueue_ready_wait_time_seconds_count", **cq) == 1
        assert delta("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", **lq) == 1
        assert delta("kueue_workload_recovery_wait_time_seconds_count", **cq) == 1
        assert delta("kueue_local_queue_workload_recovery_wait_time_seconds_count", **lq) == 1
        assert 5 <= delta("kueue_workload_recovery_wait_time_seconds_sum", **cq) < 40
    finally:
        waiting.kubectl(WORKER, "delete", "job", "recovering", "-n", "default", "--wait=false", check=False)
