"""Quantity fields accept exactly what the CRD's int-or-string pattern accepts, and keep it as written."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from federation.api.common import is_quantity
from federation.api.quota import ResourceQuota
from federation.api.schema import QUANTITY_PATTERN

_NUMBER = st.from_regex(r"\A[+-]?([0-9]{1,6}(\.[0-9]{0,3})?|\.[0-9]{1,3})\Z")
_SUFFIX = st.sampled_from(
    ["", "m", "k", "M", "G", "T", "P", "E", "n", "u", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2"]
)


@given(_NUMBER, _SUFFIX)
def test_valid_quantities_round_trip(number: str, suffix: str) -> None:
    text = number + suffix
    assert re.fullmatch(QUANTITY_PATTERN, text)
    quota = ResourceQuota.model_validate({"name": "cpu", "nominalQuota": text})
    assert quota.model_dump(mode="json") == {"name": "cpu", "nominalQuota": text}


@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(allow_nan=False), st.booleans()))
def test_model_agrees_with_the_crd_pattern(value: Any) -> None:
    try:
        ResourceQuota.model_validate({"name": "cpu", "nominalQuota": value})
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == is_quantity(value)
    if isinstance(value, str):
        # Go's (RE2) `$` only matches at the very end, as `fullmatch` does.
        assert accepted == (re.fullmatch(QUANTITY_PATTERN, value) is not None)
