import datetime as dt
from typing import Any

from manager.decisions.admission_checks import (
    CheckGate,
    CheckVerdict,
    admitted_checks,
    check_eviction,
    dispatch_gate,
    eviction_conditions,
    multikueue_check_names,
    multikueue_check_verdict,
    owner_check_eviction,
    owner_rejection,
    rejected_checks,
    with_multikueue_message,
)

CONFIGS = {"kfed": {"spec": {"clusters": ["worker-1", "worker-2"]}}}


def check(controller: str = "kueue.x-k8s.io/multikueue", config: str = "kfed") -> dict[str, object]:
    return {
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config},
        }
    }


def test_active_when_a_cluster_is_usable() -> None:
    assert multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={}) == CheckVerdict(
        True,
        "Active",
        "The admission check is active",  # Kueue's words
    )
    partial = multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={"worker-2": "BadConfig: x"})
    assert partial == CheckVerdict(True, "SomeActiveClusters", "Inactive clusters: [worker-2] (worker-2: BadConfig: x)")


def test_inactive_with_reasons() -> None:
    none_usable = multikueue_check_verdict(
        check(), configs=CONFIGS, cluster_problems={"worker-1": "not connected", "worker-2": "BadConfig: no Secret"}
    )
    assert none_usable == CheckVerdict(
        False,
        "NoUsableClusters",
        "Inactive clusters: [worker-1 worker-2] (worker-1: not connected; worker-2: BadConfig: no Secret)",
    )
    one_missing = multikueue_check_verdict(
        check(), configs=CONFIGS, cluster_problems={"worker-1": "no MultiKueueCluster worker-1", "worker-2": "x"}
    )
    assert one_missing is not None
    assert one_missing.message == (  # Kueue's words first: which are missing, which inactive
        "Missing clusters: [worker-1], Inactive clusters: [worker-2] (worker-1: no MultiKueueCluster worker-1; "
        "worker-2: x)"
    )
    missing = multikueue_check_verdict(check(config="nope"), configs=CONFIGS, cluster_problems={})
    assert missing == CheckVerdict(False, "BadConfig", "MultiKueueConfig nope not found")


def test_no_usable_cluster_among_many_says_each_reason_once() -> None:
    clusters = [f"worker-{i}" for i in range(1000)]
    verdict = multikueue_check_verdict(
        check(),
        configs={"kfed": {"spec": {"clusters": clusters}}},
        cluster_problems=dict.fromkeys(clusters, "not connected"),
    )
    assert verdict is not None
    assert verdict.reason == "NoUsableClusters"
    assert verdict.message.endswith("(worker-0, worker-1, worker-2 and 997 more: not connected)")


def test_unreadable_dispatch_annotations_keep_the_check_active_and_say_why() -> None:
    problem = "kfed.io/dispatch-policy='Packed' is not one of BestFit, LeastAllocated, Balanced: ..."
    alone = multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={}, config_problems={"kfed": problem})
    assert alone == CheckVerdict(
        True, "InvalidDispatchPolicy", f"The admission check is active; MultiKueueConfig kfed: {problem}"
    )
    # an inactive cluster keeps its reason; the message names both
    both = multikueue_check_verdict(
        check(), configs=CONFIGS, cluster_problems={"worker-2": "not connected"}, config_problems={"kfed": problem}
    )
    assert both is not None
    assert (both.active, both.reason) == (True, "SomeActiveClusters")
    assert "Inactive clusters: [worker-2]" in both.message
    assert problem in both.message
    # another config's problem is not this check's
    other = multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={}, config_problems={"x": problem})
    assert other == CheckVerdict(True, "Active", "The admission check is active")


def test_other_controllers_are_not_ours() -> None:
    assert multikueue_check_verdict(check(controller="example.com/other"), configs=CONFIGS, cluster_problems={}) is None


# -- the checks listed on a Workload --------------------------------------------------------------------------------

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
MK = frozenset({"mk"})


def reserved(*checks: tuple[str, str], message: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "generation": 1},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "",
                    "lastTransitionTime": "2026-11-22T11:00:00Z",
                }
            ],
            "admission": {"clusterQueue": "cq"},
            "nominatedClusterNames": ["worker-1"],
            "admissionChecks": [
                {"name": name, "state": state, "message": message, "lastTransitionTime": "2026-11-22T11:00:00Z"}
                for name, state in checks
            ],
        },
    }


