"""A worker joined with only the permissions Kueue documents for the MultiKueue manager is usable.

Kueue's create-multikueue-kubeconfig.sh grants the manager Jobs, Workloads, their status, and read access to
ClusterQueues and LocalQueues on a worker; nothing covers kfed's ``clustercapacities.kfed.io``. kfed-manager then
gets 403 for the capacity report; instead of failing the connection it probes the worker through its ClusterQueue
status (DESIGN §5), says so on the MultiKueueCluster's ``Active`` condition, and dispatches there.

A federation of its own (one worker, kfed from the venv): the shared one runs from the charts and fails on any 403
in kfed's logs, and the 403 is the point here.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.interop import kueue_manager_kubeconfig, use_kubeconfig
from e2e.queues import queue_objects
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, get, remote_copies, submit, wait_complete, worker_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

WORKER = "worker-1"
PROBED = "probed through the worker's ClusterQueue status"


@pytest.fixture(scope="module")
def kueue_rbac_federation() -> Iterator[Federation]:
    bins = ensure_built()
    spec = FederationSpec(workers=1, node_shapes={WORKER: NodeShape(count=2)}, job_seconds=2, controllers=True)
    with tempfile.TemporaryDirectory(prefix="kfed-perm-") as tmp, running(Path(tmp), bins, spec) as fed:
        for cluster in (MANAGER, WORKER):
            items = queue_objects(namespace="default", cpu="8", memory="64Gi", manager=cluster == MANAGER)
            fed.kubectl(
                cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
            )
        yield fed


def test_a_worker_with_kueues_documented_permissions_is_probed_through_its_cluster_queues(
    kueue_rbac_federation: Federation,
) -> None:
    fed = kueue_rbac_federation
    use_kubeconfig(fed, WORKER, kueue_manager_kubeconfig(fed, WORKER))
    active = wait_for(
        lambda: condition(get(fed, MANAGER, "multikueuecluster", WORKER, namespace="kfed-system"), "Active"),
        until=lambda c: c is not None and c["status"] == "True" and PROBED in str(c["message"]),
        timeout=60,
        what=f"{WORKER} Active=True, saying it is {PROBED}",
    )
    assert active is not None
    assert active["reason"] == "Active"
    assert "403" in str(active["message"]), active  # the refusal is named, not hidden
    for i in range(3):
        submit(fed, f"kueue-rbac-{i}", cpu="2", seconds=1)
    for i in range(3):
        job = wait_complete(fed, f"kueue-rbac-{i}", timeout=90)
        assert job["status"].get("succeeded") == 1
        assert worker_of(fed, f"kueue-rbac-{i}") == WORKER
    for i in range(3):
        wait_for(
            lambda i=i: remote_copies(fed, f"kueue-rbac-{i}"),  # type: ignore[misc]
            until=lambda copies: copies == {},
            timeout=30,
            what=f"the copies of kueue-rbac-{i} to be removed from {WORKER}",
        )
