"""The CEL rules in the CRDs and their Python twins agree: same objects rejected, with the same message.

The CEL side is evaluated locally with cel-python (skipped when it is not installed); the apiserver's own
evaluation is covered by e2e/integration/test_api_manifests.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from federation.api import ALL_KINDS, parse_object
from federation.api.crdgen import openapi_schema
from federation.api.kinds import model_for
from federation.api.schema import Crd, apply_defaults
from federation.api.tests.support import example_documents, failing_rules, rule_messages

DOCS = dict(example_documents())
Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def run(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return run


def _delete(path: str) -> Mutation:
    def run(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]

    return run


CASES: list[tuple[str, str, Mutation, str]] = [
    (
        "cq-borrowing-no-cohort",
        "clusterqueue.yaml#0",
        _delete("spec.cohortName"),
        "borrowingLimit must be nil when cohort is empty",
    ),
    (
        "cq-flavor-order",
        "clusterqueue.yaml#0",
        _set("spec.resourceGroups.0.coveredResources", ["memory", "cpu"]),
        "each flavor must list the coveredResources, in the same order",
    ),
    (
        "cq-flavor-count",
        "clusterqueue.yaml#0",
        _set("spec.resourceGroups.0.coveredResources", ["cpu"]),
        "flavors must have the same number of resources as the coveredResources",
    ),
    (
        "cq-reclaim-never",
        "clusterqueue.yaml#0",
        _set("spec.preemption.reclaimWithinCohort", "Never"),
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
    ),
    (
        "cohort-limit-no-parent",
        "cohort.yaml#1",
        _delete("spec.parentName"),
        "borrowingLimit must be nil when parentName is empty",
    ),
    (
        "rf-tas-no-labels",
        "resourceflavor.yaml#2",
        _delete("spec.nodeLabels"),
        "at least one nodeLabel is required when topology is set",
    ),
    (
        "rf-taint-effect",
        "resourceflavor.yaml#1",
        _set("spec.nodeTaints.0.effect", "Sometimes"),
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
    (
        "rf-toleration-operator",
        "resourceflavor.yaml#1",
        _set("spec.tolerations.0.operator", "Like"),
        "supported toleration values: 'Equal'(default), 'Exists'",
    ),
    (
        "topology-hostname-high",
        "topology.yaml#0",
        _set("spec.levels", [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]),
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    ),
    (
        "topology-unique",
        "topology.yaml#0",
        _set("spec.levels", [{"nodeLabel": "a"}, {"nodeLabel": "a"}]),
        "must be unique",
    ),
    (
        "wl-priority",
        "workload.yaml#0",
        _delete("spec.priority"),
        "priority should not be nil when priorityClassRef is set",
    ),
    (
        "wl-mincount",
        "workload.yaml#0",
        _set("spec.podSets.1.minCount", 9),
        "minCount should be positive and less or equal to count",
    ),
    (
        "wl-class-kind",
        "workload.yaml#0",
        _set("spec.priorityClassRef.kind", "PriorityClass"),
        "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    ),
    (
        "wl-assignments",
        "workload-admitted.yaml#0",
        _set("status.admission.podSetAssignments", []),
        "podSetAssignments must have the same number of podSets as the spec",
    ),
    (
        "wl-nominated",
        "workload-admitted.yaml#0",
        _set("status.nominatedClusterNames", ["worker-2"]),
        "clusterName and nominatedClusterNames are mutually exclusive",
    ),
    (
        "wl-universal-and-roots",
        "workload-admitted.yaml#0",
        _set("status.admission.podSetAssignments.0.topologyAssignment.slices.0.valuesPerLevel.0.universalValue", "x"),
        "Exactly one of roots, universalValue must be set",
    ),
    (
        "wl-levels",
        "workload-admitted.yaml#0",
        _set("status.admission.podSetAssignments.0.topologyAssignment.levels", ["rack", "kubernetes.io/hostname"]),
        "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
    ),
]


@pytest.mark.parametrize(("doc_id", "mutate", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_python_twin_and_cel_reject_with_the_same_message(doc_id: str, mutate: Mutation, message: str) -> None:
    doc = copy.deepcopy(DOCS[doc_id])
    mutate(doc)
    with pytest.raises(ValidationError) as info:
        parse_object(doc)
    assert message in str(info.value)

    pytest.importorskip("celpy")
    schema = openapi_schema(model_for(doc["apiVersion"], doc["kind"]))
    messages = rule_messages(schema)
    failed = [messages[r] for r in failing_rules(schema, apply_defaults(schema, doc))]
    assert message in failed


def _models() -> Iterator[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = list(ALL_KINDS)
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        for info in model.model_fields.values():
            todo.extend(_nested_models(info.annotation))


def _nested_models(tp: Any) -> Iterator[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield tp
    for arg in getattr(tp, "__args__", ()):
        yield from _nested_models(arg)
    origin = getattr(tp, "__origin__", None)
    if origin is not None and origin is not tp:
        yield from _nested_models(origin)


def _markers(tp: Any) -> Iterator[Crd]:
    for item in getattr(tp, "__metadata__", ()):
        if isinstance(item, Crd):
            yield item
    for arg in getattr(tp, "__args__", ()):
        yield from _markers(arg)


def test_every_rule_without_old_self_has_a_python_twin() -> None:
    missing: list[str] = []
    for model in _models():
        for rule in getattr(model, "__crd_rules__", ()):
            if rule.check is None and not rule.is_transition:
                missing.append(f"{model.__name__}: {rule.rule}")
        for name, info in model.model_fields.items():
            markers = [m for m in info.metadata if isinstance(m, Crd)] + list(_markers(info.annotation))
            for marker in markers:
                for rule in marker.rules:
                    if rule.check is None and not rule.is_transition:
                        missing.append(f"{model.__name__}.{name}: {rule.rule}")
    assert missing == []
