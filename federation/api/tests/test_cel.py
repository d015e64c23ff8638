"""The CEL rules in the CRDs and their Python twins agree: same objects rejected, with the same message.

The CEL side is evaluated locally with cel-python (skipped when it is not installed); the apiserver's own
evaluation is covered by e2e/integration/test_api_manifests.py.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from federation.api import ALL_KINDS, parse_object
from federation.api.crdgen import openapi_schema
from federation.api.kinds import model_for
from federation.api.schema import Crd, apply_defaults
from federation.api.tests.support import RULE_CASES, Mutation, example_documents, failing_rules, rule_messages

DOCS = dict(example_documents())


@pytest.mark.parametrize(("doc_id", "mutate", "message"), [c[1:] for c in RULE_CASES], ids=[c[0] for c in RULE_CASES])
def test_python_twin_and_cel_reject_with_the_same_message(doc_id: str, mutate: Mutation, message: str) -> None:
    doc = copy.deepcopy(DOCS[doc_id])
    mutate(doc)
    with pytest.raises(ValidationError) as info:
        parse_object(doc)
    assert message in str(info.value)

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
