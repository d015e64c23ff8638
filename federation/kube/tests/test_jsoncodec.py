"""The apiserver JSON codec decodes what the stdlib decodes, to the same values, and fails the same way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.kube import jsoncodec

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_encode_then_decode_gives_back_the_value_as_the_stdlib_does(value: Any) -> None:
    encoded = jsoncodec.encode(value)
    assert json.loads(encoded) == value
    assert jsoncodec.decode(encoded) == value
    assert jsoncodec.decode(json.dumps(value)) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate escape: the stdlib decodes it, pydantic-core refuses it
        '{"a": 1, "a": 2}',
        "123456789012345678901234567890",
        "[1e400, -0.0, 0.1]",
        '"caf\\u00e9 \u00e9"',
    ],
)
def test_decode_agrees_with_the_stdlib_on_edge_cases(text: str) -> None:
    assert repr(jsoncodec.decode(text.encode())) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", '{"a": }', "[1,]", "nul", b"\xff".decode("latin-1")])
def test_malformed_input_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        jsoncodec.decode(text.encode())


def test_encode_refuses_what_is_not_json_data() -> None:
    with pytest.raises(TypeError):
        jsoncodec.encode({"a": object()})
