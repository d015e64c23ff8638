"""Test helpers: the example manifests, and a local evaluator for the CRDs' CEL rules (via cel-python, if present)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "e2e" / "testdata" / "examples"
CHARTS = REPO / "charts"


def example_documents() -> list[tuple[str, dict[str, Any]]]:
    """(id, object) for every document of every example file."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc:
                out.append((f"{path.name}#{i}", doc))
    return out


def rule_sites(schema: Mapping[str, Any], value: Any) -> Iterator[tuple[str, Any]]:
    """(rule, value) for every x-kubernetes-validations rule that applies to a part of `value`."""
    if value is None:
        return
    for entry in schema.get("x-kubernetes-validations", ()):
        yield entry["rule"], value
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                yield from rule_sites(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, item in value.items():
                if key not in schema.get("properties", {}):
                    yield from rule_sites(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            yield from rule_sites(schema["items"], item)


def failing_rules(schema: Mapping[str, Any], value: Any) -> list[str]:
    """The rules (without oldSelf) that reject `value`, evaluated locally with cel-python."""
    celpy: Any = importlib.import_module("celpy")  # optional test dependency (cel-python), untyped
    env = celpy.Environment()
    failed: list[str] = []
    for rule, part in rule_sites(schema, value):
        if "oldSelf" in rule:
            continue
        program = env.program(env.compile(rule))
        try:
            result = program.evaluate({"self": celpy.json_to_cel(part)})
        except celpy.CELEvalError:
            result = None  # an evaluation error rejects the object, as in the apiserver
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            failed.append(rule)
    return failed


def rule_messages(schema: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}

    def visit(node: Mapping[str, Any]) -> None:
        for entry in node.get("x-kubernetes-validations", ()):
            out[entry["rule"]] = entry["message"]
        for sub in node.get("properties", {}).values():
            visit(sub)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                visit(node[key])

    visit(schema)
    return out


# --- objects each CEL rule must reject (mutations of the examples), with the message it must give -------------

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


# (case id, example id, mutation, message): shared by the unit tests and the integration test.
RULE_CASES: list[tuple[str, str, Mutation, str]] = [
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
