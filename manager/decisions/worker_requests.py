"""A workload's requests as a worker's namespace makes its pods, for capacity probing (pure).

The manager charges a Workload's global quota with its pods as the manager's namespace would make them: the
namespace's LimitRange defaults fill what the containers leave out. The worker's quota charges the pods the Job copy
gets there, and its namespace may have other LimitRanges, or none: a Job without requests in a namespace whose
LimitRange gives each container ``defaultRequest: {cpu: 4}`` asks for 4 cpu a pod where that LimitRange is, and
for none where it is not; a default for a resource the worker's ClusterQueue does not cover leaves the copy
pending there. So when a LimitRange is involved on either side, each worker is judged with the requests its own
LimitRanges (from its capacity report) make, and one whose LimitRanges would refuse the pods is named with Kueue's
words, and a pod set that asks for a topology is checked against the worker's TAS summary with those pods. The same
goes for RuntimeClass overheads: Kueue charges a pod naming a RuntimeClass that class's ``overhead.podFixed`` as the
cluster has it, and a worker reports its own (a worker whose report does not say is assumed to have the manager's).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from federation.admission.api_workloads import ResourceRules, pod_set_usage
from federation.limit_ranges import LimitRangeSummary, pod_set_as_run, workload_violations
from federation.podspec import Overheads
from federation.quantity import MILLI, parse_quantity
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
    basis: str = field(default="", compare=False)
    """Which requests these are, for a refusal that names them (e.g. ``the pods' requests with the LimitRange
    defaults of namespace team-a there``)."""


def run_there(
    usage: Sequence[tuple[str, Mapping[str, int]]], topology: Sequence[PodSetRequest] | None = None, basis: str = ""
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
        basis=basis,
    )


AsRunThere = Callable[[LimitRangeSummary | None, Overheads | None], RunThere | str]
"""A worker namespace's LimitRanges (None: it has none) and the worker's RuntimeClass overheads (None: not reported,
the manager's are assumed) → the workload's requests there, or why they refuse it."""


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
    workers' TAS summaries. ``overheads``: the manager's RuntimeClass overheads, for a worker that does not report
    its own. Each distinct pair of LimitRange summary and overheads is judged once."""
    judged: dict[tuple[LimitRangeSummary | None, Overheads | None], RunThere | str] = {}

    def judge(limits: LimitRangeSummary | None, overheads_there: Overheads | None) -> RunThere | str:
        found = judged.get((limits, overheads_there))
        if found is None:
            found = _judge(
                workload,
                counts,
                limits,
                rules=rules,
                overheads=overheads if overheads_there is None else overheads_there,
                charged=charged,
                pods=pods,
                topology=topology,
                basis=_basis(workload, limits, overheads, overheads_there),
            )
            judged[limits, overheads_there] = found
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
    basis: str,
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
    return run_there(usage, placement_requests(workload, counts, limits, overheads) if topology else None, basis=basis)


def runtime_class_names(workload: Mapping[str, Any]) -> frozenset[str]:
    """The RuntimeClasses the workload's pod templates name."""
    return frozenset(
        str(name)
        for pod_set in (workload.get("spec") or {}).get("podSets") or ()
        if (name := ((pod_set.get("template") or {}).get("spec") or {}).get("runtimeClassName"))
    )


def overheads_differ(names: Collection[str], here: Overheads, there: Overheads | None) -> list[str]:
    """Those of the RuntimeClasses ``names`` whose overhead on a worker (``there``; None: not reported, so the same)
    is not the manager's (``here``), compared by quantity."""
    if there is None:
        return []
    mine, theirs = _amounts(here), _amounts(there)
    return sorted(name for name in names if mine.get(name) != theirs.get(name))


def overheads_differ_somewhere(
    workload: Mapping[str, Any], here: Overheads, reported: Collection[Overheads | None]
) -> bool:
    """Whether some worker's overhead (``reported``, one entry per distinct report) for a RuntimeClass the
    workload's pods name differs from the manager's (``here``): then each worker is judged with its own."""
    if not reported or all(there is None or there == here for there in reported):
        return False
    names = runtime_class_names(workload)
    return bool(names) and any(overheads_differ(names, here, there) for there in reported)


def _amounts(overheads: Overheads) -> dict[str, dict[str, int]]:
    return {name: {resource: parse_quantity(amount) for resource, amount in fixed} for name, fixed in overheads}


def _basis(
    workload: Mapping[str, Any], limits: LimitRangeSummary | None, here: Overheads, there: Overheads | None
) -> str:
    namespace = (workload.get("metadata") or {}).get("namespace", "")
    parts = [f"the LimitRange defaults of namespace {namespace} there"] if limits is not None else []
    theirs = dict(there or ())
    for name in overheads_differ(runtime_class_names(workload), here, there):
        parts.append(f"{'the' if name in theirs else 'no'} overhead of RuntimeClass {name} there")
    if not parts:
        return f"the pods' requests there: namespace {namespace} has no LimitRange defaults there"
    return "the pods' requests with " + " and ".join(parts)


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
