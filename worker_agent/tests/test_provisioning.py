"""The ProvisioningRequest check's decisions (names, states, retries) and what check states do to a Workload."""

from __future__ import annotations

import datetime as dt
from typing import Any

from federation.admission.decisions import Assignment, PodSetAssignment
from federation.conditions import find_condition, format_time, is_true
from worker_agent.decisions import provisioning as d
from worker_agent.decisions.admission import admit_update
from worker_agent.decisions.checks import checks_for, checks_step, delayed_pending

NOW = dt.datetime(2026, 11, 23, 6, 0, tzinfo=dt.UTC)
CONFIG = d.Config(class_name="queued-provisioning.gke.io", parameters={"a": "1"}, backoff_limit_count=2)


def workload(*, checks: list[dict[str, Any]] | None = None, admitted: bool = False, **status: Any) -> dict[str, Any]:
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""})
    return {
        "metadata": {"name": "job-a-1", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                }
            ]
        },
        "status": {
            "conditions": conditions,
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "gpu"}, "count": 3}],
            },
            "admissionChecks": checks if checks is not None else [check()],
            **status,
        },
    }


def check(state: str = "Pending", **extra: Any) -> dict[str, Any]:
    return {"name": "prov", "state": state, "message": "", "lastTransitionTime": format_time(NOW), **extra}


def request(attempt: int, *conditions: tuple[str, str]) -> dict[str, Any]:
    name = d.request_name("job-a-1", "prov", attempt)
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "provisioningClassName": CONFIG.class_name,
            "parameters": {"a": "1"},
            "podSets": [{"podTemplateRef": {"name": d.template_name(name, "main")}, "count": 3}],
        },
        "status": {"conditions": [{"type": t, "status": "True", "message": m} for t, m in conditions]},
    }


def update(wl: dict[str, Any], req: dict[str, Any] | None, current: dict[str, Any] | None = None) -> d.CheckUpdate:
    return d.check_update(
        wl, current or wl["status"]["admissionChecks"][0], config=CONFIG, request=req, needed=True, now=NOW
    )


# -- names ------------------------------------------------------------------------------------------------------


def test_names_are_kueues() -> None:
    assert d.request_name("job-a-1", "prov", 2) == "job-a-1-prov-2"
    assert d.template_name("job-a-1-prov-2", "main") == "ppt-job-a-1-prov-2-main"
    assert d.attempt_of("job-a-1-prov-12", workload="job-a-1", check="prov") == 12
    assert d.attempt_of("job-a-1-other-1", workload="job-a-1", check="prov") is None


def test_long_names_are_cut_with_a_hash() -> None:
    name = d.request_name("w" * 300, "prov", 1)
    assert len(name) == 253
    assert name[:247] == "w" * 247
    assert name != d.request_name("w" * 299 + "x", "prov", 1)
    assert d.attempt_of(name, workload="w" * 300, check="prov") is None  # Kueue: the suffix is lost too


def test_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    assert [d.backoff_seconds(n, base=60, cap=1800) for n in range(7)] == [60, 120, 240, 480, 960, 1800, 1800]


def test_config_defaults_are_kueues() -> None:
    config = d.config_of({"spec": {"provisioningClassName": "c"}})
    assert (config.backoff_limit_count, config.backoff_base_seconds, config.backoff_max_seconds) == (3, 60, 1800)


def test_a_check_without_a_config_is_inactive() -> None:
    config, problem = d.config_for_check(
        {"spec": {"parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "x"}}},
        {},
    )
    assert config is None
    assert "not found" in problem
    result = d.check_update(
        workload(), check(), config=None, config_problem=problem, request=None, needed=True, now=NOW
    )
    assert result.state["state"] == "Pending"
    assert result.state["message"].startswith(d.CHECK_INACTIVE_MESSAGE)


# -- states -----------------------------------------------------------------------------------------------------


def test_pending_until_provisioned_then_ready_with_pod_set_updates() -> None:
    wl = workload()
    waiting = request(1, ("Accepted", ""), ("Provisioned", "ETA 5m"))
    waiting["status"]["conditions"][1]["status"] = "False"
    accepted = update(wl, waiting)
    assert accepted.state["state"] == "Pending"
    assert accepted.state["message"] == "ETA 5m"
    ready = update(wl, request(1, ("Provisioned", "Provisioned in zone a")))
    assert ready.state["state"] == "Ready"
    assert ready.state["message"] == "Provisioned in zone a"
    assert ready.event == "Admission check prov updated state from Pending to Ready with message: Provisioned in zone a"
    assert ready.state["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                d.CONSUME_ANNOTATION: "job-a-1-prov-1",
                d.CLASS_ANNOTATION: CONFIG.class_name,
            },
        }
    ]