def test_kfeds_own_checks_are_those_of_the_multikueue_controller() -> None:
    objects = [
        {"metadata": {"name": "mk"}, **check()},
        {"metadata": {"name": "prov"}, **check(controller="example.com/provisioning")},
    ]
    assert multikueue_check_names(objects) == {"mk"}


def test_the_gate_opens_only_when_every_other_check_is_ready() -> None:
    assert dispatch_gate(reserved(("mk", "Pending")), multikueue_checks=MK).open
    assert dispatch_gate(reserved(("mk", "Pending"), ("prov", "Ready")), multikueue_checks=MK).open
    waiting = dispatch_gate(reserved(("mk", "Pending"), ("prov", "Pending"), ("b", "Ready")), multikueue_checks=MK)
    assert waiting == CheckGate(pending=("prov",))
    assert not waiting.open
    mixed = dispatch_gate(
        reserved(("mk", "Pending"), ("a", "Retry"), ("b", "Rejected"), message="no capacity"), multikueue_checks=MK
    )
    assert mixed == CheckGate(retry=(("a", "no capacity"),), rejected=(("b", "no capacity"),))


def test_the_multikueue_message_changes_only_kfeds_checks_and_only_when_different() -> None:
    wl = reserved(("mk", "Pending"), ("prov", "Pending"))
    checks = with_multikueue_message(wl, multikueue_checks=MK, message="Dispatched to worker cluster worker-1")
    assert checks is not None
    assert [c["message"] for c in checks] == ["Dispatched to worker cluster worker-1", ""]
    wl["status"]["admissionChecks"] = checks
    assert with_multikueue_message(wl, multikueue_checks=MK, message="Dispatched to worker cluster worker-1") is None


def test_worker_admission_makes_only_the_multikueue_check_ready() -> None:
    checks, all_ready = admitted_checks(
        reserved(("mk", "Pending"), ("prov", "Pending")), multikueue_checks=MK, worker="worker-1", now=NOW
    )
    assert [(c["name"], c["state"]) for c in checks] == [("mk", "Ready"), ("prov", "Pending")]
    assert checks[0]["message"] == 'The workload was admitted on "worker-1"'  # Kueue's words, name quoted
    assert checks[0]["lastTransitionTime"] == "2026-11-22T12:00:00Z"
    assert checks[1]["lastTransitionTime"] == "2026-11-22T11:00:00Z"
    assert not all_ready
    _, all_ready = admitted_checks(
        reserved(("mk", "Pending"), ("prov", "Ready")), multikueue_checks=MK, worker="worker-1", now=NOW
    )
    assert all_ready


def test_a_rejected_check_deactivates_and_evicts() -> None:
    wl = reserved(("mk", "Pending"), ("prov", "Rejected"), message="no such machine type")
    eviction = check_eviction(dispatch_gate(wl, multikueue_checks=MK))
    assert eviction is not None
    assert eviction.deactivate
    assert eviction.reason == "DeactivatedDueToAdmissionCheck"
    # Kueue v0.19's words
    assert eviction.message == (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "prov" (no such machine type)'
    )
    assert eviction.event_reason == "AdmissionCheckRejected"
    assert (
        eviction.event_message == 'Deactivated due to AdmissionCheck in Rejected state: "prov" (no such machine type)'
    )
    conditions = {c["type"]: c for c in eviction_conditions(wl, eviction, now=NOW)}
    assert (conditions["Evicted"]["status"], conditions["Evicted"]["reason"]) == (
        "True",
        "DeactivatedDueToAdmissionCheck",
    )
    assert conditions["QuotaReserved"]["status"] == "True", "the eviction path releases the quota after the copies"


def test_a_retry_check_evicts_to_requeue_and_rejected_wins_over_retry() -> None:
    wl = reserved(("mk", "Pending"), ("prov", "Retry"))
    eviction = check_eviction(dispatch_gate(wl, multikueue_checks=MK))
    assert eviction is not None
    assert not eviction.deactivate
    assert eviction.reason == "AdmissionCheck"
    assert eviction.message == 'Evicted due to AdmissionCheck in Retry state: "prov"'  # Kueue's words
    assert eviction.event_reason == "EvictedDueToAdmissionCheck"
    several = reserved(("mk", "Pending"), ("z", "Retry"), ("a", "Retry"), message="try later")
    retried = check_eviction(dispatch_gate(several, multikueue_checks=MK))
    assert retried is not None
    assert retried.message == 'Evicted due to AdmissionChecks in Retry state: "a" (try later); "z" (try later)'
    both = reserved(("mk", "Pending"), ("a", "Retry"), ("b", "Rejected"))
    rejected = check_eviction(dispatch_gate(both, multikueue_checks=MK))
    assert rejected is not None
    assert rejected.deactivate


