"""Every example manifest validates, round-trips unchanged, and passes the CRDs' CEL rules after defaulting."""

from __future__ import annotations

from typing import Any

import pytest

from federation.api import ALL_KINDS, parse_object
from federation.api.crdgen import openapi_schema
from federation.api.kinds import model_for
from federation.api.schema import apply_defaults, prune
from federation.api.tests.support import example_documents, failing_rules

DOCS = example_documents()
IDS = [doc_id for doc_id, _ in DOCS]


def dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return out


def test_there_is_an_example_of_every_kind() -> None:
    kinds = {doc["kind"] for _, doc in DOCS}
    assert kinds == {k.crd.kind for k in ALL_KINDS}


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=IDS)
def test_example_round_trips(doc: dict[str, Any]) -> None:
    model = parse_object(doc)
    assert dump(model) == doc
    assert dump(type(model).model_validate_json(model.model_dump_json())) == doc


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=IDS)
def test_example_round_trips_after_server_defaulting(doc: dict[str, Any]) -> None:
    schema = openapi_schema(model_for(doc["apiVersion"], doc["kind"]))
    stored = apply_defaults(schema, doc)
    assert dump(parse_object(stored)) == stored


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=IDS)
def test_example_is_not_pruned(doc: dict[str, Any]) -> None:
    schema = openapi_schema(model_for(doc["apiVersion"], doc["kind"]))
    assert prune(schema, doc) == doc


@pytest.mark.parametrize("doc", [d for _, d in DOCS], ids=IDS)
def test_example_passes_cel_rules(doc: dict[str, Any]) -> None:
    schema = openapi_schema(model_for(doc["apiVersion"], doc["kind"]))
    assert failing_rules(schema, apply_defaults(schema, doc)) == []
