"""The generated CRDs are current, structural, and say what Kueue's say (names, columns, list semantics)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.api import ALL_KINDS
from federation.api.base import ApiObject
from federation.api.crdgen import CHARTS as CHART_NAMES
from federation.api.crdgen import crd, file_name, main, openapi_schema, render_crds
from federation.api.schema import walk
from federation.api.tests.support import CHARTS

RENDERED = render_crds()
KIND_IDS = [k.crd.kind for k in ALL_KINDS]


@pytest.mark.parametrize("chart", CHART_NAMES)
def test_committed_crds_are_current(chart: str) -> None:
    directory = CHARTS / chart / "crds"
    committed = {p.name: p.read_text() for p in directory.glob("*.yaml")}
    assert sorted(committed) == sorted(RENDERED), "run `make crds`"
    stale = [name for name, text in RENDERED.items() if committed[name] != text]
    assert stale == [], f"stale CRDs {stale}: run `make crds`"


def test_main_writes_every_chart(tmp_path: Path) -> None:
    (tmp_path / "kfed-agent" / "crds").mkdir(parents=True)
    (tmp_path / "kfed-agent" / "crds" / "kueue.x-k8s.io_gone.yaml").write_text("old")
    assert main([str(tmp_path)]) == 0
    for chart in CHART_NAMES:
        files = {p.name: p.read_text() for p in (tmp_path / chart / "crds").glob("*.yaml")}
        assert files == RENDERED
    assert main([]) == 2


def test_rendered_yaml_parses_back() -> None:
    for kind in ALL_KINDS:
        assert yaml.safe_load(RENDERED[file_name(kind)]) == crd(kind)


# --- structural schema rules ----------------------------------------------------------------------------------------


def _problems(schema: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    for path, node in walk(schema):
        if "<anyOf" in path:
            if set(node) != {"type"}:
                problems.append(f"{path}: anyOf branches may only name a type")
            continue
        if "$ref" in node or "definitions" in node or "$defs" in node:
            problems.append(f"{path}: $ref/definitions are not allowed")
        if node.get("additionalProperties") is False:
            problems.append(f"{path}: additionalProperties: false is not allowed")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties are exclusive")
        if node.get("x-kubernetes-int-or-string"):
            if node.get("anyOf") != [{"type": "integer"}, {"type": "string"}] or "type" in node:
                problems.append(f"{path}: int-or-string must be anyOf integer/string without a type")
            continue
        if "anyOf" in node or "oneOf" in node or "allOf" in node:
            problems.append(f"{path}: only int-or-string may use anyOf")
        if node.get("type") not in ("object", "array", "string", "integer", "number", "boolean"):
            problems.append(f"{path}: no type")
        if node.get("x-kubernetes-preserve-unknown-fields") and node.get("type") != "object":
            problems.append(f"{path}: preserve-unknown-fields needs type object")
        if node.get("type") == "array" and not isinstance(node.get("items"), Mapping):
            problems.append(f"{path}: array without items")
        problems.extend(_list_problems(path, node))
        if "default" in node and node.get("type") == "object" and not isinstance(node["default"], dict):
            problems.append(f"{path}: object default must be an object")
        for key, sub in node.get("properties", {}).items():
            if key in node.get("required", []) and "default" in sub:
                problems.append(f"{path}.{key}: a required field cannot have a default")
    return problems


def _list_problems(path: str, node: Mapping[str, Any]) -> list[str]:
    list_type = node.get("x-kubernetes-list-type")
    if list_type is None:
        return [] if "x-kubernetes-list-map-keys" not in node else [f"{path}: map keys without list-type map"]
    if node.get("type") != "array":
        return [f"{path}: list-type on a non-array"]
    items = node["items"]
    if list_type == "set" and items.get("type") in ("object", "array"):
        return [f"{path}: set items must be scalars"]
    if list_type != "map":
        return []
    keys = node.get("x-kubernetes-list-map-keys") or []
    out = [] if keys else [f"{path}: list-type map without keys"]
    for key in keys:
        prop = items.get("properties", {}).get(key)
        if prop is None:
            out.append(f"{path}: map key {key} is not a property")
        elif key not in items.get("required", []) and "default" not in prop:
            out.append(f"{path}: map key {key} must be required or defaulted")
        elif prop.get("type") not in ("string", "integer", "boolean"):
            out.append(f"{path}: map key {key} must be a scalar")
    return out


@pytest.mark.parametrize("kind", ALL_KINDS, ids=KIND_IDS)
def test_schema_is_structural(kind: type[ApiObject]) -> None:
    schema = openapi_schema(kind)
    assert _problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == "string"
    assert schema["properties"]["kind"]["type"] == "string"


def test_the_checker_catches_non_structural_schemas() -> None:
    bad = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/x"},
            "b": {"type": "object", "additionalProperties": False},
            "c": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "d": {
                "type": "array",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["k"],
            },
        },
    }
    found = "\n".join(_problems(bad))
    for fragment in ("$ref", "additionalProperties: false", "only int-or-string", "map key k must be required"):
        assert fragment in found


def _arrays_under_rules(
    schema: Mapping[str, Any], *, rules: tuple[str, ...] = (), key: str = "", path: str = ""
) -> list[str]:
    """Arrays a CEL rule can iterate must be bounded, or the apiserver refuses the rule as too costly.

    An array counts as seen by a rule when it carries the rule itself or an enclosing rule names it.
    """
    own = tuple(entry["rule"] for entry in schema.get("x-kubernetes-validations", ()))
    seen = bool(own) or any(re.search(rf"\b{re.escape(key)}\b", rule) for rule in rules)
    rules = rules + own
    out: list[str] = []
    if seen and schema.get("type") == "array" and "maxItems" not in schema:
        out.append(path)
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return out
    for name, sub in schema.get("properties", {}).items():
        out += _arrays_under_rules(sub, rules=rules, key=name, path=f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        out += _arrays_under_rules(schema["items"], rules=rules, key=key, path=f"{path}[]")
    return out


@pytest.mark.parametrize("kind", ALL_KINDS, ids=KIND_IDS)
def test_lists_seen_by_cel_rules_are_bounded(kind: type[ApiObject]) -> None:
    assert _arrays_under_rules(openapi_schema(kind)) == []


@pytest.mark.parametrize("kind", ALL_KINDS, ids=KIND_IDS)
def test_cel_rules_compile(kind: type[ApiObject]) -> None:
    import celpy

    env = celpy.Environment()
    for _, node in walk(openapi_schema(kind)):
        for entry in node.get("x-kubernetes-validations", ()):
            assert entry["message"]
            env.compile(entry["rule"])


# --- names, columns, subresources ----------------------------------------------------------------------------------


def test_names_like_kueues() -> None:
    names = {k.crd.kind: crd(k)["spec"]["names"] for k in ALL_KINDS}
    assert names["ClusterQueue"]["shortNames"] == ["cq"]
    assert names["LocalQueue"]["shortNames"] == ["queue", "queues", "lq"]
    assert names["ResourceFlavor"]["shortNames"] == ["flavor", "flavors", "rf"]
    assert names["Workload"]["shortNames"] == ["kwl", "kueueworkload", "kueueworkloads"]  # Kueue's since v0.15
    assert names["MultiKueueConfig"]["shortNames"] == ["mkconf"]
    assert names["WorkloadPriorityClass"]["shortNames"] == ["wpc"]
    assert names["AdmissionCheck"]["shortNames"] == ["ac"]
    assert names["Cohort"]["shortNames"] == ["co"]
    assert names["MultiKueueCluster"]["shortNames"] == ["mkc"]
    assert names["Topology"]["shortNames"] == ["topo"]
    all_short = [s for n in names.values() for s in n.get("shortNames", [])]
    assert len(all_short) == len(set(all_short))
    for kind in ALL_KINDS:
        spec = crd(kind)["spec"]
        assert crd(kind)["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        expected = "kfed" if kind.crd.group == "kfed.io" else "kueue"
        assert spec["names"]["categories"] == [expected]
        assert spec["scope"] == ("Namespaced" if kind.crd.kind in ("LocalQueue", "Workload") else "Cluster")


def _columns(kind_name: str) -> list[str]:
    kind = next(k for k in ALL_KINDS if k.crd.kind == kind_name)
    return [c["name"] for c in crd(kind)["spec"]["versions"][0].get("additionalPrinterColumns", [])]


def test_printer_columns() -> None:
    assert _columns("ClusterQueue") == ["Cohort", "Strategy", "Pending Workloads", "Admitted Workloads"]
    assert _columns("Workload") == ["Queue", "Reserved in", "Admitted", "Finished", "Age"]
    assert _columns("LocalQueue") == ["ClusterQueue", "Pending Workloads", "Admitted Workloads"]


@pytest.mark.parametrize("kind", ALL_KINDS, ids=KIND_IDS)
def test_printer_columns_point_at_fields(kind: type[ApiObject]) -> None:
    version = crd(kind)["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    for column in version.get("additionalPrinterColumns", []):
        node = schema
        for part in re.sub(r"\[\?\(.*?\)\]", "[]", column["jsonPath"]).strip(".").split("."):
            if node.get("type") == "object" and not node.get("properties"):
                break  # metadata: owned by the apiserver
            array = part.endswith("[]")
            node = node["properties"][part.removesuffix("[]")]
            if array:
                node = node["items"]
        assert node.get("type") == column["type"] or (
            column["type"] == "date" and node.get("type") in ("string", "object")
        )


@pytest.mark.parametrize("kind", ALL_KINDS, ids=KIND_IDS)
def test_status_subresource_when_there_is_a_status(kind: type[ApiObject]) -> None:
    version = crd(kind)["spec"]["versions"][0]
    assert ("status" in version.get("subresources", {})) == ("status" in kind.model_fields)