def test_pending_or_ready_checks_evict_nothing() -> None:
    wl = reserved(("mk", "Retry"), ("prov", "Pending"), ("b", "Ready"))
    assert check_eviction(dispatch_gate(wl, multikueue_checks=MK)) is None, "kfed's own check is not another's"


def _owned(*refs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "wl", "namespace": "ns", "ownerReferences": list(refs)}}


JOB_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}
MK_JOB = {"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}


def test_a_multikueue_job_owner_is_runnable_and_an_unknown_job_gets_no_verdict() -> None:
    assert owner_rejection(_owned(JOB_REF), owner_job=MK_JOB) is None
    assert owner_rejection(_owned(JOB_REF), owner_job=None) is None


def test_kueues_messages_for_what_multikueue_cannot_run() -> None:
    assert owner_rejection(_owned(), owner_job=None) == "No multikueue adapter found"
    not_controller = {**JOB_REF, "controller": False}
    assert owner_rejection(_owned(not_controller), owner_job=MK_JOB) == "No multikueue adapter found"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u2", "controller": True}
    assert (
        owner_rejection(_owned(deployment), owner_job=None)
        == 'No multikueue adapter found for owner kind "apps/v1, Kind=Deployment"'
    )
    pod = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u3", "controller": True}
    assert owner_rejection(_owned(pod), owner_job=None) == 'No multikueue adapter found for owner kind "/v1, Kind=Pod"'
    assert owner_rejection(_owned(JOB_REF), owner_job={"spec": {}}) == (
        'The owner is not managed by Kueue: Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'
    )
    other = {"spec": {"managedBy": "example.com/other"}}
    assert owner_rejection(_owned(JOB_REF), owner_job=other) == (
        "The owner is not managed by Kueue: "
        'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "example.com/other"'
    )


def test_a_rejected_multikueue_check_deactivates_with_kueues_words() -> None:
    now = dt.datetime(2026, 11, 25, 2, 0, tzinfo=dt.UTC)
    workload = {
        "status": {
            "admissionChecks": [
                {"name": "kfed", "state": "Pending", "message": "", "lastTransitionTime": "2026-11-25T01:00:00Z"},
                {"name": "prov", "state": "Ready", "message": "ok", "lastTransitionTime": "2026-11-25T01:00:00Z"},
            ]
        }
    }
    checks = rejected_checks(workload, multikueue_checks={"kfed"}, message="No multikueue adapter found", now=now)
    assert checks == [
        {
            "name": "kfed",
            "state": "Rejected",
            "message": "No multikueue adapter found",
            "lastTransitionTime": "2026-11-25T02:00:00Z",
        },
        {"name": "prov", "state": "Ready", "message": "ok", "lastTransitionTime": "2026-11-25T01:00:00Z"},
    ]
    eviction = owner_check_eviction("kfed", "No multikueue adapter found")
    assert eviction.deactivate
    assert eviction.reason == "DeactivatedDueToAdmissionCheck"
    assert eviction.message == (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "kfed" (No multikueue adapter found)'
    )
    assert eviction.event_reason == "AdmissionCheckRejected"
    assert (
        eviction.event_message
        == 'Deactivated due to AdmissionCheck in Rejected state: "kfed" (No multikueue adapter found)'
    )


def test_a_copy_waiting_in_its_workers_queue_is_named_after_a_while_with_the_workers_reason() -> None:
    from manager.decisions.admission_checks import QUEUED_REPORT_SECONDS, worker_queue_message

    since = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    copy = {
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: flavor rf doesn't match node affinity",
                    "lastTransitionTime": "2026-01-01T12:00:00Z",
                }
            ]
        }
    }
    assert worker_queue_message(copy, "w1", now=since + dt.timedelta(seconds=4)) == (
        None,
        QUEUED_REPORT_SECONDS - 4,
    )
    assert worker_queue_message(copy, "w1", now=since + dt.timedelta(seconds=QUEUED_REPORT_SECONDS)) == (
        'not admitted yet in worker cluster "w1": '
        "couldn't assign flavors to pod set main: flavor rf doesn't match node affinity",
        None,
    )
    reserved = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True", "message": "ok"}]}}
    assert worker_queue_message(reserved, "w1", now=since) == (None, None)
    assert worker_queue_message(None, "w1", now=since) == (None, None)
