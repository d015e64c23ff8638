"""A Job whose LocalQueue feeds a ClusterQueue without a MultiKueue check runs on the manager cluster itself.

As with Kueue, only Jobs routed to MultiKueue are taken away from the cluster's own Job controller. kfed-manager
lists the other LocalQueues in the ``kfed-local-queues`` ConfigMap, which the Job admission policy reads through
``paramRef``: such a Job is created unchanged (no ``managedBy``, not suspended), runs on the manager's own kwok
node, and kfed makes no Workload, no copy and no Warning for it.
"""

from __future__ import annotations

import json

import pytest

from e2e.queues import job_manifest, named_queue_objects
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, items, remote_copies, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "local-only"


def test_a_job_of_a_local_queue_runs_on_the_manager_untouched_by_kfed(federation: Federation) -> None:
    # A ClusterQueue and LocalQueue with no MultiKueue check: the builder adds one only for manager=True.
    objects = named_queue_objects(QUEUE, cpu="4", manager=False)
    federation.kubectl(
        MANAGER, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    wait_for(
        lambda: (get(federation, MANAGER, "configmap", "kfed-local-queues", namespace="kfed-system") or {}).get("data"),
        until=lambda data: (data or {}).get(f"default.{QUEUE}") == QUEUE,
        timeout=30,
        what="kfed-manager to list the local LocalQueue in kfed-local-queues",
    )
    manifest = job_manifest("runs-here", namespace="default", cpu="1", seconds=2, queue=QUEUE)
    created = json.loads(
        federation.kubectl(MANAGER, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    assert "managedBy" not in created["spec"]
    assert created["spec"].get("suspend") in (None, False)
    wait_complete(federation, "runs-here", timeout=60)
    pods = items(federation, MANAGER, "pods", "-l", "job-name=runs-here")
    assert pods, "the Job's pods ran on the manager cluster"
    assert all(p["spec"]["nodeName"].startswith("manager-") for p in pods)
    assert workload_of(federation, "runs-here") is None
    assert remote_copies(federation, "runs-here") == {}
    warnings = [
        e
        for e in items(federation, MANAGER, "events.events.k8s.io")
        if (e.get("regarding") or {}).get("name") == "runs-here" and e.get("type") == "Warning"
    ]
    assert warnings == []
