"""Node filtering by node selector, taints and tolerations.

Why this module exists: which nodes a pod set may use depends only on the pod set's node selector and
tolerations and the node's labels and taints. Kubernetes' rules for matching a toleration to a taint are small
but easy to get subtly wrong, so they live in one tested place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from federation.topology.model import NO_EXECUTE, NO_SCHEDULE, Taint, Toleration

_FILTERING_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (Kubernetes semantics)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def taints_tolerated(taints: Iterable[Taint], tolerations: tuple[Toleration, ...]) -> bool:
    """True when every ``NoSchedule``/``NoExecute`` taint is tolerated (``PreferNoSchedule`` never filters)."""
    for taint in taints:
        if taint.effect in _FILTERING_EFFECTS and not any(tolerates(tol, taint) for tol in tolerations):
            return False
    return True


def selector_matches(node_selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """True when every ``key: value`` of ``node_selector`` is among ``labels``."""
    return all(labels.get(key) == value for key, value in node_selector.items())
