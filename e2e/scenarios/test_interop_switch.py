"""Moving from stock Kueue v0.19.1 MultiKueue to kfed one cluster at a time, while Jobs run (marker ``interop``,
``make test-interop``).

- A worker: kfed-manager dispatches to a worker that runs stock Kueue; Kueue there is stopped and kfed-agent started
  in its place. The copy Kueue admitted finishes where it runs, once, with its status on the manager; a Job someone
  queued on that worker itself under Kueue finishes too, and Kueue's finalizer is lifted from its Workload; a Job
  sent after the switch runs through kfed-agent.
- The manager, once the workers run kfed-agent: stock Kueue manages the manager cluster and has dispatched a long
  Job to a kfed-agent worker; Kueue is stopped and kfed-manager started in its place, with the same queues and
  MultiKueue objects. The running Job finishes where it runs, once, with its status on the manager; a Job Kueue kept
  pending (its LocalQueue held) runs through kfed once the queue is let go, as does a Job submitted after the
  switch.

No copy is left on any worker after either.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.bench.stock_kueue import _wait_active, install_kueue_crds, launch_kueue, suspended
from e2e.queues import job_manifest
from e2e.rig.controllers import start_agent, start_manager
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.rig.processes import ProcessRecord, stop_records
from e2e.scenarios.helpers import condition, get, is_true, items, wait_complete
from e2e.scenarios.test_interop import (
    KUEUE_LOG_LEVEL,
    _apply,
    _keep_logs,
    _left_on_workers,
    _manager_workload,
    _queues,
    _ready_for_a_stock_manager,
    _routed_queue,
)
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.interop

WORKERS = ("worker-1", "worker-2")
SECOND = "second"
"""On the manager, a queue whose MultiKueueConfig lists only worker-2."""
FINALIZER = "kueue.x-k8s.io/resource-in-use"
HELD = "held"
"""A queue whose LocalQueue is held (stopPolicy Hold) while Kueue manages the manager cluster."""
HOLD = '{"spec": {"stopPolicy": "Hold"}}'
RUN = '{"spec": {"stopPolicy": "None"}}'


@pytest.fixture(scope="module")
def switching() -> Iterator[tuple[Federation, list[ProcessRecord]]]:
    """Stock Kueue as the MultiKueue manager, both workers running kfed-agent; the records of Kueue's process."""
    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        node_shapes={w: NodeShape(count=2) for w in WORKERS},
        job_seconds=2,
        controllers=True,
        kfed_manager=False,
        agents=WORKERS,
    )
    records: list[ProcessRecord] = []
    with tempfile.TemporaryDirectory(prefix="kfed-switch-") as tmp, running(Path(tmp), bins, spec) as fed:
        try:
            _ready_for_a_stock_manager(fed, kueue_workers=[])
            _queues(fed, worker_cpu="16")
            _routed_queue(fed, list(WORKERS), cpu="16", name=HELD)
            records += launch_kueue(fed, [MANAGER], log_level=KUEUE_LOG_LEVEL)
            _wait_active(fed)
            yield fed, records
        finally:
            stop_records(records)
            _keep_logs(fed, "manager-switch")


def _remote_jobs(fed: Federation, name: str) -> dict[str, str]:
    """Worker → uid of the Job copy named ``name`` there."""
    return {w: str(j["metadata"]["uid"]) for w in fed.workers if (j := get(fed, w, "job", name)) is not None}


def _finishes_once_where_it_ran(fed: Federation, name: str, *, ran_on: str, uid: str) -> None:
    """The manager Job ``name`` completes, and at every look until then its only Job copy was the one it ran as
    before the switch (``uid`` on ``ran_on``): never replaced, never on another worker."""
    seen: list[dict[str, str]] = []

    def manager_job() -> dict[str, Any] | None:
        seen.append(_remote_jobs(fed, name))
        return get(fed, MANAGER, "job", name)

    job = wait_for(
        manager_job,
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=120,
        what=f"Job {name}, running through the switch, to finish on the manager",
    )
    assert job is not None
    assert is_true(job, "Complete"), job.get("status")
    assert job["status"].get("succeeded") == 1, job["status"]
    assert [s for s in seen if s and s != {ran_on: uid}] == [], "the running copy was never replaced"


