"""A namespace's LimitRanges as quota sees them: the defaults its pods will get, and the bounds they must keep.

Why this module exists: a Job's pod template often leaves requests out and lets the namespace's LimitRange fill
them in, but the LimitRanger admission plugin does that only when each pod is created. Counting the template as it
stands would charge such a Job no quota at all while its pods take the defaults, and a template above a
LimitRange's ``max`` would be admitted only to have every pod creation refused. So, as Kueue does, the admission
code reads a pod set with the defaults of its namespace's LimitRanges laid in (a container's missing limits from
``default``, its missing requests from ``defaultRequest`` unless it sets a limit for them, which its pods then
request) and leaves pending, with the reason, a pod set outside
the ranges' ``min`` or ``max``, or one whose requests a default limit leaves above its limits. Several
LimitRanges in one namespace are summarized the way Kueue summarizes them: the lowest ``max``, the highest
``min``, and the first ``default`` and ``defaultRequest`` found, by name.
``maxLimitRequestRatio`` and PersistentVolumeClaim ranges are not checked (Kueue does not check them either).
A worker's agent publishes its namespaces' summaries in its capacity report (``limit_range_entry``), so that the
manager sends no copy there that those LimitRanges would refuse. Plain data in, plain data out: the caller lists
the LimitRange objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.podspec import Overheads, pod_requests, with_runtime_overhead
from federation.quantity import format_quantity, parse_quantity

Amounts = tuple[tuple[str, int], ...]
"""(resource, milli-units), sorted by resource."""
Quantities = tuple[tuple[str, str], ...]
"""(resource, the quantity as the LimitRange wrote it), sorted by resource."""

ABOVE_LIMITS_MESSAGE = "requests must not exceed its limits"
INVALID = "resources validation failed"
MAX_MESSAGE = "requests must not be above the limitRange max"
MIN_MESSAGE = "requests must not be below the limitRange min"
UNSATISFIED = "resources didn't satisfy LimitRange constraints"


@dataclass(frozen=True, slots=True)
class LimitRangeSummary:
    """The LimitRanges of one namespace, for containers and for whole pods (hashable: it keys parse caches)."""

    default_limits: Quantities = ()
    default_requests: Quantities = ()
    container_max: Amounts = ()
    container_min: Amounts = ()
    pod_max: Amounts = ()
    pod_min: Amounts = ()


def _keep(found: dict[str, int], more: Mapping[str, Any], *, pick: Callable[[int, int], int]) -> None:
    for name, quantity in more.items():
        amount = parse_quantity(str(quantity))
        found[name] = pick(found[name], amount) if name in found else amount


def _first(found: dict[str, str], more: Mapping[str, Any]) -> None:
    for name, quantity in more.items():
        found.setdefault(name, str(quantity))


def summarize(limit_ranges: Iterable[Mapping[str, Any]]) -> LimitRangeSummary | None:
    """The summary of one namespace's LimitRange objects; None when none has a Container or Pod item. Raises
    ``ValueError`` for a quantity that cannot be read (the API server validates them, so only a hand-made object
    has one)."""
    defaults: dict[str, str] = {}
    default_requests: dict[str, str] = {}
    bounds: dict[str, dict[str, int]] = {"cmax": {}, "cmin": {}, "pmax": {}, "pmin": {}}
    relevant = False
    ordered = sorted(limit_ranges, key=lambda lr: str((lr.get("metadata") or {}).get("name", "")))
    for limit_range in ordered:
        for item in (limit_range.get("spec") or {}).get("limits") or ():
            kind = item.get("type")
            if kind == "Container":
                _first(defaults, item.get("default") or {})
                _first(default_requests, item.get("defaultRequest") or {})
                _keep(bounds["cmax"], item.get("max") or {}, pick=min)
                _keep(bounds["cmin"], item.get("min") or {}, pick=max)
            elif kind == "Pod":
                _keep(bounds["pmax"], item.get("max") or {}, pick=min)
                _keep(bounds["pmin"], item.get("min") or {}, pick=max)
            else:
                continue
            relevant = True
    if not relevant:
        return None
    return LimitRangeSummary(
        default_limits=tuple(sorted(defaults.items())),
        default_requests=tuple(sorted(default_requests.items())),
        container_max=tuple(sorted(bounds["cmax"].items())),
        container_min=tuple(sorted(bounds["cmin"].items())),
        pod_max=tuple(sorted(bounds["pmax"].items())),
        pod_min=tuple(sorted(bounds["pmin"].items())),
    )


_ENTRY_FIELDS = (
    ("defaultLimits", "default_limits"),
    ("defaultRequests", "default_requests"),
    ("containerMax", "container_max"),
    ("containerMin", "container_min"),
    ("podMax", "pod_max"),
    ("podMin", "pod_min"),
)


def limit_range_entry(summary: LimitRangeSummary) -> dict[str, dict[str, str]]:
    """The summary as a capacity report's ``limitRange`` (``RouteLimitRange``): quantities as strings."""
    entry: dict[str, dict[str, str]] = {}
    for key, attribute in _ENTRY_FIELDS:
        pairs = getattr(summary, attribute)
        if pairs:
            entry[key] = {name: value if isinstance(value, str) else format_quantity(value) for name, value in pairs}
    return entry


