import datetime as dt
import json

import pytest

from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.pod_injection import INJECTED_ANNOTATION
from federation.protocol import MANAGER_UID_LABEL, SENT_AT_ANNOTATION
from manager.decisions.remote_copies import (
    copies_selector,
    made_for,
    owned_by,
    remote_job,
    remote_workload,
    started_remote_job,
)
from manager.tests.builders import make_job

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)

MANAGER_WORKLOAD = {"metadata": {"name": "job-train-abc12", "namespace": "team-a", "uid": "wl-uid"}}


def test_the_job_copy_drops_ttl_so_the_worker_keeps_it_until_its_final_status_is_mirrored() -> None:
    job = make_job("train").obj()
    job["spec"]["ttlSecondsAfterFinished"] = 0
    copy = remote_job(job, manager_workload=MANAGER_WORKLOAD, origin="multikueue")
    assert "ttlSecondsAfterFinished" not in copy["spec"]
    assert job["spec"]["ttlSecondsAfterFinished"] == 0, "the manager Job itself is left as it is"


def test_the_job_copy_is_suspended_unmanaged_and_labelled_ours() -> None:
    copy = remote_job(make_job("train").obj(), manager_workload=MANAGER_WORKLOAD, origin="multikueue")
    assert copy["spec"]["suspend"] is True
    assert "managedBy" not in copy["spec"]
    assert "selector" not in copy["spec"]
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    assert copy["metadata"]["labels"]["kfed.io/manager-workload-uid"] == "wl-uid"
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == "job-train-abc12"


def test_the_workload_copy_is_owned_by_the_job_copy_so_deleting_the_job_takes_it_along() -> None:
    wl = {**MANAGER_WORKLOAD, "spec": {"queueName": "lq", "podSets": []}}
    job_copy = {"kind": "Job", "metadata": {"name": "train", "namespace": "team-a", "uid": "worker-job-uid"}}
    copy = remote_workload(wl, origin="multikueue", sent_at=NOW, job_copy=job_copy)
    assert copy["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "worker-job-uid", "controller": True}
    ]
    assert owned_by(copy, job_copy)
    other_job = {"metadata": {"name": "train", "uid": "a-later-job"}}
    assert not owned_by(copy, other_job), "a same-named Job created since does not own it"
    assert not owned_by(remote_workload(wl, origin="multikueue", sent_at=NOW), job_copy)
    assert not owned_by(copy, None)


def test_the_started_job_copy_carries_the_admission_and_is_owned_by_the_workload_copy() -> None:
    import pytest

    from federation.pod_injection import FlavorInjection

    job = make_job("train").obj()
    job["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "z1"}
    admitted_copy = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-train-abc12", "namespace": "team-a", "uid": "copy-uid"},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "rf"}}]}
        },
    }
    toleration = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
    flavors = {"rf": FlavorInjection({"pool": "a"}, (toleration,))}
    copy = started_remote_job(
        job, manager_workload=MANAGER_WORKLOAD, origin="multikueue", admitted_copy=admitted_copy, flavors=flavors
    )
    assert copy["spec"]["suspend"] is False
    pod_spec = copy["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"zone": "z1", "pool": "a"}
    assert pod_spec["tolerations"] == [toleration]
    injected = json.loads(copy["metadata"]["annotations"][INJECTED_ANNOTATION])  # for the agent's OutOfSync check
    assert injected == {"nodeSelector": {"pool": "a"}, "tolerations": [toleration]}
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == "job-train-abc12"
    assert copy["metadata"]["ownerReferences"] == [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "job-train-abc12", "uid": "copy-uid"}
    ]
    assert owned_by(copy, admitted_copy)
    assert "nodeSelector" not in make_job("train").obj()["spec"]["template"]["spec"]
    with pytest.raises(KeyError, match="rf"):
        started_remote_job(
            job, manager_workload=MANAGER_WORKLOAD, origin="multikueue", admitted_copy=admitted_copy, flavors={}
        )


def _partially_admitted(count: int) -> dict[str, object]:
    return {
        **MANAGER_WORKLOAD,
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 6, "minCount": 2, "template": {}}]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": count}]}},
    }


