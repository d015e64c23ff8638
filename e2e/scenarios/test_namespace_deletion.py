"""Deleting a namespace on the manager while its Jobs run and wait (a hostile user's cleanup): the namespace goes
away, the copies of its running Jobs are removed from the workers, and kfed-manager neither mistakes the apiserver's
"namespace is being terminated" refusals for missing permissions nor retries them in a loop (SCENARIOS.md S5, F10's
"no orphans")."""

from __future__ import annotations

import json

import pytest

from e2e.queues import CLUSTER_QUEUE, LOCAL_QUEUE, job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, items
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

NAMESPACE = "doomed"


def _apply(fed: Federation, cluster: str, objects: list[dict[str, object]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _copies(fed: Federation) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for worker in fed.workers:
        names = [
            f"{kind}/{obj['metadata']['name']}"
            for kind in ("jobs.batch", "workloads.kueue.x-k8s.io")
            for obj in items(fed, worker, kind, namespace=NAMESPACE)
        ]
        if names:
            found[worker] = names
    return found


def _log_lines(fed: Federation, text: str) -> list[str]:
    log = fed.directory / "logs" / "kfed-manager.log"
    return [line for line in log.read_text(errors="replace").splitlines() if text in line]


def test_deleting_a_namespace_with_running_and_waiting_jobs_leaves_nothing_behind(federation: Federation) -> None:
    queue: dict[str, object] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }
    namespace: dict[str, object] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    for cluster in federation.clusters:
        _apply(federation, cluster, [namespace])
        _apply(federation, cluster, [queue])
    refused_before = len(_log_lines(federation, "request refused by this cluster"))
    tracebacks_before = len(_log_lines(federation, "Traceback"))
    running = [job_manifest(f"long-{i}", namespace=NAMESPACE, cpu="1", seconds=600) for i in range(2)]
    waiting = job_manifest("too-big", namespace=NAMESPACE, cpu="500")  # more than the ClusterQueue's quota
    _apply(federation, MANAGER, [*running, waiting])
    wait_for(
        lambda: _copies(federation),
        until=lambda copies: sum(name.startswith("jobs.batch/") for names in copies.values() for name in names) == 2,
        timeout=60,
        what="both long Jobs running on the workers",
    )

    federation.kubectl(MANAGER, "delete", "namespace", NAMESPACE, "--wait=false")
    wait_for(
        lambda: get(federation, MANAGER, "namespace", NAMESPACE, namespace=""),
        until=lambda ns: ns is None,
        timeout=90,
        what=f"namespace {NAMESPACE} gone from the manager",
    )
    wait_for(
        lambda: _copies(federation),
        until=lambda copies: copies == {},
        timeout=60,
        what="no copy left on any worker",
    )
    refused = _log_lines(federation, "request refused by this cluster")[refused_before:]
    assert not refused, "a namespace being deleted is not a missing permission:\n" + "\n".join(refused[:5])
    assert len(_log_lines(federation, "Traceback")) == tracebacks_before
    for worker in federation.workers:
        federation.kubectl(worker, "delete", "namespace", NAMESPACE, "--wait=false")