def test_failed_request_retries_with_backoff_then_rejects_after_the_limit() -> None:
    first = update(workload(), request(1, ("Failed", "no capacity")))
    assert first.state["state"] == "Retry"
    assert first.state["message"] == "Retrying after failure: no capacity"
    assert first.state["requeueAfterSeconds"] == 60
    second = update(workload(checks=[check(retryCount=1)]), request(2, ("Failed", "no capacity")))
    assert (second.state["state"], second.state["requeueAfterSeconds"]) == ("Retry", 120)
    last = update(workload(checks=[check(retryCount=2)]), request(3, ("Failed", "still none")))
    assert (last.state["state"], last.state["message"]) == ("Rejected", "still none")


def test_an_old_failed_request_does_not_retry_twice() -> None:
    again = update(workload(checks=[check(retryCount=1)]), request(1, ("Failed", "no capacity")))
    assert again.state["state"] == "Pending"


def test_booking_expired_retries_only_before_admission() -> None:
    assert update(workload(), request(1, ("Provisioned", ""), ("BookingExpired", "x"))).state["state"] == "Retry"
    admitted = workload(checks=[check("Ready")], admitted=True)
    assert update(admitted, request(1, ("Provisioned", ""), ("BookingExpired", "x"))).state["state"] == "Ready"


def test_capacity_revoked_rejects() -> None:
    admitted = workload(checks=[check("Ready")], admitted=True)
    result = update(admitted, request(1, ("Provisioned", ""), ("CapacityRevoked", "nodes gone")))
    assert (result.state["state"], result.state["message"]) == ("Rejected", "nodes gone")


def test_no_request_needed_when_no_pod_set_uses_a_managed_resource() -> None:
    config = d.Config(class_name="c", managed_resources=frozenset({"nvidia.com/gpu"}))
    assert d.request_pod_sets(workload(), config, flavor_labels={}) == []
    result = d.check_update(workload(), check(), config=config, request=None, needed=False, now=NOW)
    assert (result.state["state"], result.state["message"]) == ("Ready", d.NO_REQUEST_NEEDED)


# -- requests ---------------------------------------------------------------------------------------------------


def test_first_request_asks_for_the_admitted_count_on_the_flavors_nodes() -> None:
    wl = workload()
    wl["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "30"}
    pod_sets = d.request_pod_sets(wl, CONFIG, flavor_labels={"gpu": {"pool": "gpu"}})
    new = d.request_to_create(wl, check(), config=CONFIG, request=None, pod_sets=pod_sets)
    assert new is not None
    templates, req = d.request_objects(wl, new)
    assert req["metadata"]["name"] == "job-a-1-prov-1"
    assert req["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert req["spec"] == {
        "provisioningClassName": CONFIG.class_name,
        "parameters": {"a": "1", "ValidUntilSeconds": "30"},
        "podSets": [{"podTemplateRef": {"name": "ppt-job-a-1-prov-1-main"}, "count": 3}],
    }
    assert templates[0]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}


def test_next_attempt_only_after_the_retry_was_taken() -> None:
    pod_sets = d.request_pod_sets(workload(), CONFIG, flavor_labels={})
    failed = request(1, ("Failed", "x"))
    assert d.request_to_create(workload(), check("Retry"), config=CONFIG, request=failed, pod_sets=pod_sets) is None
    new = d.request_to_create(workload(), check(retryCount=1), config=CONFIG, request=failed, pod_sets=pod_sets)
    assert new is not None
    assert new.name == "job-a-1-prov-2"
    waiting = request(2)
    assert (
        d.request_to_create(workload(), check(retryCount=1), config=CONFIG, request=waiting, pod_sets=pod_sets) is None
    )


def test_latest_request_skips_other_classes_and_older_attempts() -> None:
    other = request(3)
    other["spec"]["provisioningClassName"] = "another"
    found = d.latest_request([request(1), request(2), other], workload="job-a-1", check="prov", config=CONFIG)
    assert found is not None
    assert found["metadata"]["name"] == "job-a-1-prov-2"


