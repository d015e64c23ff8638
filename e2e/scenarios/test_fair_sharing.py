"""Kueue's fair sharing, on a federation of its own whose kfed-manager and kfed-agent (installed from their charts,
run as their ServiceAccounts) have it on: the weighted share a borrowing ClusterQueue shows in ``status.fairSharing``
on the manager and on the worker, and the one their Cohorts show in theirs, as Kueue's cohort controller writes
them, back to 0 once the quota is returned.
"""

from __future__ import annotations

import functools
import json
import operator
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.queues import FLAVOR, apply_sample_queues, job_manifest, named_queue_objects, routed_queue_objects
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import get, worker_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "fs-a"


def _cohort(name: str, *, parent: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if cpu is not None:
        quota = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "0"}]
        spec["resourceGroups"] = [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR, "resources": quota}]}
        ]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _apply(fed: Federation, cluster: str, objects: list[dict[str, Any]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


@pytest.fixture(scope="module")
def fair() -> Iterator[Federation]:
    """One worker; on the manager, ClusterQueue ``fs-a`` (2 cpu) in Cohort ``fs-team`` (no quota of its own) under
    Cohort ``fs-root``, which holds 8 cpu more to lend; on the worker, ClusterQueue ``fs-a`` (2 cpu) in a cohort
    with ``fs-lender`` (14 cpu)."""
    spec = FederationSpec(
        workers=1,
        default_shape=NodeShape(count=2),
        job_seconds=2,
        controllers=True,
        from_charts=True,
        manager_args=("--fair-sharing",),
        agent_args=("--fair-sharing",),
    )
    with tempfile.TemporaryDirectory(prefix="kfed-fair-") as tmp, running(Path(tmp), ensure_built(), spec) as fed:
        apply_sample_queues(fed)
        for worker in fed.workers:
            borrower, local_queue = named_queue_objects(QUEUE, cpu="2", manager=False)
            (lender, _) = named_queue_objects("fs-lender", cpu="14", manager=False)
            borrower["spec"]["cohortName"] = lender["spec"]["cohortName"] = "fs-pool"
            _apply(fed, worker, [_cohort("fs-pool"), borrower, lender, local_queue])
        manager_objects = routed_queue_objects(QUEUE, list(fed.workers), cpu="2")
        next(o for o in manager_objects if o["kind"] == "ClusterQueue")["spec"]["cohortName"] = "fs-team"
        _apply(fed, MANAGER, [_cohort("fs-root", cpu="8"), _cohort("fs-team", parent="fs-root"), *manager_objects])
        yield fed


def _share(fed: Federation, kind: str, name: str, cluster: str = MANAGER) -> Any:
    return ((get(fed, cluster, kind, name, namespace="") or {}).get("status") or {}).get("fairSharing")


def test_a_borrowing_queue_and_its_cohorts_show_kueues_weighted_share(fair: Federation) -> None:
    """``fs-a`` runs 6 cpu on its 2: it borrows 4 of the 10 its parent could get at most, 400 per mille at weight 1;
    ``fs-team`` borrows the same 4 of ``fs-root``'s 10; ``fs-root``, the top, borrows from no one. On the worker,
    its ``fs-a`` borrows 4 of its cohort's 16: 250."""
    job = job_manifest("fair-borrower", namespace="default", cpu="6", memory="0", seconds=600, queue=QUEUE)
    fair.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(job))
    wait_for(lambda: worker_of(fair, "fair-borrower"), until=bool, timeout=60, what="fair-borrower admitted")
    expected = {
        ("clusterqueues.kueue.x-k8s.io", QUEUE): {"weightedShare": 400},
        ("cohorts.kueue.x-k8s.io", "fs-team"): {"weightedShare": 400},
        ("cohorts.kueue.x-k8s.io", "fs-root"): {"weightedShare": 0},
    }
    worker = fair.workers[0]
    wait_for(
        functools.partial(_share, fair, "clusterqueues.kueue.x-k8s.io", QUEUE, worker),
        until=functools.partial(operator.eq, {"weightedShare": 250}),
        timeout=30,
        what=f"{worker}'s ClusterQueue {QUEUE} to show its weighted share",
    )
    wait_for(
        functools.partial(_share, fair, "cohorts.kueue.x-k8s.io", "fs-pool", worker),
        until=functools.partial(operator.eq, {"weightedShare": 0}),
        timeout=30,
        what=f"{worker}'s Cohort fs-pool, a tree's top, to show a share of 0",
    )
    for (kind, name), share in expected.items():
        wait_for(
            functools.partial(_share, fair, kind, name),
            until=functools.partial(operator.eq, share),
            timeout=30,
            what=f"{kind} {name} to show status.fairSharing {share}",
        )
    fair.kubectl(MANAGER, "delete", "job", "fair-borrower", "--wait=false")
    for kind, name in expected:
        wait_for(
            functools.partial(_share, fair, kind, name),
            until=lambda shown: shown == {"weightedShare": 0},
            timeout=30,
            what=f"{kind} {name} to show a share of 0 once the quota is returned",
        )
