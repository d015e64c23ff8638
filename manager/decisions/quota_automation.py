"""Kueue's MultiKueue manager quota automation (``MultiKueueConfig.spec.quotaManagement: Automated``), decided purely.

With automation requested, a manager ClusterQueue's quota follows its workers: for each worker of the config that
is connected, the worker's LocalQueues of the same namespace and name as the manager's LocalQueues into this
ClusterQueue lead to worker ClusterQueues, and the nominal quotas of those (every flavor, every resource) are summed.
The manager ClusterQueue must have exactly one resource group with one flavor; its resources become exactly its
covered resources, each with the summed nominal quota (0 when no worker has any), as Kueue writes them (other
limits of those resources are dropped). A worker that is not connected, or whose LocalQueue is gone, no longer
counts, so the quota drops with it. The outcome is shown on the ClusterQueue's ``MultiKueueManagerQuotaAutomation``
condition with Kueue's reasons and messages (pkg/controller/admissionchecks/multikueue/clusterqueue.go, v0.19.1);
a ClusterQueue without a MultiKueue check loses the condition.

kfed reads the workers' quota from their capacity reports (or, without one, their ClusterQueue status), which hold
the same nominal quotas Kueue lists from the workers' ClusterQueues.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.protocol import MULTIKUEUE_CONTROLLER
from federation.quantity import format_amount, parse_quantity
from manager.decisions.dispatch import WorkerCapacity

CONDITION = "MultiKueueManagerQuotaAutomation"
REASON_AUTOMATED = "QuotaAutomated"
REASON_NOT_REQUESTED = "NotRequested"
REASON_UNSUPPORTED = "UnsupportedConfiguration"
MESSAGE_AUTOMATED = "ClusterQueue quota is automatically managed based on MultiKueue workers."
MESSAGE_NOT_REQUESTED = "MultiKueue manager quota automation has not been requested."
MESSAGE_NO_CONFIG = "The referenced MultiKueueConfig was not found."
MESSAGE_ONE_FLAVOR = "Quota automation requires that the manager-side ClusterQueue has exactly one ResourceFlavor"


@dataclass(frozen=True, slots=True)
class Condition:
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class QuotaDecision:
    condition: Condition | None
    """The condition to set; None: remove it (not a MultiKueue manager ClusterQueue)."""
    resources: list[dict[str, str]] | None = None
    """The new ``resources`` of the ClusterQueue's one flavor; None: leave the spec alone."""


def _multikueue_config(
    cluster_queue: Mapping[str, Any],
    admission_checks: Mapping[str, Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    """The first MultiKueue AdmissionCheck of the ClusterQueue, by name as Kueue lists them (None: none)."""
    strategy = (cluster_queue.get("spec") or {}).get("admissionChecksStrategy") or {}
    names = {str(rule.get("name")) for rule in strategy.get("admissionChecks") or ()}
    for name in sorted(names):
        check = admission_checks.get(name)
        if check is not None and (check.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
            return check
    return None


def worker_quota(
    local_queues: Collection[tuple[str, str]],
    workers: Sequence[WorkerCapacity],
) -> dict[str, int]:
    """Summed nominal quota (milli-units) of the worker ClusterQueues fed by LocalQueues named like the manager's."""
    total: dict[str, int] = {}
    for capacity in workers:
        queues = {cq for key, cq in capacity.local_queues.items() if key in local_queues}
        for cq in sorted(queues):
            for flavor in capacity.cluster_queues.get(cq, ()):
                for resource, amount in flavor.nominal.items():
                    total[resource] = total.get(resource, 0) + amount
    return total


def _same(current: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, str]]) -> bool:
    if len(current) != len(wanted):
        return False
    for have, want in zip(current, wanted, strict=True):
        if set(have) != {"name", "nominalQuota"} or have["name"] != want["name"]:
            return False
        if parse_quantity(str(have["nominalQuota"])) != parse_quantity(want["nominalQuota"]):
            return False
    return True


def decide_quota(
    cluster_queue: Mapping[str, Any],
    *,
    admission_checks: Mapping[str, Mapping[str, Any]],
    configs: Mapping[str, Mapping[str, Any]],
    local_queues: Collection[tuple[str, str]],
    connected: Mapping[str, WorkerCapacity],
) -> QuotaDecision:
    """What quota automation does to ``cluster_queue``.

    ``local_queues`` are the (namespace, name) of the manager LocalQueues into it; ``connected`` the capacity of
    each connected worker (workers not in it do not count)."""
    check = _multikueue_config(cluster_queue, admission_checks)
    if check is None:
        return QuotaDecision(None)
    params = (check.get("spec") or {}).get("parameters") or {}
    config = configs.get(str(params.get("name", ""))) if params.get("kind") == "MultiKueueConfig" else None
    if config is None:
        return QuotaDecision(Condition(False, REASON_UNSUPPORTED, MESSAGE_NO_CONFIG))
    spec = config.get("spec") or {}
    if (spec.get("quotaManagement") or "Manual") == "Manual":
        return QuotaDecision(Condition(False, REASON_NOT_REQUESTED, MESSAGE_NOT_REQUESTED))
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    if len(groups) != 1 or len(groups[0].get("flavors") or []) != 1:
        return QuotaDecision(Condition(False, REASON_UNSUPPORTED, MESSAGE_ONE_FLAVOR))
    covered = [str(r) for r in groups[0].get("coveredResources") or ()]
    workers = [connected[name] for name in spec.get("clusters") or () if name in connected]
    total = worker_quota(local_queues, workers)
    missing = sorted(set(total) - set(covered))
    if missing:
        return QuotaDecision(
            Condition(
                False,
                REASON_UNSUPPORTED,
                "manager-side coveredResources is missing resources configured on workers: [" + " ".join(missing) + "]",
            )
        )
    wanted = [
        {"name": resource, "nominalQuota": format_amount(resource, total.get(resource, 0))} for resource in covered
    ]
    current = groups[0]["flavors"][0].get("resources") or []
    return QuotaDecision(
        Condition(True, REASON_AUTOMATED, MESSAGE_AUTOMATED),
        resources=None if _same(current, wanted) else wanted,
    )