def limit_range_from_entry(entry: Mapping[str, Any]) -> LimitRangeSummary:
    """A reported ``limitRange`` read back; raises ``ValueError`` for a quantity that cannot be read."""

    def amounts(key: str) -> Amounts:
        return tuple(sorted((str(n), parse_quantity(str(q))) for n, q in (entry.get(key) or {}).items()))

    def quantities(key: str) -> Quantities:
        return tuple(sorted((str(n), str(q)) for n, q in (entry.get(key) or {}).items()))

    return LimitRangeSummary(
        default_limits=quantities("defaultLimits"),
        default_requests=quantities("defaultRequests"),
        container_max=amounts("containerMax"),
        container_min=amounts("containerMin"),
        pod_max=amounts("podMax"),
        pod_min=amounts("podMin"),
    )


def by_namespace(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, LimitRangeSummary]:
    """Namespace → the summary of its LimitRanges, for the namespaces that have a Container or Pod item. A
    namespace with a LimitRange that cannot be read gets no summary (the API server never stores one)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for limit_range in limit_ranges:
        grouped.setdefault(str((limit_range.get("metadata") or {}).get("namespace", "")), []).append(limit_range)
    found = {}
    for namespace, ranges in grouped.items():
        try:
            summary = summarize(ranges)
        except ValueError:
            continue
        if summary is not None:
            found[namespace] = summary
    return found


def _with_defaults(container: Mapping[str, Any], summary: LimitRangeSummary) -> Mapping[str, Any]:
    resources = container.get("resources") or {}
    limits = dict(resources.get("limits") or {})
    requests = dict(resources.get("requests") or {})
    missing_limits = [(name, q) for name, q in summary.default_limits if name not in limits]
    # A limit the container sets is its missing request too (the pod's own defaulting, before the LimitRanger
    # admission plugin sees it), so defaultRequest never applies to it; Kueue v0.20 counts it so too (#15023).
    stand_ins = [(name, q) for name, q in limits.items() if name not in requests]
    missing_requests = [
        (name, q) for name, q in summary.default_requests if name not in requests and name not in limits
    ]
    if not missing_limits and not missing_requests:
        return container
    requests.update(stand_ins)
    limits.update(missing_limits)
    requests.update(missing_requests)
    return {**container, "resources": {**resources, "limits": limits, "requests": requests}}


def with_defaults(pod_spec: Mapping[str, Any], summary: LimitRangeSummary | None) -> Mapping[str, Any]:
    """``pod_spec`` with its containers' and init containers' missing limits and requests taken from the
    LimitRanges' defaults (a new mapping; ``pod_spec`` itself is not changed, and is returned as is when nothing is
    missing)."""
    if summary is None or not (summary.default_limits or summary.default_requests):
        return pod_spec
    changed: dict[str, Any] = {}
    for key in ("containers", "initContainers"):
        containers = pod_spec.get(key) or ()
        defaulted = [_with_defaults(container, summary) for container in containers]
        if any(new is not old for new, old in zip(defaulted, containers, strict=True)):
            changed[key] = defaulted
    return {**pod_spec, **changed} if changed else pod_spec


def spec_as_run(
    pod_spec: Mapping[str, Any], summary: LimitRangeSummary | None, overheads: Overheads = ()
) -> Mapping[str, Any]:
    """``pod_spec`` as its pods will be created: the RuntimeClass's overhead and the LimitRange defaults laid in (the
    spec itself when neither adds anything)."""
    return with_defaults(with_runtime_overhead(pod_spec, overheads), summary)


def pod_set_as_run(
    pod_set: Mapping[str, Any], summary: LimitRangeSummary | None, overheads: Overheads = ()
) -> Mapping[str, Any]:
    """A Workload's ``spec.podSets[]`` entry with its pod template as its pods will be created: the RuntimeClass's
    overhead and the LimitRange defaults laid in (the entry itself when neither adds anything)."""
    template = pod_set.get("template") or {}
    pod_spec = template.get("spec") or {}
    adjusted = spec_as_run(pod_spec, summary, overheads)
    if adjusted is pod_spec:
        return pod_set
    return {**pod_set, "template": {**template, "spec": adjusted}}


def _amounts(resources: Mapping[str, Any], key: str) -> dict[str, int]:
    return {name: parse_quantity(str(q)) for name, q in (resources.get(key) or {}).items()}


def _above(amounts: Mapping[str, int], bounds: Amounts) -> list[str]:
    return [name for name, bound in bounds if name in amounts and amounts[name] > bound]


def _below(amounts: Mapping[str, int], bounds: Amounts) -> list[str]:
    return [name for name, bound in bounds if bound > amounts.get(name, 0)]


def _invalid(path: str, names: Sequence[str], message: str) -> str:
    quoted = ", ".join(f'"{name}"' for name in names)
    return f"{path}: Invalid value: [{quoted}]: {message}"


def violations(pod_spec: Mapping[str, Any], summary: LimitRangeSummary | None, *, path: str) -> list[str]:
    """What in ``pod_spec`` (with the defaults already laid in) breaks the LimitRanges, one entry per container or
    pod and bound, as Kueue words them (``path`` is the pod spec's field path, e.g.
    ``spec.podSets[0].template.spec``). A container's highest of request and limit must not be above the container
    ``max``, its lowest not below the ``min``; the pod's effective requests likewise against the Pod item."""
    if summary is None:
        return []
    found = []
    if summary.container_max or summary.container_min:
        for key in ("initContainers", "containers"):
            for index, container in enumerate(pod_spec.get(key) or ()):
                resources = container.get("resources") or {}
                requests, limits = _amounts(resources, "requests"), _amounts(resources, "limits")
                highest = {**requests, **{n: max(a, requests.get(n, a)) for n, a in limits.items()}}
                lowest = {**requests, **{n: min(a, requests.get(n, a)) for n, a in limits.items()}}
                where = f"{path}.{key}[{index}]"
                if above := _above(highest, summary.container_max):
                    found.append(_invalid(where, above, MAX_MESSAGE))
                if below := _below(lowest, summary.container_min):
                    found.append(_invalid(where, below, MIN_MESSAGE))
    if summary.pod_max or summary.pod_min:
        total = pod_requests(pod_spec)
        if above := _above(total, summary.pod_max):
            found.append(_invalid(path, above, MAX_MESSAGE))
        if below := _below(total, summary.pod_min):
            found.append(_invalid(path, below, MIN_MESSAGE))
    return found


