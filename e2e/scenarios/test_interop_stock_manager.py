"""Interop with stock Kueue v0.19.1, the other way: a stock Kueue MultiKueue manager dispatching to kfed-agent workers
(marker ``interop``, ``make test-interop``).

Kueue's AllAtOnce dispatcher puts a copy of the Workload on every worker of the config; the first to reserve quota
wins, the other copies are deleted, and only then is the Job created on the winner, naming its Workload in the
``kueue.x-k8s.io/prebuilt-workload-name`` annotation (Kueue v0.18+, WorkloadIdentifierAnnotations), not the label.
The agent behaves as Kueue on a worker for that protocol. Two kfed-agent workers behind one queue, and a mixed trio
(two kfed-agent workers and one stock Kueue worker) behind another: every Job completes with its status on the
manager, and no copy is left on any worker.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.bench.stock_kueue import _wait_active, launch_kueue, suspended
from e2e.queues import job_manifest
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.rig.processes import ProcessRecord, stop_records
from e2e.scenarios.helpers import items
from e2e.scenarios.test_interop import (
    KUEUE_LOG_LEVEL,
    ONLY,
    _apply,
    _keep_logs,
    _queues,
    _ready_for_a_stock_manager,
    _routed_queue,
    _run_jobs,
)
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.interop

PODS_READY_TIMEOUT = 20
"""The kfed-agent workers' waitForPodsReady timeout (healthy Jobs are ready within a second or two)."""


@pytest.fixture(scope="module")
def stock_manager_mixed() -> Iterator[Federation]:
    """Stock Kueue as the MultiKueue manager; worker-1 and worker-2 run kfed-agent, worker-3 stock Kueue."""
    bins = ensure_built()
    spec = FederationSpec(
        workers=3,
        node_shapes={w: NodeShape(count=2) for w in ("worker-1", "worker-2", "worker-3")},
        job_seconds=2,
        controllers=True,
        kfed_manager=False,
        agents=("worker-1", "worker-2"),
        # Kueue's waitForPodsReady on the kfed-agent workers, as a Kueue worker configured so would apply it to copies
        agent_args=("--wait-for-pods-ready-timeout", str(PODS_READY_TIMEOUT)),
    )
    records: list[ProcessRecord] = []
    with tempfile.TemporaryDirectory(prefix="kfed-interop-") as tmp, running(Path(tmp), bins, spec) as fed:
        try:
            _ready_for_a_stock_manager(fed, kueue_workers=["worker-3"])
            _queues(fed, worker_cpu="16")
            _routed_queue(fed, ["worker-1", "worker-2"], cpu="16")
            records += launch_kueue(fed, [MANAGER, "worker-3"], log_level=KUEUE_LOG_LEVEL)
            _wait_active(fed)
            yield fed
        finally:
            stop_records(records)
            _keep_logs(fed, "stock-manager-mixed")


def test_a_stock_kueue_manager_dispatches_to_kfed_agents(stock_manager_mixed: Federation) -> None:
    names = [f"from-kueue-{i}" for i in range(4)]
    ran_on = _run_jobs(stock_manager_mixed, names, queue=ONLY, cpu="3", stock_manager=True)
    assert set(ran_on.values()) <= {"worker-1", "worker-2"}, ran_on


def test_a_stock_kueue_manager_dispatches_to_kfed_and_kueue_workers(stock_manager_mixed: Federation) -> None:
    # 6-cpu Jobs on 16-cpu workers: two fit on each at a time, so at least two workers take some
    names = [f"kueue-mixed-{i}" for i in range(6)]
    ran_on = _run_jobs(stock_manager_mixed, names, queue="user-queue", cpu="6", stock_manager=True)
    assert len(set(ran_on.values())) >= 2, ran_on


def test_a_stock_managers_copy_whose_pods_never_get_ready_is_evicted_by_the_kfed_agent(
    stock_manager_mixed: Federation,
) -> None:
    """The worker's waitForPodsReady applies to a stock MultiKueue manager's copies, as Kueue on that worker would
    apply it: a copy whose pods cannot be scheduled is evicted there with ``PodsReadyTimeout`` (its Event says so),
    which the stock manager sees as the worker's eviction."""
    manifest = job_manifest("never-ready", namespace="default", cpu="1", seconds=2, queue=ONLY)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    _apply(stock_manager_mixed, MANAGER, suspended([manifest]))

    def evictions() -> list[dict[str, object]]:
        return [
            event
            for worker in ("worker-1", "worker-2")
            for event in items(
                stock_manager_mixed, worker, "events", "--field-selector", "reason=EvictedDueToPodsReadyTimeout"
            )
            if str((event.get("involvedObject") or {}).get("name", "")).startswith("job-never-ready-")
        ]

    try:
        found = wait_for(
            evictions,
            until=bool,
            timeout=PODS_READY_TIMEOUT + 60,
            what="the kfed-agent worker evicting the never-ready copy for its pods",
        )
        assert str(found[0]["message"]).startswith("Exceeded the PodsReady timeout default/job-never-ready-"), found
    finally:
        stock_manager_mixed.kubectl(MANAGER, "delete", "job", "never-ready", "--wait=false", check=False)
