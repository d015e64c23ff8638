"""Topology placement at local admission (pure over the snapshots): the veto the admission drain consults.

Why this module exists: Kueue decides quota and topology together -- a workload whose pod set lands on a TAS
flavor is admitted only with a ``topologyAssignment``, written in the same status update that reserves quota.
The shared admission drain (``federation.admission.api_drain``) asks a veto before it books an admission; the
agent's veto places every TAS pod set on its flavor's snapshot (``federation.topology.place``), books the placement
in the snapshot so the next admission of the same pass sees it, and remembers the assignment for the status
write. A pod set that does not fit keeps the workload pending with the placement's reason (required: one domain
or wait; preferred: climb, then spread; unconstrained / implicit TAS: least free capacity).

``assumed_usage`` re-derives, from admitted workloads, the part of their assignments that no bound pod covers
yet, so a restart or a missed event never double-books nor leaks a node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from federation.admission.api_workloads import workload_key
from federation.admission.decisions import Admit
from federation.api.labels import HOSTNAME_LABEL
from federation.topology import (
    Placement,
    PlacementFailure,
    PodSetRequest,
    TopologyAssignment,
    TopologySnapshot,
    decode_assignment,
    encode_placement,
    place,
)
from worker_agent.decisions.tas_objects import FlavorTopology, pod_set_request

Obj = Mapping[str, Any]


def tas_flavor_of(flavors: Mapping[str, str], tas: Mapping[str, FlavorTopology]) -> FlavorTopology | None:
    """The TAS flavor among a pod set assignment's flavors (resource → flavor name), if any."""
    for name in flavors.values():
        if name in tas:
            return tas[name]
    return None


AsRun = Callable[[str, Obj], Obj]
"""(namespace, a ``spec.podSets[]`` entry) → the entry with its pod template as its pods will be created (the
namespace's LimitRange defaults and the RuntimeClass's overhead laid in: ``QuotaState.pod_set_as_run``)."""


def pod_sets_by_name(workload: Obj, as_run: AsRun | None = None) -> dict[str, Obj]:
    """The workload's pod sets by name, each as its pods will run when ``as_run`` is given."""
    pod_sets = (workload.get("spec") or {}).get("podSets") or ()
    if as_run is None:
        return {str(ps.get("name") or "main"): ps for ps in pod_sets}
    namespace = str((workload.get("metadata") or {}).get("namespace", ""))
    return {str(ps.get("name") or "main"): as_run(namespace, ps) for ps in pod_sets}


@dataclass(frozen=True, slots=True)
class TasPodSet:
    """One admitted TAS pod set: where it is booked and what it asked for."""

    key: str
    """``namespace/name/podset``: the snapshot booking key."""
    workload: str
    name: str
    flavor: FlavorTopology
    request: PodSetRequest
    assignment: TopologyAssignment


