"""Exact Kubernetes resource quantities as integers, so quota arithmetic never touches floats.

Every quantity is held as an ``int`` count of **milli-units** of its resource, whatever the resource: cpu ``"500m"``
is ``500``, ``"2"`` is ``2000``, memory ``"1Gi"`` is ``1_073_741_824_000``. One scale for every resource keeps the
admission core free of per-resource special cases, and Python integers never overflow.

Kubernetes documents that a quantity carries at most three decimal places and that anything more precise is
rounded up (``"0.1m"`` becomes ``"1m"``); parsing does exactly that, rounding away from zero to the next milli-unit.
(Kueue itself compares cpu in milli-units and other resources in whole units rounded up; holding milli-units for
every resource is at least as exact and differs only for fractional byte counts, which nobody writes.)

Formatting produces the canonical string Kubernetes prints: the suffix family of the input is kept (binary ``Ki``
…, decimal ``m``/``k``/``M`` …, or an ``e`` exponent) and the largest suffix that leaves an integer mantissa is used,
falling back to decimal suffixes for binary values that are below 1024 or not whole (``"1.5Gi"`` → ``"1536Mi"``,
``"0.5"`` → ``"500m"``, ``"1e3"`` → ``"1e3"``, ``"128974848"`` → ``"128974848"``).
"""

from __future__ import annotations

import enum
import re

__all__ = [
    "MILLI",
    "QuantityFormat",
    "canonicalize",
    "format_amount",
    "format_quantity",
    "is_byte_resource",
    "parse_quantity",
    "parse_with_format",
]

MILLI = 1000
"""Milli-units per whole unit: ``parse_quantity("1") == MILLI``."""

# Kubernetes refuses to represent more than an int64 of whole units; we refuse rather than silently cap.
_MAX_WHOLE_UNITS = 2**63 - 1
_MAX_EXPONENT = 30


class QuantityFormat(enum.Enum):
    """The suffix family a quantity was written in; Kubernetes keeps it when printing the canonical form."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
# Decimal suffix → power of ten.
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_MILLI_STEP = ("m", "", "k", "M", "G", "T", "P", "E")
_BINARY_BY_STEP = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")


def parse_quantity(text: str) -> int:
    """Parse a Kubernetes quantity (``"500m"``, ``"1.5Gi"``, ``"1e3"`` …) into milli-units, rounding up."""
    return parse_with_format(text)[0]


def parse_with_format(text: str) -> tuple[int, QuantityFormat]:
    """Parse a quantity into milli-units and the suffix family it was written in."""
    if not isinstance(text, str):
        raise TypeError(f"quantity must be a string, got {type(text).__name__}")
    match = _NUMBER.fullmatch(text)
    if match is None or text != text.strip() or not text:
        raise ValueError(f"invalid quantity {text!r}: expected a number with an optional suffix, e.g. '500m' or '1Gi'")
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    if not whole and not fraction:
        raise ValueError(f"invalid quantity {text!r}: no digits before the suffix")
    numerator = int(whole + fraction or "0")
    denominator = 10 ** len(fraction)
    quantity_format, numerator, denominator = _apply_suffix(text, suffix, numerator, denominator)
    numerator *= MILLI
    milli = -(-numerator // denominator)  # ceiling: Kubernetes rounds extra precision up
    if milli > _MAX_WHOLE_UNITS * MILLI:
        raise ValueError(f"invalid quantity {text!r}: larger than {_MAX_WHOLE_UNITS} units")
    return (-milli if sign == "-" else milli), quantity_format


def _apply_suffix(text: str, suffix: str, numerator: int, denominator: int) -> tuple[QuantityFormat, int, int]:
    if suffix in _BINARY_SUFFIXES:
        return QuantityFormat.BINARY_SI, numerator * 1024 ** _BINARY_SUFFIXES[suffix], denominator
    if suffix in _DECIMAL_SUFFIXES:
        power = _DECIMAL_SUFFIXES[suffix]
        quantity_format = QuantityFormat.DECIMAL_SI
    else:
        exponent = _EXPONENT.fullmatch(suffix)
        if exponent is None:
            raise ValueError(
                f"invalid quantity {text!r}: unknown suffix {suffix!r} "
                "(use one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3)"
            )
        power = int(exponent.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {text!r}: exponent {power} is out of range")
        quantity_format = QuantityFormat.DECIMAL_EXPONENT
    if power >= 0:
        return quantity_format, numerator * 10**power, denominator
    return quantity_format, numerator, denominator * 10**-power


def format_quantity(milli: int, quantity_format: QuantityFormat = QuantityFormat.DECIMAL_SI) -> str:
    """Print milli-units as the canonical quantity string Kubernetes would print in ``quantity_format``."""
    if milli == 0:
        return "0"
    sign = "-" if milli < 0 else ""
    magnitude = abs(milli)
    if quantity_format is QuantityFormat.BINARY_SI and magnitude % MILLI == 0 and magnitude >= 1024 * MILLI:
        units = magnitude // MILLI
        step = 0
        while step + 1 < len(_BINARY_BY_STEP) and units % 1024 == 0:
            units //= 1024
            step += 1
        return f"{sign}{units}{_BINARY_BY_STEP[step]}"
    step = 0
    while step + 1 < len(_DECIMAL_BY_MILLI_STEP) and magnitude % 1000 == 0:
        magnitude //= 1000
        step += 1
    if quantity_format is QuantityFormat.DECIMAL_EXPONENT:
        exponent = 3 * step - 3
        return f"{sign}{magnitude}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{magnitude}{_DECIMAL_BY_MILLI_STEP[step]}"


def is_byte_resource(resource: str) -> bool:
    """Whether amounts of ``resource`` are bytes, printed with binary suffixes (as Kueue and Kubernetes treat
    ``memory``, ``ephemeral-storage`` and ``hugepages-*``)."""
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def format_amount(resource: str, milli: int) -> str:
    """An amount of ``resource`` as Kueue prints it in statuses and messages (its ``ResourceQuantity``): bytes with
    the binary suffix that is exact (``2Gi``, ``125Ki``), otherwise, like everything else, in decimal SI (``2M``,
    not ``2000000``)."""
    if is_byte_resource(resource):
        text = format_quantity(milli, QuantityFormat.BINARY_SI)
        if text.endswith("i"):
            return text
    return format_quantity(milli, QuantityFormat.DECIMAL_SI)


def canonicalize(text: str) -> str:
    """Parse and print a quantity the way Kubernetes stores it (``"1.5Gi"`` → ``"1536Mi"``)."""
    milli, quantity_format = parse_with_format(text)
    return format_quantity(milli, quantity_format)
