"""What a pod template asks of quota: its effective requests, computed the way Kubernetes and Kueue do.

Effective request per resource = max(sum over containers, max over init containers) + pod overhead, where a
container's limit stands in for a missing request. Sidecar init containers (``restartPolicy: Always``) run
beside the main containers, so they add to the sum and to every later init container. Pod-level resources
(``spec.resources``, KEP-2837) replace that sum for the resources they may set (cpu, memory, hugepages), their
limits standing in for missing requests too, as the scheduler and Kueue count them; a pod-level amount below the
containers' own counts as theirs (as Kueue v0.20 does). Amounts are integer
milli-units (``federation.quantity``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.quantity import parse_quantity


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    amounts = {name: parse_quantity(str(q)) for name, q in (resources.get("limits") or {}).items()}
    amounts.update({name: parse_quantity(str(q)) for name, q in (resources.get("requests") or {}).items()})
    return amounts


POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
"""The resources pod-level ``spec.resources`` may set, besides ``hugepages-*``."""


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, 0), amount)


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of one pod of this spec (milli-units), without the implicit ``pods: 1``."""
    main: dict[str, int] = {}
    for container in pod_spec.get("containers") or ():
        _add(main, container_requests(container))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for init in pod_spec.get("initContainers") or ():
        amounts = container_requests(init)
        if init.get("restartPolicy") == "Always":
            _add(sidecars, amounts)
            continue
        with_sidecars = dict(sidecars)
        _add(with_sidecars, amounts)
        _max(init_peak, with_sidecars)
    total = dict(main)
    _add(total, sidecars)
    _max(total, init_peak)
    for name, amount in container_requests(pod_spec).items():
        if name in POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = max(total.get(name, 0), amount)  # never below the containers' own (Kueue v0.20, #16047)
    _add(total, {name: parse_quantity(str(q)) for name, q in (pod_spec.get("overhead") or {}).items()})
    return {name: amount for name, amount in total.items() if amount}


Overheads = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
"""RuntimeClass name → its ``overhead.podFixed`` (resource, quantity) pairs, sorted (hashable: it keys parse caches)."""


def runtime_overheads(runtime_classes: Iterable[Mapping[str, Any]]) -> Overheads:
    """The pod overhead of each RuntimeClass object that has one."""
    return overheads_of(
        ((runtime_class.get("metadata") or {}).get("name", ""), (runtime_class.get("overhead") or {}).get("podFixed"))
        for runtime_class in runtime_classes
    )


def overheads_of(pod_fixed: Iterable[tuple[Any, Mapping[str, Any] | None]]) -> Overheads:
    """:data:`Overheads` from (RuntimeClass name, its ``overhead.podFixed``) pairs, e.g. as a worker reports them;
    those without an overhead are left out."""
    return tuple(
        sorted(
            (str(name), tuple(sorted((str(k), str(v)) for k, v in fixed.items()))) for name, fixed in pod_fixed if fixed
        )
    )


def with_runtime_overhead(pod_spec: Mapping[str, Any], overheads: Overheads) -> Mapping[str, Any]:
    """``pod_spec`` with the overhead of its ``runtimeClassName`` when it sets none itself, as the RuntimeClass
    admission plugin gives its pods (and Kueue counts); as is otherwise, also when the RuntimeClass is not known (the
    pods' creation then fails on the cluster, which says so)."""
    name = pod_spec.get("runtimeClassName")
    if not name or not overheads or pod_spec.get("overhead"):
        return pod_spec
    fixed = next((pairs for known, pairs in overheads if known == name), None)
    return {**pod_spec, "overhead": dict(fixed)} if fixed else pod_spec


def total_requests(pod_sets: Iterable[tuple[Mapping[str, Any], int]]) -> dict[str, int]:
    """Sum of ``count`` times the per-pod requests over ``(pod spec, count)`` pairs."""
    total: dict[str, int] = {}
    for pod_spec, count in pod_sets:
        _add(total, {name: amount * count for name, amount in pod_requests(pod_spec).items()})
    return total
