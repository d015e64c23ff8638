from __future__ import annotations

from typing import Any

import pytest

from federation.merge_patch import apply_merge_patch as merged
from federation.pod_injection import (
    FlavorInjection,
    admitted_count,
    completions_follow_parallelism,
    kueue_pod_labels,
    pod_count_patch,
    requested_count,
    start_patch,
)


def test_a_merge_patch_merges_maps_replaces_lists_and_removes_nulls() -> None:
    target: dict[str, Any] = {"a": {"x": 1, "y": 2}, "l": [1, 2], "gone": 1, "kept": "k"}
    patch = {"a": {"y": 3, "z": {"deep": True}}, "l": [3], "gone": None, "new": {"n": 1}}
    assert merged(target, patch) == {"a": {"x": 1, "y": 3, "z": {"deep": True}}, "l": [3], "kept": "k", "new": {"n": 1}}
    assert target == {"a": {"x": 1, "y": 2}, "l": [1, 2], "gone": 1, "kept": "k"}, "the input is not changed"


def _admitted(**assignment: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "wl"},
        "status": {"admission": {"podSetAssignments": [{"name": "main", "flavors": {"cpu": "rf"}, **assignment}]}},
    }


def test_starting_a_spec_by_the_patch_gives_what_the_agent_would_start() -> None:
    existing = {"key": "a", "operator": "Exists"}
    added = {"key": "b", "operator": "Exists", "effect": "NoSchedule"}
    spec = {"suspend": True, "template": {"spec": {"nodeSelector": {"zone": "z"}, "tolerations": [existing]}}}
    flavors = {"rf": FlavorInjection({"pool": "p"}, (existing, added))}
    start = start_patch(spec, _admitted(), flavors=flavors)
    assert start.flavors == ("rf",)
    started = merged(spec, start.patch["spec"])
    assert started["suspend"] is False
    assert started["template"]["spec"] == {"nodeSelector": {"zone": "z", "pool": "p"}, "tolerations": [existing, added]}


def test_a_topology_assignment_gates_and_marks_the_pods() -> None:
    spec: dict[str, Any] = {"template": {"spec": {"containers": []}}}
    start = start_patch(spec, _admitted(topologyAssignment={"levels": ["h"]}), flavors={"rf": FlavorInjection({})})
    started = merged(spec, start.patch["spec"])
    assert started["template"]["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert started["template"]["metadata"] == {
        "labels": {"kueue.x-k8s.io/tas": "true", "kueue.x-k8s.io/podset": "main"},
        "annotations": {"kueue.x-k8s.io/workload": "wl"},
    }


def test_an_unknown_flavor_is_named() -> None:
    with pytest.raises(KeyError, match="rf"):
        start_patch({}, _admitted(), flavors={})


PARTIAL = {"kueue.x-k8s.io/job-min-parallelism": "2"}
INDEXED_SYNCED = {**PARTIAL, "kueue.x-k8s.io/job-completions-equal-parallelism": "true"}


def test_a_partially_admitted_job_starts_with_the_admitted_count() -> None:
    spec = {"suspend": True, "parallelism": 5, "completions": 10, "template": {"spec": {}}}
    start = start_patch(spec, _admitted(count=3), flavors={"rf": FlavorInjection({})}, annotations=PARTIAL)
    assert start.patch["spec"]["parallelism"] == 3
    assert "completions" not in start.patch["spec"], "completions follow only under equal-parallelism"
    synced = start_patch(spec, _admitted(count=3), flavors={"rf": FlavorInjection({})}, annotations=INDEXED_SYNCED)
    assert (synced.patch["spec"]["parallelism"], synced.patch["spec"]["completions"]) == (3, 3)


def test_a_job_closed_to_partial_admission_keeps_its_counts() -> None:
    spec = {"suspend": True, "parallelism": 5, "template": {"spec": {}}}
    start = start_patch(spec, _admitted(count=3), flavors={"rf": FlavorInjection({})})
    assert "parallelism" not in start.patch["spec"]
    whole = start_patch(spec, _admitted(count=5), flavors={"rf": FlavorInjection({})}, annotations=PARTIAL)
    assert "parallelism" not in whole.patch["spec"], "nothing to change when admitted whole"


def test_the_count_patch_restores_and_reads_go_booleans() -> None:
    spec = {"parallelism": 3, "completions": 3}
    assert pod_count_patch(spec, INDEXED_SYNCED, 5) == {"parallelism": 5, "completions": 5}
    assert pod_count_patch({}, PARTIAL, 1) == {}, "parallelism defaults to 1"
    assert pod_count_patch(spec, PARTIAL, None) == {}
    assert completions_follow_parallelism({"kueue.x-k8s.io/job-completions-equal-parallelism": "T"})
    assert not completions_follow_parallelism({"kueue.x-k8s.io/job-completions-equal-parallelism": "0"})
    with pytest.raises(ValueError, match="not true or false"):
        completions_follow_parallelism({"kueue.x-k8s.io/job-completions-equal-parallelism": "yes"})
    bad = {**PARTIAL, "kueue.x-k8s.io/job-completions-equal-parallelism": "yes"}
    assert pod_count_patch(spec, bad, 5) == {"parallelism": 5}


def test_the_admitted_count_is_the_first_assignments() -> None:
    assert admitted_count(_admitted(count=4)) == 4
    assert admitted_count({"status": {}}) is None


def test_the_requested_count_is_the_first_pod_sets() -> None:
    assert requested_count({"spec": {"podSets": [{"name": "main", "count": 6, "minCount": 2}]}}) == 6
    assert requested_count(None) is None
    assert requested_count({"spec": {"podSets": []}}) is None


def test_every_started_pod_carries_kueues_queue_and_pod_set_labels() -> None:
    workload = {
        "metadata": {"name": "job-a-1", "labels": {"kueue.x-k8s.io/multikueue-origin": "mk"}},
        "spec": {"queueName": "team-queue", "podSets": [{"name": "main", "count": 1}]},
        "status": {"admission": {"clusterQueue": "gpu-cq", "podSetAssignments": [{"name": "main", "flavors": {}}]}},
    }
    start = start_patch({"template": {"spec": {}}}, workload, flavors={})
    meta = start.patch["spec"]["template"]["metadata"]
    assert meta["labels"] == {
        "kueue.x-k8s.io/podset": "main",
        "kueue.x-k8s.io/local-queue-name": "team-queue",
        "kueue.x-k8s.io/cluster-queue-name": "gpu-cq",
        "kueue.x-k8s.io/multikueue-worker-workload-pod": "true",
    }
    assert meta["annotations"] == {"kueue.x-k8s.io/workload": "job-a-1"}
    assert "kueue.x-k8s.io/tas" not in meta["labels"], "only a pod set with a topology assignment is TAS"


def test_queue_names_that_are_not_label_values_are_left_out() -> None:
    workload = {
        "metadata": {"name": "w"},
        "spec": {"queueName": "q." + "x" * 70, "podSets": [{"name": "main", "count": 1}]},
        "status": {"admission": {"clusterQueue": "cq.with.dots", "podSetAssignments": [{"name": "main"}]}},
    }
    labels = kueue_pod_labels(workload, "main")
    assert labels == {"kueue.x-k8s.io/podset": "main"}