def test_a_job_running_when_the_manager_switches_from_kueue_to_kfed_finishes_once_and_new_jobs_run(
    switching: tuple[Federation, list[ProcessRecord]],
) -> None:
    fed, kueue = switching
    _apply(fed, MANAGER, suspended([job_manifest("before-switch", namespace="default", cpu="2", seconds=40)]))
    copies = wait_for(
        lambda: _remote_jobs(fed, "before-switch"),
        until=lambda found: len(found) == 1,
        timeout=60,
        what="stock Kueue dispatching the Job to a kfed-agent worker",
    )
    ((ran_on, first_uid),) = copies.items()
    fed.kubectl(MANAGER, "patch", "localqueue", HELD, "-n", "default", "--type=merge", "-p", HOLD)
    _apply(fed, MANAGER, suspended([job_manifest("queued-at-switch", namespace="default", cpu="1", queue=HELD)]))
    wait_for(
        lambda: _manager_workload(fed, "queued-at-switch"),
        until=lambda wl: wl is not None and (condition(wl, "QuotaReserved") or {}).get("status") == "False",
        timeout=30,
        what="stock Kueue keeping the Job of the held queue pending",
    )
    # Kueue's AllAtOnce dispatcher copies a Workload to every worker; held there, none admits it before the switch
    for worker in WORKERS:
        fed.kubectl(worker, "patch", "localqueue", "user-queue", "-n", "default", "--type=merge", "-p", HOLD)
    _apply(fed, MANAGER, suspended([job_manifest("spread-at-switch", namespace="default", cpu="1", seconds=2)]))
    wait_for(
        lambda: [
            w
            for w in WORKERS
            if any(o["metadata"]["name"].startswith("job-spread-at-switch-") for o in items(fed, w, "workloads"))
        ],
        until=lambda found: len(found) == len(WORKERS),
        timeout=30,
        what="stock Kueue copying the Workload to every worker",
    )
    stop_records(kueue)
    kueue.clear()
    start_manager(fed)
    for worker in WORKERS:
        fed.kubectl(worker, "patch", "localqueue", "user-queue", "-n", "default", "--type=merge", "-p", RUN)
    _apply(fed, MANAGER, suspended([job_manifest("after-switch", namespace="default", cpu="2", seconds=2)]))
    _finishes_once_where_it_ran(fed, "before-switch", ran_on=ran_on, uid=first_uid)
    assert wait_complete(fed, "after-switch", timeout=60)["status"].get("succeeded") == 1
    fed.kubectl(MANAGER, "patch", "localqueue", HELD, "-n", "default", "--type=merge", "-p", RUN)
    spread = wait_complete(fed, "spread-at-switch", timeout=90)
    assert spread["status"].get("succeeded") == 1, spread["status"]
    assert wait_complete(fed, "queued-at-switch", timeout=60)["status"].get("succeeded") == 1
    wait_for(
        lambda: _left_on_workers(fed),
        until=lambda left: left == {},
        timeout=90,
        what="every copy removed from the workers",
    )
    terminating = [
        w["metadata"]["name"] for w in items(fed, MANAGER, "workloads") if w["metadata"].get("deletionTimestamp")
    ]
    assert terminating == []


@pytest.fixture(scope="module")
def kueue_worker() -> Iterator[tuple[Federation, list[ProcessRecord]]]:
    """kfed-manager; worker-1 runs kfed-agent, worker-2 stock Kueue; the records of Kueue's process."""
    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        node_shapes={w: NodeShape(count=2) for w in WORKERS},
        job_seconds=2,
        controllers=True,
        agents=("worker-1",),
    )
    records: list[ProcessRecord] = []
    with tempfile.TemporaryDirectory(prefix="kfed-switch-") as tmp, running(Path(tmp), bins, spec) as fed:
        try:
            install_kueue_crds(fed, ["worker-2"])
            _queues(fed, worker_cpu="16")
            _routed_queue(fed, ["worker-2"], cpu="16", name=SECOND)
            records += launch_kueue(fed, ["worker-2"], log_level=KUEUE_LOG_LEVEL)
            yield fed, records
        finally:
            stop_records(records)
            _keep_logs(fed, "worker-switch")


def test_jobs_running_when_a_worker_switches_from_kueue_to_kfed_agent_finish_once_and_new_ones_run(
    kueue_worker: tuple[Federation, list[ProcessRecord]],
) -> None:
    fed, kueue = kueue_worker
    _apply(fed, MANAGER, [job_manifest("sent-before", namespace="default", cpu="2", seconds=40, queue=SECOND)])
    copies = wait_for(
        lambda: _remote_jobs(fed, "sent-before"),
        until=lambda found: set(found) == {"worker-2"},
        timeout=60,
        what="kfed-manager dispatching the Job to the stock Kueue worker",
    )
    first_uid = copies["worker-2"]
    local = job_manifest("queued-there", namespace="default", cpu="1", seconds=30)
    fed.kubectl("worker-2", "create", "-f", "-", input=json.dumps(local))
    local_workload = wait_for(
        lambda: next(
            (w for w in items(fed, "worker-2", "workloads") if w["metadata"]["name"].startswith("job-queued-there-")),
            None,
        ),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what="stock Kueue admitting the Job queued on the worker itself",
    )
    assert local_workload is not None
    assert FINALIZER in local_workload["metadata"].get("finalizers", ()), "Kueue made it with its finalizer"
    wait_for(
        lambda: get(fed, "worker-2", "job", "sent-before"),
        until=lambda j: j is not None and int((j.get("status") or {}).get("active") or 0) > 0,
        timeout=60,
        what="the copy running on the stock Kueue worker",
    )
    stop_records(kueue)
    kueue.clear()
    start_agent(fed, "worker-2")
    _finishes_once_where_it_ran(fed, "sent-before", ran_on="worker-2", uid=first_uid)
    ended = wait_for(
        lambda: get(fed, "worker-2", "workload", local_workload["metadata"]["name"]),
        until=lambda wl: is_true(wl, "Finished") and FINALIZER not in (wl or {})["metadata"].get("finalizers", ()),
        timeout=60,
        what="the worker-queued Job's Workload finished by kfed-agent, Kueue's finalizer lifted",
    )
    assert ended is not None
    assert ended["metadata"]["uid"] == local_workload["metadata"]["uid"], "the same Workload, not a new one"
    _apply(fed, MANAGER, [job_manifest("sent-after", namespace="default", cpu="2", seconds=2, queue=SECOND)])
    assert wait_complete(fed, "sent-after", timeout=60)["status"].get("succeeded") == 1
    wait_for(
        lambda: _left_on_workers(fed),
        until=lambda left: left == {},
        timeout=90,
        what="every copy removed from the workers",
    )
