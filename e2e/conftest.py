"""Session-scoped fixtures: one local federation shared by every integration test, stopped at the end."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.rig.federation import Federation, FederationSpec, running
from e2e.scenarios.helpers import DISPATCH_TIMEOUT, MANAGER_ARGS, WORKER_LOST_TIMEOUT
from e2e.toolchain import ensure_built


@pytest.fixture(scope="session")
def rig() -> Iterator[Federation]:
    """1 manager + 2 workers of real Kubernetes binaries, kwok nodes, kfed CRDs; no kfed controllers."""
    bins = ensure_built()
    with tempfile.TemporaryDirectory(prefix="kfed-rig-") as tmp, running(Path(tmp), bins, FederationSpec()) as fed:
        yield fed
        refused = fed.forbidden_in_logs()
        assert not refused, "kfed was refused by the charts' RBAC:\n" + "\n".join(refused[:20])


@pytest.fixture(scope="session")
def federation() -> Iterator[Federation]:
    """A federation with kfed running: kfed-manager, kfed-agents on worker-1 (32 cpu) and worker-2 (64 cpu), the
    MultiKueue objects, and sample queues (manager ClusterQueue of 96 cpu, each worker's sized to it).

    kfed runs from the charts (e2e/rig/from_charts.py): helm-installed, each process with only its chart's
    ServiceAccount token, the workers joined with `kubectl kfed add-worker`. Any call the charts' RBAC refused, in
    any kfed log, fails the run at the end."""
    import json

    from e2e.queues import queue_objects
    from e2e.rig.nodes import NodeShape

    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        node_shapes={"worker-1": NodeShape(count=4), "worker-2": NodeShape(count=8)},
        job_seconds=3,
        controllers=True,
        dispatch_timeout=DISPATCH_TIMEOUT,
        worker_lost_timeout=WORKER_LOST_TIMEOUT,
        manager_args=MANAGER_ARGS,
        manager_nodes=1,
        from_charts=True,
    )
    with tempfile.TemporaryDirectory(prefix="kfed-fed-") as tmp:
        with running(Path(tmp), bins, spec) as fed:
            for cluster, cpu in (("manager", "96"), ("worker-1", "32"), ("worker-2", "64")):
                items = queue_objects(namespace="default", cpu=cpu, memory="512Gi", manager=cluster == "manager")
                fed.kubectl(
                    cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
                )
            yield fed
        refused = fed.forbidden_in_logs()  # after the processes stopped: their last words count too
        assert not refused, "kfed was refused by the charts' RBAC:\n" + "\n".join(refused[:20])