def above_limits(pod_spec: Mapping[str, Any], *, path: str) -> list[str]:
    """The containers of ``pod_spec`` whose requests exceed their limits, as Kueue words them (the API server refuses
    such a Job, but a LimitRange's default limit can make one of a container that sets only requests)."""
    found = []
    for key in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(key) or ()):
            resources = container.get("resources") or {}
            limits = _amounts(resources, "limits")
            requests = _amounts(resources, "requests")
            over = [name for name, amount in requests.items() if name in limits and amount > limits[name]]
            if over:
                found.append(_invalid(f"{path}.{key}[{index}]", sorted(over), ABOVE_LIMITS_MESSAGE))
    return found


def _joined(kind: str, found: Sequence[str]) -> str:
    return f"{kind}: {found[0] if len(found) == 1 else '[' + ', '.join(found) + ']'}"


def resources_signature(workload: Mapping[str, Any]) -> str:
    """What of a Workload's pod templates LimitRanges judge (each container's and the pod's ``resources``, the
    RuntimeClass), as one string: two Workloads with the same signature get the same verdict."""
    shapes = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or ():
        spec = (pod_set.get("template") or {}).get("spec") or {}
        shapes.append(
            [
                [c.get("resources") for c in spec.get("initContainers") or ()],
                [c.get("resources") for c in spec.get("containers") or ()],
                spec.get("resources"),
                spec.get("runtimeClassName"),
            ]
        )
    return json.dumps(shapes, sort_keys=True, separators=(",", ":"))


def workload_violations(
    workload: Mapping[str, Any], summary: LimitRangeSummary | None, overheads: Overheads = ()
) -> str:
    """Why the Workload's pod sets, with its namespace's LimitRange defaults and their RuntimeClass's overhead laid
    in, cannot run: requests above their limits, or outside the LimitRanges' bounds; one message, "" when they
    can."""
    if summary is None:
        return ""
    invalid, outside = [], []
    for index, pod_set in enumerate((workload.get("spec") or {}).get("podSets") or ()):
        pod_spec = spec_as_run((pod_set.get("template") or {}).get("spec") or {}, summary, overheads)
        path = f"spec.podSets[{index}].template.spec"
        invalid += above_limits(pod_spec, path=path)
        outside += violations(pod_spec, summary, path=path)
    if invalid:
        return _joined(INVALID, invalid)
    return _joined(UNSATISFIED, outside) if outside else ""