# -- what the check states do to the Workload -------------------------------------------------------------------


def test_checks_apply_by_flavor() -> None:
    queue = {
        "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b", "onFlavors": ["x"]}]}}
    }
    assert checks_for(queue, {"y"}) == ["a"]
    assert checks_for(queue, {"x"}) == ["a", "b"]


def test_admission_behind_checks_reserves_quota_only() -> None:
    raw = {"metadata": {"name": "w", "namespace": "ns"}, "spec": {}, "status": {}}
    assignment = Assignment("cq", (PodSetAssignment("main", {"cpu": "tas"}, {"cpu": 1000}, 2),), {}, borrows=False)
    update = admit_update(raw, assignment, now=NOW, waited_seconds=0, checks=["prov"], delayed={"main"})
    assert update.outcome == "reserved"
    assert find_condition({"status": update.status}, "Admitted") is None
    assert update.status["admissionChecks"][0]["state"] == "Pending"
    assert update.status["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] == "Pending"
    assert delayed_pending({"status": update.status}) == ["main"]


def test_all_ready_admits_and_a_delayed_topology_is_placed_first() -> None:
    step = checks_step(workload(checks=[check("Ready")]), now=NOW)
    assert step is not None
    assert step.kind == "admit"
    assert is_true({"status": step.status}, "Admitted")
    assert step.message == "Admitted by ClusterQueue cq, wait time since reservation was 0s", "no reservation time"
    reserved = workload(checks=[check("Ready")])
    reserved["status"]["conditions"][0]["lastTransitionTime"] = format_time(NOW - dt.timedelta(seconds=42))
    step = checks_step(reserved, now=NOW)
    assert step is not None
    # Kueue v0.20 (#15829): the Event says how long the checks took, not 0s
    assert step.message == "Admitted by ClusterQueue cq, wait time since reservation was 42s"
    delayed = workload(checks=[check("Ready")])
    delayed["status"]["admission"]["podSetAssignments"][0]["delayedTopologyRequest"] = "Pending"
    step = checks_step(delayed, now=NOW)
    assert step is not None
    assert step.kind == "place"
    assert checks_step(workload(checks=[check("Pending")]), now=NOW) is None


def test_retry_releases_the_quota_and_requeues_after_the_backoff() -> None:
    retry = check("Retry", message="Retrying after failure: x", requeueAfterSeconds=60)
    step = checks_step(workload(checks=[retry]), now=NOW)
    assert step is not None
    assert step.kind == "evict"
    assert step.status["admission"] is None
    assert not is_true({"status": step.status}, "QuotaReserved")
    evicted = find_condition({"status": step.status}, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "AdmissionCheck"
    assert evicted["message"] == 'Evicted due to AdmissionCheck in Retry state: "prov" (Retrying after failure: x)'
    assert step.status["admissionChecks"][0]["state"] == "Pending"
    assert step.status["admissionChecks"][0]["retryCount"] == 1
    # Kueue sets the retry time; the requeue count is waitForPodsReady's, not touched here
    assert step.status["requeueState"] == {"requeueAt": format_time(NOW + dt.timedelta(seconds=60))}
    counted = workload(checks=[retry])
    counted["status"]["requeueState"] = {"count": 2, "requeueAt": format_time(NOW + dt.timedelta(seconds=600))}
    later = checks_step(counted, now=NOW)
    assert later is not None
    assert "requeueState" not in later.status, "a later requeue time stays, and so does the count"
    requeued = find_condition({"status": step.status}, "Requeued")  # Kueue: False until the backoff ends
    assert requeued is not None
    assert (requeued["status"], requeued["reason"]) == ("False", "AdmissionCheck")
    assert requeued["message"] == evicted["message"]
    assert step.status["schedulingStats"] == {
        "evictions": [{"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}]
    }


def test_rejected_deactivates_and_keeps_the_rejection_visible() -> None:
    step = checks_step(workload(checks=[check("Rejected", message="no capacity")]), now=NOW)
    assert step is not None
    assert step.kind == "deactivate"
    evicted = find_condition({"status": step.status}, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert 'AdmissionCheck in Rejected state: "prov" (no capacity)' in evicted["message"]
    requeued = find_condition({"status": step.status}, "Requeued")  # Kueue: False, not queued until reactivated
    assert requeued is not None
    assert (requeued["status"], requeued["reason"]) == ("False", "DeactivatedDueToAdmissionCheck")
    counted = {"reason": "Deactivated", "underlyingCause": "AdmissionCheck", "count": 1}  # as Kueue labels it
    assert step.status["schedulingStats"] == {"evictions": [counted]}
    assert "admissionChecks" not in step.status


# -- two-phase TAS, invalid entries, the capacity report, the Job's start ----------------------------------------


def _tas_placer(**extra: Any) -> Any:
    from federation.topology.tests.helpers import grid, snapshot_of
    from worker_agent.decisions.tas_admission import TasPlacer
    from worker_agent.decisions.tas_objects import FlavorTopology

    flavor = FlavorTopology("tas", "topo", {}, ())
    return TasPlacer({"tas": flavor}, {"tas": snapshot_of(grid(1, 2, 2, cpu=2000))}, {}, **extra)


def _delayed_workload(pods: int) -> dict[str, Any]:
    wl = workload(checks=[check("Ready")])
    wl["spec"]["podSets"][0]["count"] = pods
    template = wl["spec"]["podSets"][0]["template"]
    template["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack"}
    }
    wl["status"]["admission"]["podSetAssignments"] = [
        {"name": "main", "flavors": {"cpu": "tas"}, "count": pods, "delayedTopologyRequest": "Pending"}
    ]
    return wl


def test_the_second_pass_places_the_delayed_pod_set_in_one_rack_or_says_why_not() -> None:
    placer = _tas_placer()
    placed = placer.place_delayed(_delayed_workload(4))
    assert isinstance(placed, dict)
    assignment = placed["main"]
    hosts = [values[-1] for values in _decoded(assignment)]
    assert len(hosts) == 2
    assert {host.split("-h")[0] for host in hosts} == {"b0-r0"}, "one rack"
    too_big = _tas_placer().place_delayed(_delayed_workload(5))
    assert isinstance(too_big, str)
    assert "doesn't allow to fit any of 5 pod(s)" in too_big
    status = second_pass_failed_status(_delayed_workload(5), too_big)
    admitted = find_condition({"status": status}, "Admitted")
    assert admitted is not None
    assert (admitted["status"], admitted["reason"]) == ("False", "PendingDelayedTopologyRequests")


def test_no_tas_pod_set_is_placed_while_the_snapshots_are_still_being_built() -> None:
    reason = "kfed-agent is still listing the cluster's nodes and pods"
    waiting = _tas_placer(waiting=reason)
    verdict = waiting.place_delayed(_delayed_workload(1))
    assert verdict == f"couldn't assign flavors to pod set main: {reason}"
    assert not waiting.assignments
    assert isinstance(_tas_placer().place_delayed(_delayed_workload(1)), dict), "placed once nothing is awaited"


def _decoded(assignment: dict[str, Any]) -> list[tuple[str, ...]]:
    from federation.topology import TopologyAssignment, decode_assignment

    return [values for values, _ in decode_assignment(TopologyAssignment.from_dict(assignment))]


def second_pass_failed_status(wl: dict[str, Any], reason: str) -> dict[str, Any]:
    from worker_agent.decisions.checks import second_pass_failed

    status = second_pass_failed(wl, reason, now=NOW)
    assert status is not None
    return status


def test_the_first_pass_leaves_the_topology_to_the_checks() -> None:
    from federation.admission.decisions import Admit

    placer = _tas_placer(delay=lambda _: True)
    raw = _delayed_workload(4)
    placer.raw = {"ns/job-a-1": raw}
    assignment = Assignment("cq", (PodSetAssignment("main", {"cpu": "tas"}, {"cpu": 4000}, 4),), {}, borrows=False)
    admit = Admit(_core_workload(), assignment)
    assert placer.veto(admit) is None
    assert placer.delayed == {"ns/job-a-1": ["main"]}
    assert placer.assignments == {}


def _core_workload() -> Any:
    from federation.admission import model as core

    return core.Workload(key="ns/job-a-1", cluster_queue="cq", pod_sets=(), priority=0, creation_time=0.0)


def test_invalid_entries_are_requeued_with_backoff() -> None:
    from worker_agent.decisions.checks import requeue_invalid, second_pass_problem

    wl = _delayed_workload(4)
    assert second_pass_problem(wl, cluster_queues={"cq"}, tas_flavors={"tas": True}) is None
    assert second_pass_problem(wl, cluster_queues=set(), tas_flavors={"tas": True}) == "ClusterQueue cq doesn't exist"
    gone = second_pass_problem(wl, cluster_queues={"cq"}, tas_flavors={})
    assert gone is not None
    assert "ResourceFlavor tas" in gone
    no_topology = second_pass_problem(wl, cluster_queues={"cq"}, tas_flavors={"tas": False})
    assert no_topology == "the Topology of ResourceFlavor tas doesn't exist"
    status = requeue_invalid(wl, no_topology, now=NOW)
    assert status["admission"] is None
    assert not is_true({"status": status}, "QuotaReserved")
    assert status["requeueState"] == {"count": 1, "requeueAt": format_time(NOW + dt.timedelta(seconds=60))}
    wl["status"]["requeueState"] = {"count": 2}
    assert requeue_invalid(wl, no_topology, now=NOW)["requeueState"]["requeueAt"] == format_time(
        NOW + dt.timedelta(seconds=240)
    )
    assert status["admissionChecks"][0]["state"] == "Pending"


def test_flavors_behind_a_provisioning_check_are_left_out_of_the_topology_report() -> None:
    from worker_agent.decisions.checks import autoscaled_flavors

    checks = {"prov": {"spec": {"controllerName": d.CONTROLLER_NAME}}, "other": {"spec": {"controllerName": "x"}}}
    groups = [{"flavors": [{"name": "a"}, {"name": "b"}]}]
    queues = [
        {"spec": {"resourceGroups": groups, "admissionChecksStrategy": {"admissionChecks": [{"name": "other"}]}}},
        {
            "spec": {
                "resourceGroups": groups,
                "admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["b"]}]},
            }
        },
    ]
    assert autoscaled_flavors(queues, checks) == {"b"}


def test_the_job_starts_with_what_the_ready_check_asks_of_its_pods() -> None:
    from federation.admission.api_quotas import flavor_info
    from federation.tests.api_builders import admitted_status as admitted
    from federation.tests.api_builders import flavor
    from federation.tests.api_builders import workload as build_workload
    from worker_agent.decisions.jobs import start_decision

    wl = build_workload("w", status=admitted("cq", "rf", "1"))
    wl["status"]["admissionChecks"] = [
        check("Ready", podSetUpdates=[{"name": "main", "annotations": {d.CONSUME_ANNOTATION: "w-prov-1"}}])
    ]
    job = {
        "metadata": {"namespace": "ns", "name": "w", "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "w"}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    start = start_decision(job, wl, flavors={"rf": flavor_info(flavor("rf"))})
    assert start is not None
    assert start.patch["spec"]["template"]["metadata"]["annotations"] == {
        "kueue.x-k8s.io/workload": "w",
        d.CONSUME_ANNOTATION: "w-prov-1",
    }


def test_a_check_is_active_only_with_its_config() -> None:
    params = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}
    check_obj = {"spec": {"controllerName": d.CONTROLLER_NAME, "parameters": params}}
    assert d.active_condition(check_obj, {"cfg": {"spec": {"provisioningClassName": "c"}}})["status"] == "True"
    inactive = d.active_condition(check_obj, {})
    assert (inactive["status"], inactive["reason"]) == ("False", "BadParametersRef")
    assert inactive["message"] == "ProvisioningRequestConfig cfg not found"


def test_placement_counts_the_pods_as_they_will_run_with_the_runtime_class_overhead() -> None:
    from federation.limit_ranges import pod_set_as_run

    overheads = (("sandboxed", (("cpu", "1"),)),)
    wl = _delayed_workload(4)
    wl["spec"]["podSets"][0]["template"]["spec"]["runtimeClassName"] = "sandboxed"
    assert isinstance(_tas_placer().place_delayed(wl), dict), "1 cpu per pod: four fit in one rack"
    with_overhead = _tas_placer(as_run=lambda _ns, ps: pod_set_as_run(ps, None, overheads))
    verdict = with_overhead.place_delayed(wl)
    assert isinstance(verdict, str), "2 cpu per pod as they will run: four do not fit in one rack of 4 cpu"
    assert "doesn't allow to fit any of 4 pod(s)" in verdict
