from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.quantity import (
    QuantityFormat,
    canonicalize,
    format_amount,
    format_quantity,
    parse_quantity,
    parse_with_format,
)


@pytest.mark.parametrize(
    ("text", "milli", "canonical"),
    [
        ("500m", 500, "500m"),
        ("2", 2000, "2"),
        ("+2", 2000, "2"),
        ("-1", -1000, "-1"),
        ("0", 0, "0"),
        ("0.5", 500, "500m"),
        (".5", 500, "500m"),
        ("1.", 1000, "1"),
        ("1.5", 1500, "1500m"),
        ("1000", 1_000_000, "1k"),
        ("1024", 1_024_000, "1024"),
        ("128974848", 128_974_848_000, "128974848"),
        ("129e6", 129_000_000_000, "129e6"),
        ("1e3", 1_000_000, "1e3"),
        ("1E3", 1_000_000, "1e3"),
        ("1.5e3", 1_500_000, "1500"),
        ("1e-3", 1, "1e-3"),
        ("100Ki", 102_400_000, "100Ki"),
        ("1024Ki", 1_048_576_000, "1Mi"),
        ("1Gi", 1_073_741_824_000, "1Gi"),
        ("1.5Gi", 1_610_612_736_000, "1536Mi"),
        ("0.5Ki", 512_000, "512"),
        ("1.5Ki", 1_536_000, "1536"),
        ("1k", 1_000_000, "1k"),
        ("1M", 10**9, "1M"),
        ("1E", 10**21, "1E"),
        ("2Ei", 2 * 1024**6 * 1000, "2Ei"),
        ("0.1m", 1, "1m"),
        ("1n", 1, "1m"),
        ("1500u", 2, "2m"),
        ("-0.1m", -1, "-1m"),
        ("20", 20_000, "20"),
    ],
)
def test_parse_and_canonical_form(text: str, milli: int, canonical: str) -> None:
    assert parse_quantity(text) == milli
    assert canonicalize(text) == canonical


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "invalid quantity ''"),
        ("abc", "no digits"),
        ("1.2.3", "unknown suffix '.3'"),
        ("1Kb", "unknown suffix 'Kb'"),
        ("1 Gi", "unknown suffix ' Gi'"),
        (" 1", "invalid quantity"),
        (".", "no digits"),
        ("-", "no digits"),
        ("1e", "unknown suffix 'e'"),
        ("e3", "no digits"),
        ("1e999", "exponent 999 is out of range"),
        ("9999999999999999999", "larger than"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity") as error:
        parse_quantity(text)
    assert fragment in str(error.value)


def test_non_string_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_quantity(5)  # type: ignore[arg-type]


def test_format_reports_the_suffix_family() -> None:
    assert parse_with_format("1Gi")[1] is QuantityFormat.BINARY_SI
    assert parse_with_format("1e3")[1] is QuantityFormat.DECIMAL_EXPONENT
    assert parse_with_format("1G")[1] is QuantityFormat.DECIMAL_SI
    assert format_quantity(24_000) == "24"
    assert format_quantity(1_073_741_824_000, QuantityFormat.BINARY_SI) == "1Gi"


@settings(max_examples=200, deadline=None)
@given(
    milli=st.integers(min_value=-(10**21), max_value=10**21),
    quantity_format=st.sampled_from(list(QuantityFormat)),
)
def test_formatting_round_trips_exactly(milli: int, quantity_format: QuantityFormat) -> None:
    text = format_quantity(milli, quantity_format)
    assert parse_quantity(text) == milli
    # A text is canonical in the format it reads as: BinarySI prints 125000 (not a multiple of 1024) without a
    # suffix, which Kubernetes reads back as DecimalSI and canonicalizes to "125k".
    assert canonicalize(text) == format_quantity(milli, parse_with_format(text)[1])


@settings(max_examples=200, deadline=None)
@given(
    whole=st.integers(min_value=0, max_value=10**6),
    fraction=st.text(alphabet="0123456789", max_size=6),
    suffix=st.sampled_from(["", "m", "k", "M", "Ki", "Mi", "Gi", "e3", "e-2", "n", "u"]),
)
def test_parsing_never_rounds_down(whole: int, fraction: str, suffix: str) -> None:
    text = f"{whole}.{fraction}{suffix}" if fraction else f"{whole}{suffix}"
    milli = parse_quantity(text)
    exact: dict[str, int | Fraction] = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 10**3,
        "M": 10**6,
        "Ki": 1024,
        "Mi": 1024**2,
        "Gi": 1024**3,
    }
    if suffix in exact:
        value = Fraction(f"{whole}.{fraction or '0'}") * exact[suffix] * 1000
        assert milli >= value
        assert milli - value < 1


@pytest.mark.parametrize(
    ("resource", "text", "shown"),
    [
        ("memory", "2000000", "2M"),  # no exact binary suffix: decimal, as Kueue's ResourceQuantity prints it
        ("memory", "128000", "125Ki"),
        ("memory", "2Gi", "2Gi"),
        ("memory", "1000", "1k"),
        ("memory", "1536", "1536"),
        ("memory", "0", "0"),
        ("ephemeral-storage", "3G", "3G"),
        ("hugepages-2Mi", "4Mi", "4Mi"),
        ("cpu", "1.5", "1500m"),
        ("nvidia.com/gpu", "1024", "1024"),  # counts are never bytes
    ],
)
def test_amounts_print_as_kueue_prints_them(resource: str, text: str, shown: str) -> None:
    assert format_amount(resource, parse_quantity(text)) == shown
