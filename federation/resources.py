"""Resource vectors: resource name → integer milli-units, with the arithmetic quota checks need.

A pod's requests, a ClusterQueue's free quota and a worker's capacity are all vectors over resource names.
``Resources`` is an immutable mapping with exact integer ``+``, ``-``, scaling and the partial order used for
"does this fit": ``a <= b`` holds when every resource of ``a`` is at most the same resource of ``b`` (missing
resources count as zero). Hot loops in the admission core use plain dicts; this type is for everything around them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from federation.quantity import format_amount, parse_quantity

__all__ = ["Resources"]


class Resources(Mapping[str, int]):
    """An immutable vector of resource amounts in milli-units; absent resources read as zero."""

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts: dict[str, int] = {name: value for name, value in (amounts or {}).items() if value}

    @classmethod
    def parse(cls, quantities: Mapping[str, str]) -> Resources:
        """Build a vector from Kubernetes quantity strings, e.g. ``{"cpu": "500m", "memory": "1Gi"}``."""
        return cls({name: parse_quantity(text) for name, text in quantities.items()})

    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def get_amount(self, name: str) -> int:
        """The amount of ``name``, zero when absent."""
        return self._amounts.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    def __repr__(self) -> str:
        return f"Resources({self.format()})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._amounts.items()))

    def __add__(self, other: Mapping[str, int]) -> Resources:
        summed = dict(self._amounts)
        for name, value in other.items():
            summed[name] = summed.get(name, 0) + value
        return Resources(summed)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        remaining = dict(self._amounts)
        for name, value in other.items():
            remaining[name] = remaining.get(name, 0) - value
        return Resources(remaining)

    def scaled(self, factor: int) -> Resources:
        """Every amount multiplied by an integer, e.g. per-pod requests times the pod count."""
        return Resources({name: value * factor for name, value in self._amounts.items()})

    def __le__(self, other: Mapping[str, int]) -> bool:
        return self.fits_in(other)

    def __ge__(self, other: Mapping[str, int]) -> bool:
        return Resources(other).fits_in(self)

    def fits_in(self, capacity: Mapping[str, int]) -> bool:
        """True when no resource exceeds ``capacity`` (resources ``capacity`` lacks count as zero there)."""
        return all(value <= capacity.get(name, 0) for name, value in self._amounts.items())

    def exceeding(self, capacity: Mapping[str, int]) -> dict[str, int]:
        """How much each resource is over ``capacity``; empty when the vector fits."""
        return {
            name: value - capacity.get(name, 0)
            for name, value in self._amounts.items()
            if value > capacity.get(name, 0)
        }

    def clamped_at_zero(self) -> Resources:
        """Negative amounts dropped, e.g. for free capacity after over-commitment."""
        return Resources({name: value for name, value in self._amounts.items() if value > 0})

    def format(self) -> str:
        """Human-readable ``cpu=2, memory=1Gi`` with resources in name order."""
        return ", ".join(f"{name}={format_amount(name, value)}" for name, value in sorted(self._amounts.items()))
