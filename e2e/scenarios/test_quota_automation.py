"""Kueue's MultiKueue manager quota automation: with ``quotaManagement: Automated`` on the MultiKueueConfig, the
manager ClusterQueue's nominal quota is the sum of its workers' ClusterQueues (those fed by LocalQueues named like
the manager's), and drops when a worker's quota shrinks or its LocalQueue is deleted; the ClusterQueue shows
``MultiKueueManagerQuotaAutomation=True`` (``QuotaAutomated``).

Queues, check and config of their own on the shared federation; no Job goes through them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import multikueue_check_objects, named_queue_objects
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "automated"
CHECK = "kfed-automated"
CONFIG = "kfed-automated"


def _apply(fed: Federation, cluster: str, items: list[dict[str, Any]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def _quota(fed: Federation) -> tuple[dict[str, str], dict[str, Any] | None]:
    cq = get(fed, MANAGER, "clusterqueue", QUEUE) or {}
    flavors = ((cq.get("spec") or {}).get("resourceGroups") or [{}])[0].get("flavors") or [{}]
    quota = {r["name"]: r["nominalQuota"] for r in flavors[0].get("resources") or ()}
    return quota, condition(cq, "MultiKueueManagerQuotaAutomation")


def _wait_quota(fed: Federation, cpu: str, memory: str, what: str) -> None:
    wait_for(
        lambda: _quota(fed),
        until=lambda q: (
            q[0] == {"cpu": cpu, "memory": memory}
            and q[1] is not None
            and q[1]["status"] == "True"
            and q[1]["reason"] == "QuotaAutomated"
        ),
        timeout=30,
        what=f"the manager ClusterQueue's quota to be cpu={cpu} memory={memory} ({what})",
    )


def test_the_manager_quota_follows_the_workers_quota(federation: Federation) -> None:
    fed = federation
    mk = multikueue_check_objects(CONFIG, ["worker-1", "worker-2"], check_name=CHECK, quota_management="Automated")
    manager_queues = named_queue_objects(QUEUE, cpu="1", manager=False)
    manager_queues[0]["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    try:
        _apply(fed, MANAGER, mk + manager_queues)
        _apply(fed, "worker-1", named_queue_objects(QUEUE, cpu="4", manager=False))
        _apply(fed, "worker-2", named_queue_objects(QUEUE, cpu="6", manager=False))
        _wait_quota(fed, "10", "128Gi", "4 + 6 cpu, 64Gi + 64Gi")
        # worker-1's quota shrinks
        fed.kubectl(
            "worker-1",
            "patch",
            "clusterqueue",
            QUEUE,
            "--type=json",
            "-p",
            json.dumps(
                [{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", "value": "2"}]
            ),
        )
        _wait_quota(fed, "8", "128Gi", "worker-1 shrunk to 2 cpu")
        # worker-2's LocalQueue is deleted: its ClusterQueue no longer counts
        fed.kubectl("worker-2", "delete", "localqueue", QUEUE, "-n", "default")
        _wait_quota(fed, "2", "64Gi", "worker-2's LocalQueue deleted")
    finally:
        for cluster in (MANAGER, "worker-1", "worker-2"):
            fed.kubectl(cluster, "delete", "localqueue", QUEUE, "-n", "default", "--ignore-not-found", check=False)
            fed.kubectl(cluster, "delete", "clusterqueue", QUEUE, "--ignore-not-found", check=False)
        fed.kubectl(MANAGER, "delete", "admissioncheck", CHECK, "--ignore-not-found", check=False)
        fed.kubectl(MANAGER, "delete", "multikueueconfig", CONFIG, "--ignore-not-found", check=False)
