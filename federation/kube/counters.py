"""Counts of API calls per cluster, verb and resource.

"How many API writes does one Job cost?" is a headline number for a federation controller; every call made
through :class:`federation.kube.api.KubeApi` is recorded here (each HTTP attempt, retries included), and the
benchmarks and metrics read snapshots. Pure and cheap: a dict increment per call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

READ_VERBS = frozenset({"get", "list", "watch"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class ApiCallCounter:
    """Call counts keyed by ``(verb, resource)``; resource is e.g. ``workloads.kueue.x-k8s.io/status``."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()

    def record(self, verb: str, resource: str) -> None:
        self._counts[(verb, resource)] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        return dict(self._counts)

    def total(self, *, verbs: Iterable[str] | None = None, resource: str | None = None) -> int:
        wanted = None if verbs is None else frozenset(verbs)
        return sum(
            n
            for (verb, res), n in self._counts.items()
            if (wanted is None or verb in wanted) and (resource is None or res == resource)
        )

    def writes(self, *, resource: str | None = None) -> int:
        return self.total(verbs=WRITE_VERBS, resource=resource)

    def reads(self, *, resource: str | None = None) -> int:
        return self.total(verbs=READ_VERBS, resource=resource)

    def reset(self) -> None:
        self._counts.clear()
