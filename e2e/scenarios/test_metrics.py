"""The manager's and the agents' /metrics after a known scenario: Kueue's names and labels, and the values they
must have (counters moved by exactly what the scenario did, gauges equal to the queues' truth), plus
``/readyz?verbose`` naming the connected workers."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE, job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION
from e2e.scenarios.helpers import condition, is_true, submit, wait_complete, worker_of, workload_of
from e2e.scenarios.scraping import changes, get_url, has, port_of, scrape, value
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_metrics_after_one_job_and_one_job_too_big(federation: Federation) -> None:
    fed = federation
    before = scrape(fed)
    agents_before = {w: scrape(fed, f"kfed-agent-{w}") for w in fed.workers}
    submit(fed, "metrics-small", cpu="2", seconds=1)
    wait_complete(fed, "metrics-small")
    worker = worker_of(fed, "metrics-small")
    assert worker in fed.workers
    cq = {"cluster_queue": CLUSTER_QUEUE, "replica_role": "leader"}
    lq = {"name": LOCAL_QUEUE, "namespace": "default", "replica_role": "leader"}
    # counters: exactly one more of each thing the Job went through (finished is counted when the result comes back)
    after = wait_for(
        lambda: scrape(fed),
        until=lambda s: changes(before, s)("kueue_finished_workloads_total", **cq) == 1,
        timeout=30,
        what="kueue_finished_workloads_total to count the Job",
    )
    delta = changes(before, after)
    assert delta("kueue_quota_reserved_workloads_total", **cq, priority_class="") == 1
    assert delta("kueue_quota_reserved_wait_time_seconds_count", **cq) == 1
    assert delta("kueue_admitted_workloads_total", **cq) == 1
    assert delta("kueue_admission_wait_time_seconds_count", **cq) == 1
    assert delta("kueue_admission_checks_wait_time_seconds_count", **cq) == 1
    assert delta("kueue_local_queue_quota_reserved_workloads_total", **lq) == 1
    assert delta("kueue_local_queue_admitted_workloads_total", **lq) == 1
    assert delta("kueue_local_queue_finished_workloads_total", **lq) == 1
    # Kueue v0.20's execution time: from Admitted to Finished; its pod ran 1 s after it was admitted
    assert delta("kueue_execution_time_seconds_count", **cq) == 1
    assert 1 <= delta("kueue_execution_time_seconds_sum", **cq) < 60
    assert delta("kueue_local_queue_execution_time_seconds_count", **lq) == 1
    assert delta("kueue_local_queue_admission_checks_wait_time_seconds_count", **lq) == 1
    assert delta("kueue_finished_workloads", cluster_queue=CLUSTER_QUEUE) == 1  # the gauge: Finished Workloads kept
    assert delta("kueue_local_queue_finished_workloads", name=LOCAL_QUEUE, namespace="default") == 1
    assert delta("kueue_workload_creation_latency_seconds_count", job_kind="Job", replica_role="leader") == 1
    mk = {"cluster_queue": CLUSTER_QUEUE, "cluster": worker, "replica_role": "leader"}
    assert delta("multikueue_workloads_dispatched_total", **mk) == 1
    assert delta("multikueue_workloads_admitted_total", **mk) == 1
    assert delta("kfed_dispatch_latency_seconds_count", cluster=worker) == 1
    assert delta("kueue_admission_attempts_total", result="success", replica_role="leader") >= 1
    assert delta("kueue_admission_attempt_duration_seconds_count", result="success") >= 1
    assert delta("kfed_remote_api_request_duration_seconds_count", cluster=worker, verb="create") >= 2
    # gauges: the queues' truth
    quota = {"cohort": "", "cluster_queue": CLUSTER_QUEUE, "flavor": FLAVOR, "replica_role": "leader"}
    assert value(after, "kueue_cluster_queue_nominal_quota", **quota, resource="cpu") == 96
    assert value(after, "kueue_cluster_queue_nominal_quota", **quota, resource="memory") == 512 * 2**30
    assert value(after, "kueue_cluster_queue_borrowing_limit", **quota, resource="cpu") == float("inf")
    assert value(after, "kueue_cluster_queue_status", cluster_queue=CLUSTER_QUEUE, status="active") == 1
    assert value(after, "kueue_cluster_queue_status", cluster_queue=CLUSTER_QUEUE, status="pending") == 0
    assert value(after, "kueue_local_queue_status", name=LOCAL_QUEUE, namespace="default", active="True") == 1
    for w in fed.workers:
        assert value(after, "multikueue_cluster_status", cluster_queue=CLUSTER_QUEUE, cluster=w, active="True") == 1
        assert value(after, "multikueue_cluster_status", cluster_queue=CLUSTER_QUEUE, cluster=w, active="False") == 0
        assert value(after, "kfed_worker_connected", cluster=w) == 1
        assert 0 <= value(after, "kfed_capacity_report_age_seconds", cluster=w) < 60
    assert has(after, "kfed_in_flight_workloads")
    assert value(after, "kueue_build_info", go_version="", git_commit="", compiler="cpython") == 1
    assert value(after, "python_info") == 1
    assert has(after, "process_cpu_seconds_total")
    assert has(after, "python_gc_collections_total")
    # the worker's agent counts its own admission of the copy, under the same names
    agent_delta = changes(agents_before[worker], scrape(fed, f"kfed-agent-{worker}"))
    assert agent_delta("kueue_admitted_workloads_total", cluster_queue=CLUSTER_QUEUE, replica_role="leader") == 1

    # a Job bigger than the whole ClusterQueue: tried, found inadmissible, parked — and the gauge says so
    submit(fed, "metrics-huge", cpu="200", seconds=1)
    try:
        # Kueue v0.20: the reason it is not admitted, and the reason it has no quota (its QuotaReserved=False)
        unadmitted = {"cluster_queue": CLUSTER_QUEUE, "reason": "NoReservation", "underlying_cause": "ExceedsMaxQuota"}
        pending = wait_for(
            lambda: scrape(fed),
            until=lambda s: (
                value(s, "kueue_pending_workloads", cluster_queue=CLUSTER_QUEUE, status="inadmissible") == 1
                and value(s, "kueue_unadmitted_workloads", **unadmitted) == 1
            ),
            timeout=30,
            what="kueue_pending_workloads{status=inadmissible} and kueue_unadmitted_workloads to count the Job",
        )
        assert value(pending, "kueue_pending_workloads", cluster_queue=CLUSTER_QUEUE, status="active") == 0
        assert value(pending, "kueue_local_queue_pending_workloads", name=LOCAL_QUEUE, status="inadmissible") == 1
        assert (
            value(pending, "kueue_cluster_queue_resource_pending", cluster_queue=CLUSTER_QUEUE, resource="cpu") == 200
        )
        assert changes(after, pending)("kueue_admission_attempts_total", result="inadmissible") >= 1
        assert value(pending, "kueue_unadmitted_workloads", **unadmitted, replica_role="leader") == 1
        assert value(pending, "kueue_local_queue_unadmitted_workloads", name=LOCAL_QUEUE, **unadmitted) == 1
        huge = workload_of(fed, "metrics-huge")
        reserved = condition(huge, "QuotaReserved") or {}
        assert (reserved.get("status"), reserved.get("reason")) == ("False", "ExceedsMaxQuota")
    finally:
        fed.kubectl(MANAGER, "delete", "job", "metrics-huge", "--ignore-not-found", "--wait=false")
    wait_for(
        lambda: scrape(fed),
        until=lambda s: (
            value(s, "kueue_pending_workloads", cluster_queue=CLUSTER_QUEUE) == 0
            and not has(s, "kueue_unadmitted_workloads", cluster_queue=CLUSTER_QUEUE)
        ),
        timeout=30,
        what="kueue_pending_workloads to drop to 0 and kueue_unadmitted_workloads to go once the Job is deleted",
    )


def test_metrics_of_a_running_workload_deactivated(federation: Federation) -> None:
    """A running Job's Workload is deactivated: Kueue's eviction histograms get one sample each, from its
    conditions — pods ready until evicted, and evicted until the quota was released (after the copies went)."""
    fed = federation
    before = scrape(fed)
    submit(fed, "metrics-stopped", cpu="1", seconds=120)
    try:
        ready = wait_for(
            lambda: workload_of(fed, "metrics-stopped"),
            until=lambda wl: is_true(wl, "PodsReady"),
            timeout=45,
            what="metrics-stopped's PodsReady to turn True",
        )
        assert ready is not None
        # the shared federation runs with waitForPodsReady: PodsReady turned True once, both of Kueue's waits were
        # observed once, and the admitted-until-ready sample is the span between the Admitted and PodsReady
        # transitions
        cq = {"cluster_queue": CLUSTER_QUEUE, "replica_role": "leader"}
        lq = {"name": LOCAL_QUEUE, "namespace": "default", "replica_role": "leader"}
        running = scrape(fed)
        ready_delta = changes(before, running)
        assert ready_delta("kueue_ready_wait_time_seconds_count", **cq) == 1
        assert ready_delta("kueue_local_queue_ready_wait_time_seconds_count", **lq) == 1
        assert ready_delta("kueue_admitted_until_ready_wait_time_seconds_count", **cq) == 1
        assert ready_delta("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", **lq) == 1
        ready_at = _time(_condition(ready, "PodsReady")["lastTransitionTime"])
        admitted_at = _time(_condition(ready, "Admitted")["lastTransitionTime"])
        waited = ready_delta("kueue_admitted_until_ready_wait_time_seconds_sum", **cq)
        assert abs(waited - (ready_at - admitted_at).total_seconds()) <= 1.0
        # the same span when the workload was admitted as it was queued: the two sums' deltas then differ only by
        # float rounding (each is a difference of two running totals)
        assert ready_delta("kueue_ready_wait_time_seconds_sum", **cq) >= waited - 1e-6
        deactivated_from = dt.datetime.now(dt.UTC)
        fed.kubectl(
            MANAGER,
            "patch",
            "workloads.kueue.x-k8s.io",
            ready["metadata"]["name"],
            "--type=merge",
            "-p",
            '{"spec":{"active":false}}',
        )
        released = wait_for(
            lambda: workload_of(fed, "metrics-stopped"),
            until=lambda wl: is_true(wl, "Evicted") and not is_true(wl, "QuotaReserved"),
            timeout=45,
            what="metrics-stopped evicted and its quota released",
        )
        evicted = _condition(released, "Evicted")
        reason = evicted["reason"]
        after = wait_for(
            lambda: scrape(fed),
            until=lambda s: changes(before, s)("kueue_workload_eviction_latency_seconds_count", reason=reason) == 1,
            timeout=30,
            what=f"kueue_workload_eviction_latency_seconds{{reason={reason}}} to count the release",
        )
        scraped_by = dt.datetime.now(dt.UTC)
        delta = changes(before, after)
        assert delta("kueue_evicted_workloads_total", **cq, reason=reason) == 1
        assert delta("kueue_pods_ready_to_evicted_time_seconds_count", **cq, reason=reason) == 1
        evicted_at = _time(evicted["lastTransitionTime"])
        released_at = _time(_condition(released, "QuotaReserved")["lastTransitionTime"])
        ready_for = delta("kueue_pods_ready_to_evicted_time_seconds_sum", **cq, reason=reason)
        # kfed takes the sample when it counts the eviction, a moment after it stamped Evicted (in whole seconds),
        # so it can pass (evicted_at - ready_at) by up to a second plus that moment: bound it by this test's own
        # clock instead, between the deactivation and the scrape that saw it
        assert (deactivated_from - ready_at).total_seconds() - 1e-3 <= ready_for
        assert ready_for <= (scraped_by - ready_at).total_seconds() + 1e-3
        assert ready_for >= (evicted_at - ready_at).total_seconds() - 1e-3
        latency = delta("kueue_workload_eviction_latency_seconds_sum", **cq, reason=reason)
        assert abs(latency - (released_at - evicted_at).total_seconds()) <= 1.0
    finally:
        fed.kubectl(MANAGER, "delete", "job", "metrics-stopped", "--ignore-not-found", "--wait=false")


def test_a_workload_whose_pods_are_ready_again_records_kueues_recovery_wait(federation: Federation) -> None:
    """Kueue v0.20's recovery histograms: a Job's only pod fails, the worker's Job controller makes a new one after
    its 10 s failure backoff, and the Workload's ``PodsReady`` goes ``WaitForRecovery`` then ``Recovered``; one sample
    each, as long as the wait between the two transitions, and the ready-wait histograms are not recorded again."""
    fed = federation
    before = scrape(fed)
    manifest = job_manifest("metrics-recovered", namespace="default", cpu="1", seconds=8)
    manifest["spec"]["backoffLimit"] = 1
    manifest["spec"]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    try:
        waiting = wait_for(
            lambda: workload_of(fed, "metrics-recovered"),
            until=lambda wl: (condition(wl, "PodsReady") or {}).get("reason") == "WaitForRecovery",
            timeout=60,
            what="metrics-recovered's PodsReady to turn False with WaitForRecovery once its pod failed",
        )
        recovered = wait_for(
            lambda: workload_of(fed, "metrics-recovered"),
            until=lambda wl: (condition(wl, "PodsReady") or {}).get("reason") == "Recovered",
            timeout=45,
            what="metrics-recovered's PodsReady to turn True with Recovered once the new pod runs",
        )
        cq = {"cluster_queue": CLUSTER_QUEUE, "replica_role": "leader"}
        lq = {"name": LOCAL_QUEUE, "namespace": "default", "replica_role": "leader"}
        delta = changes(before, scrape(fed))
        assert delta("kueue_workload_recovery_wait_time_seconds_count", **cq) == 1
        assert delta("kueue_local_queue_workload_recovery_wait_time_seconds_count", **lq) == 1
        assert delta("kueue_ready_wait_time_seconds_count", **cq) == 1, "recorded once, when first ready"
        assert delta("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", **lq) == 1
        waited = delta("kueue_workload_recovery_wait_time_seconds_sum", **cq)
        span = _time(_condition(recovered, "PodsReady")["lastTransitionTime"]) - _time(
            _condition(waiting, "PodsReady")["lastTransitionTime"]
        )
        assert abs(waited - span.total_seconds()) <= 1.0, (waited, span)
        assert waited >= 5, "the worker's Job controller waits 10 s before it replaces a failed pod"
    finally:
        fed.kubectl(MANAGER, "delete", "job", "metrics-recovered", "--ignore-not-found", "--wait=false")


def _condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    found = condition(workload, kind)
    assert found is not None, f"no {kind} condition"
    return found


def test_readyz_verbose_names_the_connected_workers(federation: Federation) -> None:
    port = port_of(federation, "kfed-manager", "healthPort")
    status, text = get_url(f"http://127.0.0.1:{port}/readyz?verbose")
    assert status == 200, text
    workers = len(federation.workers)
    assert f"[+]remotes-connected ok: {workers}/{workers} connected" in text, text
    assert "readyz check passed" in text
    status, plain = get_url(f"http://127.0.0.1:{port}/readyz")
    assert (status, plain) == (200, "ok")
