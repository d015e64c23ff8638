"""Adapters from the quota objects of the API (ResourceFlavor, ClusterQueue, Cohort) to the admission core's specs.

The watch caches hold raw JSON; these parse each object once with the pydantic models (so a malformed object is
reported, not half-used) and translate Kueue's fields into the core's frozen dataclasses with quantities in
milli-units. A ClusterQueue that cannot be translated is reported with a reason and left out of the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from federation.admission import model as core
from federation.api.clusterqueue import ClusterQueue
from federation.api.cohort import Cohort
from federation.api.quota import ResourceGroup
from federation.api.resourceflavor import ResourceFlavor
from federation.quantity import MILLI, parse_quantity

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    """A ResourceFlavor as the core sees it plus what the Job controller injects (tolerations)."""

    spec: core.ResourceFlavorSpec
    tolerations: tuple[Obj, ...]


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A ClusterQueue's core spec, or why it could not be used (``problem``)."""

    name: str
    spec: core.ClusterQueueSpec | None
    namespace_selector: Obj | None
    flavor_names: tuple[str, ...]
    problem: str = ""
    terminating: bool = False
    """Being deleted (``deletionTimestamp`` set): admits nothing new, and is kept while workloads hold quota."""


def _quantity(value: object) -> int:
    return parse_quantity(str(value))


def _optional_quantity(value: object) -> int | None:
    return None if value is None else _quantity(value)


def resource_groups(groups: Iterable[ResourceGroup]) -> tuple[core.ResourceGroup, ...]:
    return tuple(
        core.ResourceGroup(
            covered_resources=tuple(group.covered_resources),
            flavors=tuple(
                core.FlavorQuotas(
                    name=flavor.name,
                    resources=tuple(
                        core.ResourceQuota(
                            name=quota.name,
                            nominal=_quantity(quota.nominal_quota),
                            borrowing_limit=_optional_quantity(quota.borrowing_limit),
                            lending_limit=_optional_quantity(quota.lending_limit),
                        )
                        for quota in flavor.resources
                    ),
                )
                for flavor in group.flavors
            ),
        )
        for group in groups
    )


def _weight(fair_sharing: Any) -> int:
    if fair_sharing is None:
        return MILLI
    return _quantity(fair_sharing.weight)


def flavor_info(raw: Mapping[str, Any]) -> FlavorInfo:
    """Raises ``ValueError`` (pydantic's ValidationError is one) on a malformed object."""
    flavor = ResourceFlavor.model_validate(raw)
    spec = flavor.spec
    taints = tuple(
        core.Taint(key=t.key, value=t.value or "", effect=cast(Any, t.effect)) for t in spec.node_taints or ()
    )
    tolerations = tuple(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in spec.tolerations or ())
    return FlavorInfo(
        core.ResourceFlavorSpec(flavor.name, dict(spec.node_labels or {}), taints, spec.topology_name or ""),
        tolerations,
    )


def queue_info(raw: Mapping[str, Any]) -> QueueInfo:
    """A ClusterQueue translated for the core; a malformed one comes back with ``spec=None`` and a ``problem``."""
    name = str((raw.get("metadata") or {}).get("name", ""))
    try:
        queue = ClusterQueue.model_validate(raw)
        spec = queue.spec
        preemption = spec.preemption
        core_spec = core.ClusterQueueSpec(
            name=name,
            resource_groups=resource_groups(spec.groups()),
            cohort=spec.cohort_name,
            queueing_strategy=spec.queueing_strategy,
            preemption=core.PreemptionPolicy(
                within_cluster_queue=preemption.within_cluster_queue,
                reclaim_within_cohort=preemption.reclaim_within_cohort,
                borrow_within_cohort=preemption.borrow_within_cohort.policy,
                max_priority_threshold=preemption.borrow_within_cohort.max_priority_threshold,
            ),
            flavor_fungibility=core.FlavorFungibility(
                when_can_borrow=spec.flavor_fungibility.when_can_borrow,
                when_can_preempt=spec.flavor_fungibility.when_can_preempt,
            ),
            fair_sharing_weight=_weight(spec.fair_sharing),
            stopped=spec.stop_policy != "None",
        )
    except (ValidationError, ValueError) as exc:
        return QueueInfo(name, None, None, (), problem=f"invalid ClusterQueue: {_short(exc)}")
    terminating = bool((raw.get("metadata") or {}).get("deletionTimestamp"))
    selector = spec.namespace_selector
    flavor_names = tuple(dict.fromkeys(f.name for group in spec.groups() for f in group.flavors))
    return QueueInfo(
        name,
        core_spec,
        None if selector is None else selector.model_dump(mode="json", by_alias=True, exclude_none=True),
        flavor_names,
        terminating=terminating,
    )


def cohort_spec(raw: Mapping[str, Any]) -> core.CohortSpec:
    """Raises ``ValueError`` on a malformed object."""
    cohort = Cohort.model_validate(raw)
    spec = cohort.spec
    return core.CohortSpec(
        name=cohort.name,
        parent=spec.parent_name,
        resource_groups=resource_groups(spec.resource_groups or ()),
        fair_sharing_weight=_weight(spec.fair_sharing),
    )


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        return f"{where}: {first.get('msg', '')}" if where else str(first.get("msg", ""))
    return str(exc)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against labels, with Kueue's meaning for a ClusterQueue: null selects nothing."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or ():
        key, operator = requirement.get("key", ""), requirement.get("operator", "")
        values = requirement.get("values") or ()
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True
