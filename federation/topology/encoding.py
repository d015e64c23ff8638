"""Kueue v1beta2 ``topologyAssignment`` encoding, decoding and expansion to one domain per pod.

Why this module exists: the assignment is what the agent writes into ``status.admission.podSetAssignments[]``
and what the ungater reads back; it must be byte-for-byte Kueue's v1beta2 shape and stay small for huge
workloads. The shape is::

    levels: [label keys, top to bottom]            # only kubernetes.io/hostname when it is the lowest level
    slices:
    - domainCount: N
      valuesPerLevel: [{universalValue: v} | {prefix?, suffix?, roots: [N values]}]  # one per level
      universalPodCount: c | podCounts: [N counts]

Encoding slices here are only a compression device (they are unrelated to pod set slices): consecutive domains
are grouped while they share a long common prefix, so a rack's hosts cost a few bytes each. Domains keep their
order, and ranks are handed out in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.api.labels import HOSTNAME_LABEL
from federation.topology.model import Placement

MAX_AFFIX_LENGTH = 63
MAX_SLICES = 1000
_SLICE_OVERHEAD_BYTES = 64

DomainCount = tuple[tuple[str, ...], int]


@dataclass(frozen=True)
class IndividualValues:
    roots: tuple[str, ...]
    prefix: str | None = None
    suffix: str | None = None


@dataclass(frozen=True)
class LevelValues:
    universal: str | None = None
    individual: IndividualValues | None = None


@dataclass(frozen=True)
class PodCounts:
    universal: int | None = None
    individual: tuple[int, ...] | None = None


@dataclass(frozen=True)
class AssignmentSlice:
    domain_count: int
    values_per_level: tuple[LevelValues, ...]
    pod_counts: PodCounts


@dataclass(frozen=True)
class TopologyAssignment:
    """Kueue v1beta2 ``TopologyAssignment``; ``to_dict``/``from_dict`` give and read its JSON form."""

    levels: tuple[str, ...]
    slices: tuple[AssignmentSlice, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"levels": list(self.levels), "slices": [_slice_to_dict(item) for item in self.slices]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TopologyAssignment:
        levels = tuple(str(level) for level in data.get("levels") or ())
        if not levels:
            raise ValueError("topologyAssignment.levels must not be empty")
        slices = tuple(_slice_from_dict(item, len(levels)) for item in data.get("slices") or ())
        return cls(levels=levels, slices=slices)


# ---------------------------------------------------------------------- encode


def placement_domains(placement: Placement) -> tuple[tuple[str, ...], list[DomainCount]]:
    """The levels and ``(values, pods)`` per lowest-level domain that an assignment of ``placement`` carries.

    As in Kueue, when ``kubernetes.io/hostname`` is the lowest level only that level is kept.
    """
    if placement.levels[-1] == HOSTNAME_LABEL:
        return (HOSTNAME_LABEL,), [((entry.values[-1],), entry.count) for entry in placement.node_pods]
    merged: dict[tuple[str, ...], int] = {}
    for entry in placement.node_pods:
        merged[entry.values] = merged.get(entry.values, 0) + entry.count
    return placement.levels, list(merged.items())


def encode_placement(placement: Placement) -> TopologyAssignment:
    levels, domains = placement_domains(placement)
    return encode_domains(levels, domains)


def encode_domains(levels: Sequence[str], domains: Sequence[DomainCount]) -> TopologyAssignment:
    """Compress ``(values, pods)`` domains, in order, into as few bytes as the heuristic finds."""
    overhead = _SLICE_OVERHEAD_BYTES
    while True:
        groups = _group(domains, len(levels), overhead)
        if len(groups) <= MAX_SLICES:
            break
        overhead *= 4
    return TopologyAssignment(levels=tuple(levels), slices=tuple(_encode_group(group, len(levels)) for group in groups))


def _common_prefix(texts: Sequence[str]) -> str:
    """The longest string every text starts with."""
    if not texts:
        return ""
    shortest, longest = min(texts), max(texts)
    length = 0
    for left, right in zip(shortest, longest, strict=False):
        if left != right:
            break
        length += 1
    return shortest[:length]


def _group(domains: Sequence[DomainCount], level_count: int, overhead: int) -> list[Sequence[DomainCount]]:
    """Cut the domain list where keeping a run together would shorten its shared prefixes too much."""
    groups: list[Sequence[DomainCount]] = []
    start = 0
    prefixes: list[str] = []
    for index, (values, _) in enumerate(domains):
        if index == start:
            prefixes = [value[:MAX_AFFIX_LENGTH] for value in values]
            continue
        narrowed = [
            prefixes[level]
            if values[level].startswith(prefixes[level])
            else _common_prefix([prefixes[level], values[level]])
            for level in range(level_count)
        ]
        lost = sum(len(prefixes[level]) - len(narrowed[level]) for level in range(level_count))
        if lost * (index - start) > overhead:
            groups.append(domains[start:index])
            start = index
            prefixes = [value[:MAX_AFFIX_LENGTH] for value in values]
        else:
            prefixes = narrowed
    if start < len(domains):
        groups.append(domains[start:])
    return groups


def _encode_group(group: Sequence[DomainCount], level_count: int) -> AssignmentSlice:
    per_level = []
    for level in range(level_count):
        per_level.append(_encode_values([values[level] for values, _ in group]))
    counts = [count for _, count in group]
    pod_counts = PodCounts(universal=counts[0]) if len(set(counts)) == 1 else PodCounts(individual=tuple(counts))
    return AssignmentSlice(domain_count=len(group), values_per_level=tuple(per_level), pod_counts=pod_counts)


def _encode_values(values: list[str]) -> LevelValues:
    first = values[0]
    if all(value == first for value in values):
        return LevelValues(universal=first)
    prefix = _common_prefix(values)[:MAX_AFFIX_LENGTH]
    rests = [value[len(prefix) :] for value in values]
    reversed_common = _common_prefix([rest[::-1] for rest in rests])[:MAX_AFFIX_LENGTH]
    suffix = reversed_common[::-1]
    roots = tuple(rest[: len(rest) - len(suffix)] for rest in rests)
    return LevelValues(individual=IndividualValues(roots=roots, prefix=prefix or None, suffix=suffix or None))


# ---------------------------------------------------------------------- decode


def decode_assignment(assignment: TopologyAssignment) -> list[DomainCount]:
    """The ``(values per level, pods)`` domains of an assignment, in order."""
    domains: list[DomainCount] = []
    for item in assignment.slices:
        columns = [_decode_values(level_values, item.domain_count) for level_values in item.values_per_level]
        if item.pod_counts.individual is not None:
            counts: Sequence[int] = item.pod_counts.individual
        else:
            counts = [item.pod_counts.universal or 0] * item.domain_count
        for index in range(item.domain_count):
            domains.append((tuple(column[index] for column in columns), counts[index]))
    return domains


def _decode_values(level_values: LevelValues, domain_count: int) -> list[str]:
    if level_values.universal is not None:
        return [level_values.universal] * domain_count
    assert level_values.individual is not None
    prefix = level_values.individual.prefix or ""
    suffix = level_values.individual.suffix or ""
    return [prefix + root + suffix for root in level_values.individual.roots]


def expand_ranks(
    assignment: TopologyAssignment, *, pinned: Mapping[int, tuple[str, ...]] | None = None
) -> list[tuple[str, ...]]:
    """The domain of every pod by rank (completion index), filling domains in assignment order.

    ``pinned`` fixes ranks already running somewhere (e.g. after a replacement); the other ranks take the
    remaining slots in order. Raises ``ValueError`` if a pinned rank's domain has no slot for it.
    """
    domains = decode_assignment(assignment)
    total = sum(count for _, count in domains)
    remaining: dict[tuple[str, ...], int] = {}
    for values, count in domains:
        remaining[values] = remaining.get(values, 0) + count
    ranks: list[tuple[str, ...] | None] = [None] * total
    for rank, values in (pinned or {}).items():
        if not 0 <= rank < total:
            raise ValueError(f"pinned rank {rank} is outside 0..{total - 1}")
        if remaining.get(values, 0) <= 0:
            raise ValueError(f"pinned rank {rank}: domain {values} has no slot left")
        remaining[values] -= 1
        ranks[rank] = values
    free_slots: list[tuple[str, ...]] = []
    for values, _ in domains:
        spare = remaining.get(values, 0)
        if spare > 0:
            free_slots.extend([values] * spare)
            remaining[values] = 0
    slots = iter(free_slots)
    return [values if values is not None else next(slots) for values in ranks]


# ---------------------------------------------------------------------- JSON


def _slice_to_dict(item: AssignmentSlice) -> dict[str, Any]:
    per_level: list[dict[str, Any]] = []
    for level_values in item.values_per_level:
        if level_values.universal is not None:
            per_level.append({"universalValue": level_values.universal})
            continue
        assert level_values.individual is not None
        individual: dict[str, Any] = {}
        if level_values.individual.prefix:
            individual["prefix"] = level_values.individual.prefix
        if level_values.individual.suffix:
            individual["suffix"] = level_values.individual.suffix
        individual["roots"] = list(level_values.individual.roots)
        per_level.append(individual)
    out: dict[str, Any] = {"domainCount": item.domain_count, "valuesPerLevel": per_level}
    if item.pod_counts.universal is not None:
        out["universalPodCount"] = item.pod_counts.universal
    else:
        out["podCounts"] = list(item.pod_counts.individual or ())
    return out


def _slice_from_dict(data: Mapping[str, Any], level_count: int) -> AssignmentSlice:
    domain_count = int(data["domainCount"])
    if domain_count < 1:
        raise ValueError("domainCount must be at least 1")
    raw_levels = data.get("valuesPerLevel") or []
    if len(raw_levels) != level_count:
        raise ValueError("valuesPerLevel must have one entry per level")
    per_level = []
    for raw in raw_levels:
        has_universal, has_roots = "universalValue" in raw, "roots" in raw
        if has_universal == has_roots:
            raise ValueError("exactly one of roots, universalValue must be set in valuesPerLevel")
        if has_universal:
            if "prefix" in raw or "suffix" in raw:
                raise ValueError("universalValue cannot be set together with prefix or suffix")
            per_level.append(LevelValues(universal=str(raw["universalValue"])))
            continue
        roots = tuple(str(root) for root in raw.get("roots") or ())
        if len(roots) != domain_count:
            raise ValueError("roots must have domainCount entries")
        per_level.append(
            LevelValues(
                individual=IndividualValues(
                    roots=roots, prefix=raw.get("prefix") or None, suffix=raw.get("suffix") or None
                )
            )
        )
    has_universal, has_counts = "universalPodCount" in data, "podCounts" in data
    if has_universal == has_counts:
        raise ValueError("exactly one of podCounts, universalPodCount must be set")
    if has_universal:
        pod_counts = PodCounts(universal=int(data["universalPodCount"]))
    else:
        counts = tuple(int(count) for count in data["podCounts"])
        if len(counts) != domain_count:
            raise ValueError("podCounts must have domainCount entries")
        pod_counts = PodCounts(individual=counts)
    return AssignmentSlice(domain_count=domain_count, values_per_level=tuple(per_level), pod_counts=pod_counts)