def admitted_tas_pod_sets(
    workload: Obj, tas: Mapping[str, FlavorTopology], *, as_run: AsRun | None = None
) -> list[TasPodSet]:
    """The pod sets of a quota-holding workload that have a topologyAssignment on a TAS flavor (each as its pods
    run, with ``as_run``)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    if not any(item.get("topologyAssignment") is not None for item in admission.get("podSetAssignments") or ()):
        return []
    specs = pod_sets_by_name(workload, as_run)
    found: list[TasPodSet] = []
    key = workload_key(workload)
    for item in admission.get("podSetAssignments") or ():
        raw_assignment = item.get("topologyAssignment")
        flavor = tas_flavor_of(item.get("flavors") or {}, tas)
        name = str(item.get("name") or "main")
        if raw_assignment is None or flavor is None or name not in specs:
            continue
        try:
            assignment = TopologyAssignment.from_dict(raw_assignment)
        except (ValueError, KeyError, TypeError):
            continue
        count = item.get("count")
        request = pod_set_request(specs[name], flavor, count=int(count) if count is not None else None)
        found.append(TasPodSet(f"{key}/{name}", key, name, flavor, request, assignment))
    return found


def expected_pods_per_node(snapshot: TopologySnapshot, assignment: TopologyAssignment) -> dict[str, int]:
    """Pods the assignment puts on each node (only for hostname-level assignments; else empty)."""
    if tuple(assignment.levels) != (HOSTNAME_LABEL,):
        return {}
    expected: dict[str, int] = {}
    for (host,), count in decode_assignment(assignment):
        state = snapshot.node_by_hostname(host)
        node = state.spec.name if state is not None else host
        expected[node] = expected.get(node, 0) + count
    return expected


def assumed_usage(
    pod_sets: Iterable[TasPodSet],
    snapshots: Mapping[str, TopologySnapshot],
    bound: Mapping[str, Mapping[str, int]],
) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
    """Per flavor, per booking key, per node: usage of assigned pods not bound yet (``bound``: key → node → pods)."""
    out: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    for pod_set in pod_sets:
        snapshot = snapshots.get(pod_set.flavor.name)
        if snapshot is None:
            continue
        per_pod = pod_set.request.per_pod_usage()
        running = bound.get(pod_set.key, {})
        per_node: dict[str, dict[str, int]] = {}
        for node, count in expected_pods_per_node(snapshot, pod_set.assignment).items():
            missing = count - running.get(node, 0)
            if missing > 0:
                per_node[node] = {name: amount * missing for name, amount in per_pod.items()}
        out.setdefault(pod_set.flavor.name, {})[pod_set.key] = per_node
    return out


@dataclass
class TasPlacer:
    """The drain's veto: places TAS pod sets and remembers their assignments (``assignments[workload key]``)."""

    tas: Mapping[str, FlavorTopology]
    snapshots: Mapping[str, TopologySnapshot]
    raw: Mapping[str, Obj]
    book: Any = None
    """``book(flavor, key, usage per node)``: called for every placement made (defaults to the snapshot)."""
    assignments: dict[str, dict[str, Obj]] = field(default_factory=dict)
    delay: Callable[[Admit], bool] | None = None
    """True for an admission whose TAS pod sets are placed only once its admission checks are Ready (a
    ProvisioningRequest check: the nodes do not exist yet); the first pass then reserves quota only."""
    delayed: dict[str, list[str]] = field(default_factory=dict)
    """Workload key → its TAS pod sets left unplaced by ``delay``."""
    waiting: str | None = None
    """Why no TAS pod set can be placed yet (the snapshots are still being built); None when they can."""
    as_run: AsRun | None = None
    """Each pod set as its pods will be created (placement counts what the pods will request)."""

    def veto(self, admit: Admit) -> str | None:
        key = admit.workload.key
        raw = self.raw.get(key)
        if raw is None:
            return None
        specs = pod_sets_by_name(raw, self.as_run)
        if self.delay is not None and self.delay(admit):
            names = [
                psa.name
                for psa in admit.assignment.pod_set_assignments
                if tas_flavor_of(psa.flavors, self.tas) is not None and psa.name in specs
            ]
            if names:
                self.delayed[key] = names
                return None
        return self._place(
            key, specs, [(psa.name, psa.flavors, psa.count) for psa in admit.assignment.pod_set_assignments]
        )

    def place_delayed(self, workload: Obj) -> dict[str, Obj] | str:
        """Second pass of two-phase TAS: place the reserved workload's pod sets whose ``delayedTopologyRequest`` is
        Pending on the nodes there are now, with the same rules as at admission. The assignments (pod set → its
        ``topologyAssignment``), or why they do not fit."""
        key = workload_key(workload)
        specs = pod_sets_by_name(workload, self.as_run)
        admission = (workload.get("status") or {}).get("admission") or {}
        wanted = [
            (str(psa.get("name")), dict(psa.get("flavors") or {}), int(psa["count"]) if psa.get("count") else None)
            for psa in admission.get("podSetAssignments") or ()
            if psa.get("delayedTopologyRequest") == "Pending" and psa.get("topologyAssignment") is None
        ]
        problem = self._place(key, specs, wanted)
        if problem is not None:
            return problem
        return self.assignments.pop(key, {})

    def _place(
        self, key: str, specs: Mapping[str, Obj], pod_sets: Iterable[tuple[str, Mapping[str, str], int | None]]
    ) -> str | None:
        placed: dict[str, tuple[FlavorTopology, Placement, PodSetRequest]] = {}
        for name, flavors, count in pod_sets:
            flavor = tas_flavor_of(flavors, self.tas)
            if flavor is None or name not in specs:
                continue
            if self.waiting is not None:
                return f"couldn't assign flavors to pod set {name}: {self.waiting}"
            snapshot = self.snapshots.get(flavor.name)
            if snapshot is None:
                return (
                    f"couldn't assign flavors to pod set {name}: topology {flavor.topology!r} "
                    f"of ResourceFlavor {flavor.name} not found"
                )
            request = pod_set_request(specs[name], flavor, count=count)
            result = place(snapshot, request)
            if isinstance(result, PlacementFailure):
                for done_name, (done_flavor, _, _) in placed.items():
                    done = self.snapshots.get(done_flavor.name)
                    if done is not None:
                        done.forget(f"{key}/{done_name}")
                return (
                    f"couldn't assign flavors to pod set {name}: topology {flavor.topology!r} doesn't allow to "
                    f"fit any of {request.count} pod(s): {result.message}"
                )
            usage = result.usage_per_node(request.per_pod_usage())
            if self.book is not None:
                self.book(flavor.name, f"{key}/{name}", usage)
            else:
                snapshot.assume(f"{key}/{name}", usage)
            placed[name] = (flavor, result, request)
        if placed:
            self.assignments[key] = {
                name: encode_placement(placement).to_dict() for name, (_, placement, _) in placed.items()
            }
        return None
