import datetime as dt
from typing import Any

import pytest

from federation.workload_from_job import (
    JobNotQueueable,
    Priority,
    pod_sets_for_job,
    priority_class_changed,
    priority_spec,
    resolve_priority,
    workload_for_job,
    workload_name_for_job,
    workload_priority_class,
)
from manager.decisions.remote_copies import is_ours, remote_job, remote_workload
from manager.tests.builders import make_job

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)


def test_workload_mirrors_the_job() -> None:
    job = make_job("train").queue("lq").priority_class("high").parallelism(4, 3).request("cpu", "2").obj()
    wl = workload_for_job(job, priority=Priority("high", 1000))
    assert wl["metadata"]["name"] == workload_name_for_job("train", "uid-train")
    assert wl["metadata"]["ownerReferences"][0] | {} == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train",
        "uid": "uid-train",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert wl["spec"]["queueName"] == "lq"
    assert wl["spec"]["priority"] == 1000
    assert wl["spec"]["priorityClassRef"]["name"] == "high"
    [pod_set] = wl["spec"]["podSets"]
    assert pod_set["count"] == 3  # completions < parallelism
    assert pod_set["template"]["metadata"]["labels"] == {"app": "x"}


def test_names_are_kueues_jobframework_names() -> None:
    # SHA-1 over "Job\nbatch\n<name>\n<uid>", first 5 hex digits, after "job-<name>-" (Kueue's jobframework).
    assert workload_name_for_job("train", "6c1a2e9f-0b1d-4c2e-9a55-8f4d1b2c3d4e") == "job-train-4c04b"
    assert workload_name_for_job("a" * 80, "uid-1") == "job-" + "a" * 53 + "-d0d88"  # 57-char prefix, 63 in all


def test_names_are_deterministic_short_and_valid() -> None:
    long_name = "a" * 80
    name = workload_name_for_job(long_name, "uid-1")
    assert name == workload_name_for_job(long_name, "uid-1")
    assert name != workload_name_for_job(long_name, "uid-2")
    assert len(name) <= 63
    assert name[-6] == "-"


def test_completions_follow_parallelism_only_on_an_indexed_job_with_equal_counts() -> None:
    def job(value: str, *, mode: str = "Indexed", completions: int = 5) -> dict[str, object]:
        built = make_job("p").queue("lq").parallelism(5, completions)
        built = built.annotation("kueue.x-k8s.io/job-min-parallelism", "2")
        obj = built.annotation("kueue.x-k8s.io/job-completions-equal-parallelism", value).obj()
        obj["spec"]["completionMode"] = mode
        return obj

    assert pod_sets_for_job(job("true"))[0]["count"] == 5
    assert pod_sets_for_job(job("false", mode="NonIndexed", completions=9))[0]["count"] == 5
    with pytest.raises(JobNotQueueable, match="not true or false"):
        pod_sets_for_job(job("yes"))
    with pytest.raises(JobNotQueueable, match="only allowed on an Indexed Job"):
        pod_sets_for_job(job("true", mode="NonIndexed"))
    with pytest.raises(JobNotQueueable, match="completions must equal parallelism"):
        pod_sets_for_job(job("true", completions=9))


def test_min_parallelism_enables_partial_admission_and_bad_values_are_refused() -> None:
    job = make_job("p").queue("lq").parallelism(5).annotation("kueue.x-k8s.io/job-min-parallelism", "2").obj()
    assert workload_for_job(job, priority=Priority(None, 0))["spec"]["podSets"][0]["minCount"] == 2
    bad = make_job("p").queue("lq").parallelism(5).annotation("kueue.x-k8s.io/job-min-parallelism", "9").obj()
    with pytest.raises(JobNotQueueable, match="between 1 and 5"):
        workload_for_job(bad, priority=Priority(None, 0))


def test_the_unhealthy_nodes_eviction_threshold_goes_from_the_job_to_its_workload_and_its_copy() -> None:
    key = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
    job = make_job("t").queue("lq").annotation(key, "2").obj()
    wl = workload_for_job(job, priority=Priority(None, 0))
    assert wl["metadata"]["annotations"] == {key: "2"}
    wl["metadata"]["uid"] = "wl-uid"
    assert remote_workload(wl, origin="m", sent_at=NOW)["metadata"]["annotations"][key] == "2"
    plain = workload_for_job(make_job("u").queue("lq").obj(), priority=Priority(None, 0))
    assert "annotations" not in plain["metadata"]
    for bad in ("0", "9", "many", " 2 ", ""):
        with pytest.raises(JobNotQueueable, match="must be an integer between 1 and 8"):
            workload_for_job(make_job("t").queue("lq").annotation(key, bad).obj(), priority=Priority(None, 0))


