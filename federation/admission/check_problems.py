"""What keeps a ClusterQueue from admitting because of its admission checks or its Topologies, as Kueue tells it.

Kueue makes a ClusterQueue inactive (``Active=False``, nothing admitted, its Workloads waiting) while an admission
check it names does not exist or is not ``Active=True`` (its controller is not running, or finds its parameters
wrong), while its MultiKueue checks are set up in a way Kueue refuses, and, where topologies are assigned, while a
TAS flavor's Topology does not exist. The manager and the agent mark such a queue inactive in the quota snapshot
(``mark_inactive``), so that the admission cycle, the queue's status and the agent's capacity report all say the
same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federation.admission.api_state import QuotaState
from federation.admission.snapshot import Cause
from federation.api.provisioning import PROVISIONING_REQUEST_CONTROLLER_NAME
from federation.conditions import conditions_of
from federation.protocol import MULTIKUEUE_CONTROLLER


def cluster_queue_check_problems(
    cluster_queues: Iterable[Mapping[str, Any]], admission_checks: Iterable[Mapping[str, Any]]
) -> dict[str, list[Cause]]:
    """ClusterQueue name → every (Kueue's ``Active`` reason, what is wrong) its admission checks cause, in Kueue's
    order, for each ClusterQueue they keep from admitting (Kueue shows it ``Active=False``): a check that does not
    exist (``AdmissionCheckNotFound``) or is not ``Active=True`` (``AdmissionCheckInactive``, e.g. a MultiKueue check
    whose MultiKueueConfig is gone, or one whose controller never said it is active); more than one MultiKueue check
    (``MultipleMultiKueueAdmissionChecks``); a MultiKueue check on only some of the queue's flavors
    (``MultiKueueAdmissionCheckAppliedPerFlavor``); a MultiKueue check next to a ProvisioningRequest one
    (``MultiKueueWithProvisioningRequest``)."""
    checks = {str(check["metadata"]["name"]): check for check in admission_checks}
    problems: dict[str, list[Cause]] = {}
    for queue in cluster_queues:
        causes = _queue_check_causes(queue, checks)
        if causes:
            problems[str(queue["metadata"]["name"])] = causes
    return problems


def _queue_check_causes(queue: Mapping[str, Any], checks: Mapping[str, Mapping[str, Any]]) -> list[Cause]:
    """What :func:`cluster_queue_check_problems` finds for one ClusterQueue (``checks``: AdmissionCheck by name)."""
    spec = queue.get("spec") or {}
    strategy = spec.get("admissionChecksStrategy") or {}
    all_flavors = {
        str(flavor.get("name")) for group in spec.get("resourceGroups") or () for flavor in group.get("flavors") or ()
    }
    missing: list[str] = []
    inactive: list[str] = []
    multikueue: list[str] = []
    per_flavor: list[str] = []
    provisioning: list[str] = []
    for rule in strategy.get("admissionChecks") or ():
        name = str(rule.get("name") or "")
        check = checks.get(name)
        if not name:
            continue
        if check is None:
            missing.append(name)
            continue
        if not any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions_of(check)):
            inactive.append(name)
        controller = (check.get("spec") or {}).get("controllerName")
        if controller == PROVISIONING_REQUEST_CONTROLLER_NAME:
            provisioning.append(name)
        elif controller == MULTIKUEUE_CONTROLLER:
            multikueue.append(name)
            if rule.get("onFlavors") and set(rule["onFlavors"]) != all_flavors:
                per_flavor.append(name)
    causes: list[Cause] = []
    if missing:
        causes.append(("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {_listed(missing)}"))
    if inactive:
        causes.append(("AdmissionCheckInactive", f"references inactive AdmissionCheck(s): {_listed(inactive)}"))
    if len(multikueue) > 1:
        causes.append(
            (
                "MultipleMultiKueueAdmissionChecks",
                "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: "
                + _listed(multikueue),
            )
        )
    if per_flavor:
        causes.append(
            (
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {_listed(per_flavor)}",
            )
        )
    if multikueue and provisioning:
        causes.append(
            (
                "MultiKueueWithProvisioningRequest",
                "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: "
                f"{_listed(multikueue)}, {_listed(provisioning)}",
            )
        )
    return causes


def _listed(names: Iterable[str]) -> str:
    """Names as Kueue lists them in a ClusterQueue's ``Active`` message: sorted, joined by a bare comma."""
    return ",".join(sorted(names))


def topology_problems(
    cluster_queues: Iterable[Mapping[str, Any]],
    flavors: Iterable[Mapping[str, Any]],
    topologies: Iterable[Mapping[str, Any]],
) -> dict[str, list[Cause]]:
    """ClusterQueue name → ``TopologyNotFound`` for each TAS flavor of the queue (``spec.topologyName``) whose
    Topology does not exist, as Kueue words it. Only where the topology is assigned: on a worker; a MultiKueue
    manager leaves it to the worker, as Kueue's does."""
    topology_of = {
        str(flavor["metadata"]["name"]): str((flavor.get("spec") or {}).get("topologyName") or "") for flavor in flavors
    }
    existing = {str(topology["metadata"]["name"]) for topology in topologies}
    problems: dict[str, list[Cause]] = {}
    for queue in cluster_queues:
        names = {
            str(flavor.get("name"))
            for group in (queue.get("spec") or {}).get("resourceGroups") or ()
            for flavor in group.get("flavors") or ()
        }
        causes = [
            ("TopologyNotFound", f'there is no Topology "{topology_of[name]}" for TAS flavor "{name}"')
            for name in sorted(names)
            if topology_of.get(name) and topology_of[name] not in existing
        ]
        if causes:
            problems[str(queue["metadata"]["name"])] = causes
    return problems


def merged(*problems: Mapping[str, Sequence[Cause]]) -> dict[str, list[Cause]]:
    """Several ClusterQueue → causes maps as one, each queue's causes in the order of the maps."""
    result: dict[str, list[Cause]] = {}
    for found in problems:
        for name, causes in found.items():
            result.setdefault(name, []).extend(causes)
    return result


def mark_inactive(state: QuotaState, problems: Mapping[str, Sequence[Cause]]) -> None:
    """Mark each ClusterQueue of ``problems`` inactive in ``state``'s snapshot, keeping the causes for its status
    (an inactive reason of its own, e.g. being stopped, stays first)."""
    for name, causes in problems.items():
        node = state.snapshot.cluster_queues.get(name)
        if node is None or not causes:
            continue
        node.check_causes = tuple(causes)
