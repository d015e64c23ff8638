"""Model behaviour: validation mirrors the apiserver, unset stays unset, defaults are Kueue's, helpers work."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from federation.api import ClusterQueue, ClusterQueueSpec, ObjectMeta, Workload, parse_object
from federation.api.clusterqueue import ClusterQueuePreemption, FlavorFungibility
from federation.api.common import is_quantity
from federation.api.crdgen import openapi_schema
from federation.api.kinds import UnknownKind
from federation.api.quota import FlavorQuotas, ResourceGroup, ResourceQuota
from federation.api.schema import apply_defaults
from federation.api.tests.support import example_documents


def example(name: str, index: int = 0) -> dict[str, Any]:
    docs = dict(example_documents())
    return copy.deepcopy(docs[f"{name}#{index}"])


def cq(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": spec}


def group(*flavors: dict[str, Any], covered: tuple[str, ...] = ("cpu", "memory")) -> dict[str, Any]:
    return {"coveredResources": list(covered), "flavors": list(flavors)}


def flavor(name: str, *resources: tuple[str, Any], **limits: Any) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": r, "nominalQuota": q, **limits} for r, q in resources]}


def errors_of(obj: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        parse_object(obj)
    return str(info.value)


# --- unknown fields and types ----------------------------------------------------------------------------------


def test_misspelled_field_is_refused_naming_it() -> None:
    obj = example("clusterqueue.yaml")
    obj["spec"]["cohortNmae"] = obj["spec"].pop("cohortName")
    message = errors_of(obj)
    assert "spec.cohortNmae" in message
    assert "Extra inputs are not permitted" in message


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(UnknownKind):
        parse_object({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue"})


def test_lenient_parse_prunes_fields_from_a_newer_kueue_and_keeps_metadata() -> None:
    obj = example("clusterqueue.yaml")
    obj["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "TryPreferredFlavors"}}
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    parsed = parse_object(obj, lenient=True)
    dumped = parsed.to_manifest()
    assert "concurrentAdmissionPolicy" not in dumped["spec"]
    assert dumped["metadata"]["managedFields"] == [{"manager": "kubectl"}]


@pytest.mark.parametrize("bad", ["1.5.2", "ten", "2 Gi", "", "1GiB", True, 1.5])
def test_bad_quantities_are_refused(bad: Any) -> None:
    assert not is_quantity(bad)
    errors_of(cq({"resourceGroups": [group(flavor("f", ("cpu", bad), ("memory", 1)))]}))


@pytest.mark.parametrize("good", ["500m", "2Gi", "1.5", "+1", "-1", "1e3", "0.5E-2", ".5", 4, 0])
def test_good_quantities_are_kept_as_written(good: Any) -> None:
    assert is_quantity(good)
    obj = cq({"resourceGroups": [group(flavor("f", ("cpu", good), ("memory", 1)))]})
    assert parse_object(obj).to_manifest() == obj


def test_integers_are_strict_and_bounded() -> None:
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"}}
    assert parse_object({**wpc, "value": 2**31 - 1}).to_manifest()["value"] == 2**31 - 1
    for bad in (2**31, "5", True, 1.0):
        errors_of({**wpc, "value": bad})


def test_enum_values_are_kueues() -> None:
    assert "Input should be 'StrictFIFO' or 'BestEffortFIFO'" in errors_of(cq({"queueingStrategy": "FIFO"}))
    errors_of(cq({"stopPolicy": "Drain"}))
    errors_of(cq({"preemption": {"withinClusterQueue": "Any"}}))


def test_names_are_dns_subdomains() -> None:
    errors_of(cq({"cohortName": "Team_A"}))
    errors_of(cq({"cohortName": "a" * 254}))


# --- CEL-rule twins ------------------------------------------------------------------------------------------------


def test_borrowing_limit_needs_a_cohort() -> None:
    obj = cq({"resourceGroups": [group(flavor("f", ("cpu", 1), ("memory", 1), borrowingLimit=1))]})
    assert "borrowingLimit must be nil when cohort is empty" in errors_of(obj)
    obj["spec"]["cohortName"] = "c"
    parse_object(obj)


def test_lending_limit_needs_a_cohort() -> None:
    obj = cq({"resourceGroups": [group(flavor("f", ("cpu", 1), ("memory", 1), lendingLimit=1))]})
    assert "lendingLimit must be nil when cohort is empty" in errors_of(obj)


def test_cohort_limits_need_a_parent() -> None:
    obj = example("cohort.yaml", 1)
    del obj["spec"]["parentName"]
    assert "borrowingLimit must be nil when parentName is empty" in errors_of(obj)


def test_flavor_must_cover_exactly_the_resources_in_order() -> None:
    assert "same number of resources" in errors_of(cq({"resourceGroups": [group(flavor("f", ("cpu", 1)))]}))
    swapped = cq({"resourceGroups": [group(flavor("f", ("memory", 1), ("cpu", 1)))]})
    assert "each flavor must list the coveredResources, in the same order" in errors_of(swapped)


def test_duplicate_map_keys_are_refused() -> None:
    obj = cq(
        {"resourceGroups": [group(flavor("f", ("cpu", 1), ("memory", 1)), flavor("f", ("cpu", 1), ("memory", 1)))]}
    )
    assert "duplicate entry" in errors_of(obj)
    wl = example("workload.yaml")
    wl["spec"]["podSets"][1]["name"] = "launcher"
    assert "duplicate entry" in errors_of(wl)


def test_resource_group_limits() -> None:
    too_many = [group(flavor(f"f{i}", ("cpu", 1), ("memory", 1))) for i in range(17)]
    assert "at most 16 items" in errors_of(cq({"resourceGroups": too_many}))


def test_reclaim_never_forbids_borrow_within_cohort() -> None:
    obj = cq({"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}})
    assert "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never" in errors_of(obj)


def test_tas_flavor_needs_node_labels() -> None:
    obj = example("resourceflavor.yaml", 2)
    del obj["spec"]["nodeLabels"]
    assert "at least one nodeLabel is required when topology is set" in errors_of(obj)


def test_flavor_taints_and_tolerations_are_checked() -> None:
    obj = example("resourceflavor.yaml", 1)
    obj["spec"]["nodeTaints"][0]["effect"] = "NoRun"
    assert "supported taint effect values" in errors_of(obj)
    obj = example("resourceflavor.yaml", 1)
    obj["spec"]["tolerations"] = [{"operator": "Equal", "value": "x"}]
    assert "operator must be Exists when 'key' is empty" in errors_of(obj)
    obj["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "value": "x"}]
    assert "a value must be empty when 'operator' is 'Exists'" in errors_of(obj)
    obj["spec"]["tolerations"] = [{"key": "k", "tolerationSeconds": 5, "effect": "NoSchedule"}]
    assert "effect must be 'NoExecute' when 'tolerationSeconds' is set" in errors_of(obj)
    obj["spec"]["nodeLabels"] = {f"k{i}": "v" for i in range(9)}
    errors_of(obj)


def test_hostname_only_at_the_lowest_topology_level() -> None:
    obj = example("topology.yaml")
    levels = obj["spec"]["levels"]
    obj["spec"]["levels"] = [levels[2], levels[0], levels[1]]
    assert "kubernetes.io/hostname label can only be used at the lowest level" in errors_of(obj)
    obj["spec"]["levels"] = [levels[0], levels[0]]
    assert "must be unique" in errors_of(obj)
    obj["spec"]["levels"] = []
    errors_of(obj)


def test_workload_rules() -> None:
    wl = example("workload.yaml")
    del wl["spec"]["priority"]
    assert "priority should not be nil when priorityClassRef is set" in errors_of(wl)
    wl = example("workload.yaml")
    wl["spec"]["podSets"][1]["minCount"] = 9
    assert "minCount should be positive and less or equal to count" in errors_of(wl)
    wl = example("workload.yaml")
    wl["spec"]["podSets"][1]["minCount"] = 0  # Kueue v0.20 accepts 0
    assert parse_object(wl).to_manifest()["spec"]["podSets"][1]["minCount"] == 0
    wl = example("workload.yaml")
    wl["spec"]["priorityClassRef"]["group"] = "scheduling.k8s.io"
    assert "only the PriorityClass kind is allowed for the scheduling.k8s.io group" in errors_of(wl)
    wl = example("workload.yaml")
    wl["spec"]["podSets"] = [wl["spec"]["podSets"][0]] * 0
    errors_of(wl)


def test_admitted_workload_rules() -> None:
    wl = example("workload-admitted.yaml")
    wl["status"]["nominatedClusterNames"] = ["worker-2"]
    assert "clusterName and nominatedClusterNames are mutually exclusive" in errors_of(wl)
    wl = example("workload-admitted.yaml")
    wl["status"]["admission"]["podSetAssignments"] = []
    assert "podSetAssignments must have the same number of podSets as the spec" in errors_of(wl)
    wl = example("workload-admitted.yaml")
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]["podCounts"] = [1, 1, 1]
    assert "Exactly one of podCounts, universalPodCount must be set" in errors_of(wl)
    wl = example("workload-admitted.yaml")
    wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["slices"][0]["domainCount"] = 4
    assert "roots, if set, must have length equal to domainCount" in errors_of(wl)


# --- unset stays unset; defaults are Kueue's ------------------------------------------------------------------------


def test_unset_fields_are_not_serialised_but_read_as_kueue_defaults() -> None:
    model = ClusterQueue.model_validate(cq({}))
    assert model.to_manifest() == cq({})
    assert model.spec.queueing_strategy == "BestEffortFIFO"
    assert model.spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert model.spec.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert model.spec.preemption.reclaim_within_cohort == "Never"
    assert model.spec.preemption.borrow_within_cohort.policy == "Never"
    assert model.spec.preemption.within_cluster_queue == "Never"
    assert model.spec.stop_policy == "None"
    assert model.spec.namespace_selector is None


def test_explicit_defaults_stay() -> None:
    obj = cq({"queueingStrategy": "BestEffortFIFO", "preemption": {}, "stopPolicy": "None"})
    assert parse_object(obj).to_manifest() == obj


def test_models_built_in_python_serialise_what_was_set() -> None:
    built = ClusterQueue(
        metadata=ObjectMeta(name="q"),
        spec=ClusterQueueSpec(
            cohort_name="c",
            resource_groups=[
                ResourceGroup(
                    covered_resources=["cpu"],
                    flavors=[FlavorQuotas(name="f", resources=[ResourceQuota(name="cpu", nominal_quota="2")])],
                )
            ],
            preemption=ClusterQueuePreemption(within_cluster_queue="LowerPriority"),
        ),
    )
    assert built.to_manifest() == cq(
        {
            "cohortName": "c",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "2"}]}],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        }
    )
    built.spec.stop_policy = "Hold"
    assert built.to_manifest()["spec"]["stopPolicy"] == "Hold"


def test_server_defaulting_matches_kueue() -> None:
    stored = apply_defaults(openapi_schema(ClusterQueue), cq({}))
    assert stored["spec"] == {
        "queueingStrategy": "BestEffortFIFO",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "Never",
        },
        "stopPolicy": "None",
    }
    wl = apply_defaults(openapi_schema(Workload), {"spec": {"podSets": [{"template": {}}]}})
    assert wl["spec"] == {"podSets": [{"name": "main", "count": 1, "template": {}}], "active": True}
    assert FlavorFungibility().model_dump() == {}


def test_metadata_keeps_unknown_fields_and_typed_ones() -> None:
    wl = example("workload.yaml")
    wl["metadata"].update(
        {
            "uid": "u-1",
            "resourceVersion": "7",
            "generation": 3,
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}],
            "managedFields": [{"manager": "kfed"}],
            "selfLink": "",
        }
    )
    model = parse_object(wl)
    assert model.metadata.generation == 3
    assert model.metadata.owner_references is not None
    assert model.metadata.owner_references[0].controller is True
    assert model.metadata.label("kueue.x-k8s.io/queue-name") == "team-a"
    assert model.to_manifest() == wl


def test_workload_helpers() -> None:
    admitted = parse_object(example("workload-admitted.yaml"))
    assert isinstance(admitted, Workload)
    assert admitted.is_quota_reserved
    assert admitted.is_admitted
    assert not admitted.is_finished
    pending = parse_object(example("workload.yaml"))
    assert isinstance(pending, Workload)
    assert not pending.is_admitted
    workers = pending.spec.pod_sets[1]
    assert workers.annotations["kueue.x-k8s.io/podset-required-topology"] == "cloud.provider.com/topology-rack"
    assert workers.pod_spec["containers"][0]["name"] == "worker"
