"""Test helpers: the example manifests, and a local evaluator for the CRDs' CEL rules (via cel-python, if present)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
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
