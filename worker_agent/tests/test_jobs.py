from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.api_quotas import flavor_info
from federation.admission.api_workloads import FINISHED_STATE, workload_state
from federation.tests.api_builders import admitted_status, flavor, workload
from worker_agent.decisions.jobs import (
    finish_decision,
    finish_deferred,
    finished_view,
    job_finished,
    prebuilt_workload_name,
    start_decision,
)

NOW = dt.datetime(2026, 1, 1, 0, 2, tzinfo=dt.UTC)
FLAVORS = {
    "rf": flavor_info(
        flavor(
            "rf",
            nodeLabels={"pool": "a"},
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
        )
    )
}


def job(*, suspend: bool = True, conditions: list[dict[str, Any]] | None = None, **pod_spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "namespace": "ns",
            "name": "w",
            "resourceVersion": "3",
            "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "w"},
        },
        "spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "c"}], **pod_spec}}},
    }
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
    return obj


ADMITTED = workload("w", status=admitted_status("cq", "rf", "1"))


def test_admitted_workload_starts_its_job_with_flavor_node_labels_and_tolerations_in_one_patch() -> None:
    start = start_decision(job(nodeSelector={"zone": "z1"}), ADMITTED, flavors=FLAVORS)
    assert start is not None
    assert start.patch == {
        "spec": {
            "suspend": False,
            "template": {
                "metadata": {  # what Kueue's Job reconciler labels every pod with
                    "labels": {
                        "kueue.x-k8s.io/podset": "main",
                        "kueue.x-k8s.io/local-queue-name": "lq",
                        "kueue.x-k8s.io/cluster-queue-name": "cq",
                    },
                    "annotations": {"kueue.x-k8s.io/workload": "w"},
                },
                "spec": {
                    "nodeSelector": {"pool": "a"},
                    "tolerations": [
                        {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
                    ],
                },
            },
        }
    }
    assert prebuilt_workload_name(job()) == "w"


@pytest.mark.parametrize(
    ("the_job", "the_workload"),
    [
        (job(suspend=False), ADMITTED),  # already running
        (job(), workload("w")),  # not admitted yet
        (job(), workload("w", status=admitted_status("cq", "rf", "1", finished=True))),
        (job(conditions=[{"type": "Complete", "status": "True"}]), ADMITTED),
    ],
)
def test_no_start(the_job: dict[str, Any], the_workload: dict[str, Any]) -> None:
    assert start_decision(the_job, the_workload, flavors=FLAVORS) is None


def test_missing_flavor_blocks_the_start_with_its_name() -> None:
    with pytest.raises(KeyError, match="rf"):
        start_decision(job(), ADMITTED, flavors={})


def test_tolerations_already_present_are_not_duplicated() -> None:
    present = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    start = start_decision(job(tolerations=present), ADMITTED, flavors=FLAVORS)
    assert start is not None
    assert "tolerations" not in start.patch["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (
            [{"type": "Complete", "status": "True", "message": "Reached expected number of succeeded pods"}],
            ("Succeeded", "Reached expected number of succeeded pods"),
        ),
        ([{"type": "Complete", "status": "True"}], ("Succeeded", "Job finished successfully")),
        (
            [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
            ("Failed", "Job has reached the specified backoff limit"),
        ),
        (
            [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}],
            ("Failed", "Job failed: DeadlineExceeded"),
        ),
        ([{"type": "SuccessCriteriaMet", "status": "True"}], None),
        ([{"type": "Complete", "status": "False"}], None),
    ],
)
def test_job_conditions_map_to_finished_reason_and_message(
    conditions: list[dict[str, Any]], expected: tuple[str, str] | None
) -> None:
    assert job_finished(job(conditions=conditions)) == expected


def test_finish_sets_the_finished_condition_once_observing_the_workloads_generation_as_kueue_does() -> None:
    ended = job(suspend=False, conditions=[{"type": "Complete", "status": "True", "message": "done"}])
    finish = finish_decision(ended, ADMITTED, now=NOW)
    assert finish is not None
    finished = next(c for c in finish.status["conditions"] if c["type"] == "Finished")
    assert finished == {
        "type": "Finished",
        "status": "True",
        "reason": "Succeeded",
        "message": "done",
        "lastTransitionTime": "2026-01-01T00:02:00Z",
        "observedGeneration": ADMITTED["metadata"]["generation"],
    }
    assert {c["type"] for c in finish.status["conditions"]} == {"QuotaReserved", "Admitted", "Finished"}
    already = workload("w", status={**ADMITTED["status"], "conditions": finish.status["conditions"]})
    assert finish_decision(ended, already, now=NOW) is None


def test_only_kfed_manager_copies_defer_their_finished_write_and_the_view_is_finished_at_the_same_version() -> None:
    kfed_copy = workload("w", status=ADMITTED["status"])
    kfed_copy["metadata"]["labels"] = {
        "kueue.x-k8s.io/multikueue-origin": "multikueue",
        "kfed.io/manager-workload-uid": "u",
    }
    kfed_copy["metadata"]["resourceVersion"] = "7"
    kueue_copy = workload("w", status=ADMITTED["status"])
    kueue_copy["metadata"]["labels"] = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    assert finish_deferred(kfed_copy)
    assert not finish_deferred(kueue_copy)  # a Kueue manager reads the copy's Finished
    ended = job(suspend=False, conditions=[{"type": "Complete", "status": "True", "message": "done"}])
    finish = finish_decision(ended, kfed_copy, now=NOW)
    assert finish is not None
    view = finished_view(kfed_copy, finish)
    assert workload_state(view) == FINISHED_STATE
    assert view["metadata"]["resourceVersion"] == "7"
    assert view["status"]["admission"] == kfed_copy["status"]["admission"]
    assert finish_decision(ended, view, now=NOW) is None
    assert workload_state(kfed_copy) != FINISHED_STATE  # the cached object is not changed


def test_a_tas_workload_starts_its_job_gated_and_marked_for_the_ungater() -> None:
    import copy

    tas = copy.deepcopy(ADMITTED)
    tas["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universalValue": "n1"}], "universalPodCount": 1}],
    }
    start = start_decision(job(schedulingGates=[{"name": "other"}]), tas, flavors=FLAVORS)
    assert start is not None
    template = start.patch["spec"]["template"]
    assert template["spec"]["schedulingGates"] == [{"name": "other"}, {"name": "kueue.x-k8s.io/topology"}]
    assert template["metadata"]["labels"]["kueue.x-k8s.io/tas"] == "true"
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == tas["metadata"]["name"]


def test_the_prebuilt_workload_is_named_by_the_annotation_a_stock_kueue_manager_writes() -> None:
    copy = job()
    copy["metadata"]["labels"] = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    copy["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "job-w-1a2b3"}
    assert prebuilt_workload_name(copy) == "job-w-1a2b3"
    copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "other"
    assert prebuilt_workload_name(copy) == "job-w-1a2b3"  # Kueue reads the annotation first
    del copy["metadata"]["annotations"]
    assert prebuilt_workload_name(copy) == "other"
    copy["metadata"]["labels"] = {}
    assert prebuilt_workload_name(copy) is None