def test_remote_copies_drop_manager_only_fields_and_carry_ownership() -> None:
    job = make_job("train").queue("lq").obj()
    wl = workload_for_job(job, priority=Priority(None, 0))
    wl["metadata"].update(uid="wl-uid", resourceVersion="7")
    copy_wl = remote_workload(wl, origin="multikueue", sent_at=NOW)
    assert "ownerReferences" not in copy_wl["metadata"]
    assert "uid" not in copy_wl["metadata"]
    assert copy_wl["spec"] == wl["spec"]
    assert "kueue.x-k8s.io/job-uid" in wl["metadata"]["labels"]
    assert "kueue.x-k8s.io/job-uid" not in copy_wl["metadata"]["labels"], "a Kueue worker would finish it as orphaned"
    copy_job = remote_job(job, manager_workload=wl, origin="multikueue")
    assert "managedBy" not in copy_job["spec"]
    assert "selector" not in copy_job["spec"]
    assert copy_job["spec"]["suspend"] is True
    assert copy_job["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == wl["metadata"]["name"]
    assert copy_job["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    assert is_ours(copy_job, origin="multikueue", manager_workload_uid="wl-uid")
    assert not is_ours(copy_job, origin="multikueue", manager_workload_uid="other")
    assert not is_ours(job, origin="multikueue")


def test_a_job_without_a_priority_class_gets_priority_zero_and_no_reference() -> None:
    wl = workload_for_job(make_job("plain").queue("lq").obj(), priority=Priority(None, 0))
    assert wl["spec"]["priority"] == 0
    assert "priorityClassRef" not in wl["spec"]


def test_relabelling_the_job_changes_its_workloads_priority_class_and_removing_the_label_clears_it() -> None:
    job = make_job("train").queue("lq").priority_class("low").obj()
    wl = workload_for_job(job, priority=Priority("low", 10))
    assert not priority_class_changed(wl, job)
    relabelled = make_job("train").queue("lq").priority_class("high").obj()
    assert priority_class_changed(wl, relabelled)
    assert priority_spec(Priority("high", 1000)) == {
        "priority": 1000,
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
    }
    unlabelled = make_job("train").queue("lq").obj()
    assert priority_class_changed(wl, unlabelled)
    assert priority_spec(Priority(None, 0)) == {"priority": 0, "priorityClassRef": None}


def _classes(*objs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs}


def _pc(name: str, value: int, *, default: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value, "globalDefault": default}


def _resolve(job: dict[str, Any], wpcs: dict[str, Any], pcs: dict[str, Any]) -> Priority:
    return resolve_priority(job, workload_class=wpcs.get, pod_class=pcs.get, pod_classes=pcs.values())


def test_priority_comes_from_the_workload_priority_class_then_the_pods_priority_class_then_the_default() -> None:
    wpcs = _classes(_pc("wl-high", 5000))
    pcs = _classes(_pc("pod-high", 1000), _pc("fallback", 10, default=True), _pc("other", 5, default=True))
    job = make_job("p").queue("lq").priority_class("wl-high").obj()
    job["spec"]["template"]["spec"]["priorityClassName"] = "pod-high"
    assert _resolve(job, wpcs, pcs) == Priority("wl-high", 5000)
    del job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    assert _resolve(job, wpcs, pcs) == Priority("pod-high", 1000, pod_class=True)
    del job["spec"]["template"]["spec"]["priorityClassName"]
    assert _resolve(job, wpcs, pcs) == Priority("other", 5, pod_class=True), "the lowest valued global default"
    assert _resolve(job, wpcs, {}) == Priority(None, 0)
    job["spec"]["template"]["spec"]["priorityClassName"] = "missing"
    with pytest.raises(JobNotQueueable, match="PriorityClass 'missing'") as pod_class_missing:
        _resolve(job, wpcs, pcs)
    assert pod_class_missing.value.reason is None  # the caller's reason (CreatingWorkloadFailed)


def test_a_missing_workload_priority_class_is_kueues_workload_priority_class_not_found() -> None:
    job = make_job("p").queue("lq").priority_class("gone").obj()
    with pytest.raises(JobNotQueueable) as missing:
        _resolve(job, _classes(_pc("wl-high", 5000)), {})
    assert (missing.value.reason, str(missing.value)) == (
        "WorkloadPriorityClassNotFound",
        'WorkloadPriorityClass "gone" not found',
    )


def test_a_pods_priority_class_is_referenced_as_such_and_only_the_label_changes_it() -> None:
    job = make_job("p").queue("lq").obj()
    job["spec"]["template"]["spec"]["priorityClassName"] = "pod-high"
    wl = workload_for_job(job, priority=Priority("pod-high", 1000, pod_class=True))
    assert wl["spec"]["priority"] == 1000
    ref = wl["spec"]["priorityClassRef"]
    assert ref == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "pod-high"}
    assert not priority_class_changed(wl, job)
    assert workload_priority_class(ref) is None, "no WorkloadPriorityClass label for the Job copy"
    labelled = make_job("p").queue("lq").priority_class("wl-high").obj()
    assert priority_class_changed(wl, labelled)
    wpc_ref = priority_spec(Priority("wl-high", 5000))["priorityClassRef"]
    assert workload_priority_class(wpc_ref) == "wl-high"