def test_partially_admitted_copies_carry_the_count_the_manager_reserved() -> None:
    job = (
        make_job("train")
        .parallelism(6, 6)
        .annotation("kueue.x-k8s.io/job-min-parallelism", "2")
        .annotation("kueue.x-k8s.io/job-completions-equal-parallelism", "true")
        .obj()
    )
    manager_workload = _partially_admitted(4)
    workload_copy = remote_workload(manager_workload, origin="multikueue", sent_at=NOW)
    assert workload_copy["spec"]["podSets"][0]["count"] == 4, "the worker reserves no more than the manager did"
    assert workload_copy["spec"]["podSets"][0]["minCount"] == 2, "and may still shrink it"
    assert manager_workload["spec"]["podSets"][0]["count"] == 6, "the manager Workload keeps the Job's count"  # type: ignore[index]
    job_copy = remote_job(job, manager_workload=manager_workload, origin="multikueue")
    assert (job_copy["spec"]["parallelism"], job_copy["spec"]["completions"]) == (4, 4)
    assert job["spec"]["parallelism"] == 6


def test_a_copy_of_a_wholly_admitted_or_unannotated_job_keeps_its_count() -> None:
    whole = _partially_admitted(6)
    assert remote_workload(whole, origin="multikueue", sent_at=NOW)["spec"]["podSets"][0]["count"] == 6
    plain = make_job("train").parallelism(6, 6).obj()
    assert remote_job(plain, manager_workload=_partially_admitted(4), origin="multikueue")["spec"]["parallelism"] == 6


def test_a_job_admitted_at_its_minimum_is_sent_as_one_that_cannot_shrink() -> None:
    job = make_job("train").parallelism(6, 6).annotation("kueue.x-k8s.io/job-min-parallelism", "2").obj()
    manager_workload = _partially_admitted(2)
    pod_set = remote_workload(manager_workload, origin="multikueue", sent_at=NOW)["spec"]["podSets"][0]
    assert pod_set["count"] == 2
    assert "minCount" not in pod_set
    job_copy = remote_job(job, manager_workload=manager_workload, origin="multikueue")
    assert job_copy["spec"]["parallelism"] == 2
    assert "kueue.x-k8s.io/job-min-parallelism" not in (job_copy["metadata"].get("annotations") or {})
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2", "the manager Job keeps it"


def test_the_batch_selector_names_the_origin_and_each_uid_once_in_order() -> None:
    selector = copies_selector(origin="multikueue", manager_workload_uids=["uid-b", "uid-a", "uid-b"])
    assert selector == f"{MULTIKUEUE_ORIGIN_LABEL}=multikueue,{MANAGER_UID_LABEL} in (uid-a,uid-b)"


def test_the_batch_selector_refuses_an_empty_set_which_would_match_every_copy() -> None:
    with pytest.raises(ValueError, match="at least one"):
        copies_selector(origin="multikueue", manager_workload_uids=[])


def test_the_workload_copy_says_when_the_manager_sent_it_by_the_managers_clock() -> None:
    manager_workload = {
        "metadata": {"name": "w", "namespace": "ns", "uid": "u", "annotations": {SENT_AT_ANNOTATION: "stale"}},
        "spec": {"podSets": [{"name": "main", "count": 1}]},
    }
    copy = remote_workload(manager_workload, origin="multikueue", sent_at=NOW)
    assert copy["metadata"]["annotations"] == {SENT_AT_ANNOTATION: "2026-12-07T12:00:00Z"}


def test_a_copy_that_lost_its_origin_label_is_still_known_by_its_manager_uid_label() -> None:
    unlabelled = {"metadata": {"labels": {"kfed.io/manager-workload-uid": "u1"}}}
    assert made_for(unlabelled, "u1")
    assert not made_for(unlabelled, "u2"), "a copy for another Workload"
    assert not made_for({"metadata": {"labels": {"owner": "someone-else"}}}, "u1"), "a foreign Job"
    assert not made_for(unlabelled, ""), "no uid, no match"
