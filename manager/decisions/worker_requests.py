"""A workload's requests as a worker's namespace makes its pods, for capacity probing (pure).

The manager charges a Workload's global quota with its pods as the manager's namespace would make them: the
namespace's LimitRange defaults fill what the containers leave out. The worker's quota charges the pods the Job copy
gets there, and its namespace may have other LimitRanges, or none: a Job without requests in a namespace whose
LimitRange gives each container ``defaultRequest: {cpu: 4}`` asks for 4 cpu a pod where that LimitRange is, and
for none where it is not; a default for a resource the worker's ClusterQueue does not cover leaves the copy
pending there. So when a LimitRange is involved on either side, each worker is judged with the requests its own
LimitRanges (from its capacity report) make, and one whose LimitRanges would refuse the pods is named with Kueue's
words, and a pod set that asks for a topology is checked against the worker's TAS summary with those pods. Both
sides use the manager's RuntimeClass overheads (workers do not report theirs).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.admission.api_workloads import ResourceRules, pod_set_usage
from federation.limit_ranges import LimitRangeSummary, pod_set_as_run, workload_violations
from federation.podspec import Overheads
from federation.quantity import MILLI
from federation.topology import PodSetRequest
from federation.topology.report import topology_requests


@dataclass(frozen=True, slots=True)
class RunThere:
    """A workload's requests as one worker namespace's LimitRanges make its pods: what the worker's quota charges."""

    requests: tuple[tuple[str, int], ...]
    """All pod sets' positive requests per resource, sorted by resource."""
    usage: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
    """Per pod set its name and its positive requests (all its pods), sorted by resource."""
    topology: tuple[PodSetRequest, ...] | None = None
    """The pod sets as placement requests (per pod) for the worker's TAS summary, when asked for."""


def run_there(
    usage: Sequence[tuple[str, Mapping[str, int]]], topology: Sequence[PodSetRequest] | None = None
) -> RunThere:
    """:class:`RunThere` from each pod set's name and requests (all its pods), and its placement requests."""
    total: dict[str, int] = {}
    for _name, requests in usage:
        for resource, amount in requests.items():
            total[resource] = total.get(resource, 0) + amount
    return RunThere(
        requests=tuple(sorted((r, a) for r, a in total.items() if a > 0)),
        usage=tuple((name, tuple(sorted((r, a) for r, a in requests.items() if a > 0))) for name, requests in usage),
        topology=tuple(topology) if topology is not None else None,
    )


AsRunThere = Callable[[LimitRangeSummary | None], RunThere | str]
"""A worker namespace's LimitRanges (None: it has none) → the workload's requests there, or why they refuse it."""


def as_run_there(
    workload: Mapping[str, Any],
    counts: Mapping[str, int],
    *,
    rules: ResourceRules,
    overheads: Overheads = (),
    charged: Collection[str] | None = None,
    pods: bool = False,
    topology: bool = False,
) -> AsRunThere:
    """The judge of ``workload`` (a raw Workload; ``counts``: its pod sets' admitted pod counts) against a worker
    namespace's LimitRanges: the requests its pods would get there, or why the LimitRanges refuse them
    (:func:`~federation.limit_ranges.workload_violations`). ``charged``: when the manager ignores requests for
    resources its ClusterQueue does not cover (``IgnoreUndeclared``), the resources it charges; the others are left
    out there too. ``pods``: the manager's ClusterQueue counts the ``pods`` resource (each pod set charges its pod
    count); so does the worker's then. ``topology``: the answer carries the pod sets' placement requests too, for
    workers' TAS summaries. Each distinct LimitRange summary is judged once."""
    judged: dict[LimitRangeSummary | None, RunThere | str] = {}

    def judge(limits: LimitRangeSummary | None) -> RunThere | str:
        found = judged.get(limits)
        if found is None:
            found = _judge(
                workload,
                counts,
                limits,
                rules=rules,
                overheads=overheads,
                charged=charged,
                pods=pods,
                topology=topology,
            )
            judged[limits] = found
        return found

    return judge


def _judge(
    workload: Mapping[str, Any],
    counts: Mapping[str, int],
    limits: LimitRangeSummary | None,
    *,
    rules: ResourceRules,
    overheads: Overheads,
    charged: Collection[str] | None,
    pods: bool,
    topology: bool,
) -> RunThere | str:
    problem = workload_violations(workload, limits, overheads)
    if problem:
        return problem
    try:
        usage = pod_set_usage(workload, counts, rules=rules, limits=limits, overheads=overheads)
    except ValueError as err:
        return f"its LimitRanges' defaults cannot be read: {err}"
    if charged is not None:
        usage = [(name, {r: a for r, a in requests.items() if r in charged}) for name, requests in usage]
    if pods:
        for (name, requests), raw in zip(usage, (workload.get("spec") or {}).get("podSets") or (), strict=True):
            requests["pods"] = counts.get(name, int(raw.get("count", 1))) * MILLI
    return run_there(usage, placement_requests(workload, counts, limits, overheads) if topology else None)


def placement_requests(
    workload: Mapping[str, Any], counts: Mapping[str, int], limits: LimitRangeSummary | None, overheads: Overheads
) -> list[PodSetRequest]:
    """The pod sets as placement requests (what a worker's TAS summary is checked with): their admitted ``counts``
    of pods as the LimitRanges ``limits`` (None: no LimitRange) and the RuntimeClasses' ``overheads`` make them, as
    the worker's placement sees them."""
    spec = workload.get("spec") or {}
    pod_sets = []
    for pod_set in spec.get("podSets") or ():
        name = str(pod_set.get("name") or "main")
        adjusted = pod_set_as_run(pod_set, limits, overheads)
        pod_sets.append({**adjusted, "count": counts[name]} if name in counts else adjusted)
    return topology_requests({**workload, "spec": {**spec, "podSets": pod_sets}})
