"""A process not ready because a cache has not listed says which cache, and why its list keeps failing."""

from __future__ import annotations

from dataclasses import dataclass

from federation.kube.cache import unsynced
from federation.kube.resources import COHORTS, NAMESPACES, WORKLOADS, Resource


@dataclass
class _Cache:
    resource: Resource
    synced: bool
    last_error: str | None = None


def test_only_caches_that_have_not_listed_are_named_each_with_the_error_its_list_fails_with() -> None:
    refused = '403 Forbidden: namespaces is forbidden: User "system:serviceaccount:kfed-system:kfed-manager" cannot'
    caches = [
        _Cache(WORKLOADS, synced=True, last_error="connection reset"),  # listed once: ready, whatever came after
        _Cache(NAMESPACES, synced=False, last_error=refused),
        _Cache(COHORTS, synced=False),  # still listing, nothing failed
    ]
    assert unsynced(caches) == [f"{NAMESPACES.label} ({refused})", COHORTS.label]
