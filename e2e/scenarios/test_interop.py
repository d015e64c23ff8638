"""Interop with stock Kueue v0.19.1: kfed-manager dispatching to a worker that runs stock Kueue (marker ``interop``:
it needs Kueue built from its Go module, see ``e2e/toolchain/kueue.py``; ``make test-interop``).

- kfed-manager and a worker that runs stock Kueue, no kfed-agent, joined with only the permissions Kueue documents
  for the MultiKueue manager: probed through its ClusterQueue status, every Job runs there and completes;
- a mixed pair (one kfed-agent worker, one stock Kueue worker) behind one queue: both take Jobs.

Every Job completes with its status on the manager, and no copy is left on any worker. Kueue runs as local
processes on the rig as ``e2e/bench/stock_kueue.py`` starts them (no webhooks). The other way round (a stock Kueue
manager, kfed-agent workers) is in ``test_interop_stock_manager.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.bench.stock_kueue import NAMESPACE as KUEUE_NAMESPACE
from e2e.bench.stock_kueue import (
    install_kueue_crds,
    launch_kueue,
    suspended,
)
from e2e.interop import kueue_manager_kubeconfig, use_kubeconfig
from e2e.queues import job_manifest, named_queue_objects, queue_objects, routed_queue_objects
from e2e.rig.controllers import KFED_NAMESPACE, multikueue_objects
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION
from e2e.rig.nodes import NodeShape
from e2e.rig.processes import ProcessRecord, stop_records
from e2e.scenarios.helpers import condition, get, items, wait_complete
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.interop

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
KUEUE_LOG_LEVEL = "3"
"""Kueue's MultiKueue controllers say what they decide at V(2) and V(3)."""
PROBED = "probed through the worker's ClusterQueue status"
ONLY = "only"
"""A queue of its own on the manager, whose MultiKueueConfig lists only some of the workers."""


def _keep_logs(fed: Federation, name: str) -> None:
    """With KFED_KEEP_LOGS=DIR, the kfed and Kueue logs of the federation are copied to DIR/name at the end."""
    keep = os.environ.get("KFED_KEEP_LOGS")
    if keep:
        for part in ("logs", "kueue"):
            if (fed.directory / part).is_dir():
                shutil.copytree(fed.directory / part, Path(keep) / name / part, dirs_exist_ok=True)


def _dump_state(fed: Federation, name: str) -> None:
    """With KFED_KEEP_LOGS=DIR, every cluster's Workloads and Jobs as YAML, into DIR/state-name/."""
    keep = os.environ.get("KFED_KEEP_LOGS")
    if not keep:
        return
    directory = Path(keep) / f"state-{name}"
    directory.mkdir(parents=True, exist_ok=True)
    for cluster in fed.clusters:
        out = fed.kubectl(cluster, "get", "workloads.kueue.x-k8s.io,jobs.batch", "-A", "-o", "yaml", check=False)
        (directory / f"{cluster}.yaml").write_text(out.stdout + out.stderr)


def _apply(fed: Federation, cluster: str, objects: list[dict[str, Any]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _ready_for_a_stock_manager(fed: Federation, *, kueue_workers: list[str]) -> None:
    """The manager cluster set up for stock Kueue as its MultiKueue manager: kfed's Job admission policy unbound (Jobs
    for a stock manager carry managedBy and suspend themselves), Kueue's CRDs there and on ``kueue_workers``, and the
    MultiKueue objects with the kubeconfig Secrets in Kueue's namespace."""
    fed.kubectl(
        MANAGER, "delete", "mutatingadmissionpolicybinding", "kfed-queued-jobs-managed-by-multikueue", check=False
    )
    install_kueue_crds(fed, [MANAGER, *kueue_workers])
    kubeconfigs = {w: fed.kubeconfig(w).read_text() for w in fed.workers}
    objects = [o for o in multikueue_objects(fed.workers, kubeconfigs) if o["kind"] != "Namespace"]
    for obj in objects:
        if obj["kind"] == "Secret":
            obj["metadata"]["namespace"] = KUEUE_NAMESPACE
    _apply(fed, MANAGER, objects)


def _routed_queue(fed: Federation, workers: list[str], *, cpu: str, name: str = ONLY, manager_cpu: str = "64") -> None:
    """Manager ClusterQueue and LocalQueue ``name`` (``manager_cpu``) behind a MultiKueue check whose config lists
    ``workers``; on those workers, ``name`` queues of ``cpu`` each."""
    _apply(fed, MANAGER, routed_queue_objects(name, workers, cpu=manager_cpu))
    for worker in workers:
        _apply(fed, worker, named_queue_objects(name, cpu=cpu, manager=False))


def _queues(fed: Federation, *, worker_cpu: str) -> None:
    for worker in fed.workers:
        _apply(fed, worker, queue_objects(namespace="default", cpu=worker_cpu, memory="64Gi", manager=False))
    total = str(int(worker_cpu) * len(fed.workers))
    _apply(fed, MANAGER, queue_objects(namespace="default", cpu=total, memory="256Gi", manager=True))


def _left_on_workers(fed: Federation) -> dict[str, list[str]]:
    """Per worker, the MultiKueue copies (Workloads and Jobs with the origin label) still there."""
    found: dict[str, list[str]] = {}
    for worker in fed.workers:
        names = [
            f"{kind.split('.')[0]}/{obj['metadata']['name']}"
            for kind in ("workloads.kueue.x-k8s.io", "jobs.batch")
            for obj in items(fed, worker, kind, "-l", ORIGIN_LABEL)
        ]
        if names:
            found[worker] = names
    return found


def _manager_workload(fed: Federation, job: str) -> dict[str, Any] | None:
    for wl in items(fed, MANAGER, "workloads.kueue.x-k8s.io"):
        if any(ref.get("name") == job for ref in wl["metadata"].get("ownerReferences") or ()):
            return wl
    return None


def _run_jobs(
    fed: Federation, names: list[str], *, queue: str, cpu: str, stock_manager: bool, timeout: float = 120
) -> dict[str, str]:
    """Submit the Jobs, wait for each to complete on the manager; returns Job -> the worker it ran on."""
    manifests = [job_manifest(n, namespace="default", cpu=cpu, seconds=2, queue=queue) for n in names]
    if stock_manager:
        manifests = suspended(manifests)
    _apply(fed, MANAGER, manifests)
    ran_on: dict[str, str] = {}
    for name in names:
        try:
            job = wait_complete(fed, name, timeout=timeout)
        except AssertionError:
            _dump_state(fed, name)
            raise
        assert job["status"].get("succeeded") == 1, job["status"]
        wl = wait_for(
            lambda name=name: _manager_workload(fed, name),  # type: ignore[misc]
            until=lambda w: w is not None and condition(w, "Finished") is not None,
            timeout=30,
            what=f"the manager Workload of {name} to be Finished",
        )
        assert wl is not None
        ran_on[name] = str((wl.get("status") or {}).get("clusterName"))
    wait_for(
        lambda: _left_on_workers(fed),
        until=lambda left: left == {},
        timeout=60,
        what="every copy to be removed from the workers",
    )
    return ran_on


# -- kfed-manager and stock Kueue workers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kfed_manager_mixed() -> Iterator[Federation]:
    """kfed-manager; worker-1 runs kfed-agent, worker-2 stock Kueue (joined with Kueue's documented credential)."""
    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        node_shapes={"worker-1": NodeShape(count=2), "worker-2": NodeShape(count=2)},
        job_seconds=2,
        controllers=True,
        agents=("worker-1",),
    )
    records: list[ProcessRecord] = []
    with tempfile.TemporaryDirectory(prefix="kfed-interop-") as tmp, running(Path(tmp), bins, spec) as fed:
        try:
            install_kueue_crds(fed, ["worker-2"])
            _queues(fed, worker_cpu="16")
            _routed_queue(fed, ["worker-2"], cpu="16")
            records += launch_kueue(fed, ["worker-2"], log_level=KUEUE_LOG_LEVEL)
            use_kubeconfig(fed, "worker-2", kueue_manager_kubeconfig(fed, "worker-2"))
            # worker-2 is probed through its ClusterQueues with Kueue's credential, which may not read ClusterCapacity
            # (403). Before kfed-manager has reconnected with it, the rig's first credential can already say PROBED
            # ("none published"): wait for the refusal, not only for the probing.
            for worker, says in (("worker-1", ("Connected",)), ("worker-2", (PROBED, "403 Forbidden"))):
                wait_for(
                    lambda worker=worker: condition(  # type: ignore[misc]
                        get(fed, MANAGER, "multikueuecluster", worker, namespace=KFED_NAMESPACE), "Active"
                    ),
                    until=lambda c, says=says: (  # type: ignore[misc]
                        c is not None and c["status"] == "True" and all(s in str(c["message"]) for s in says)
                    ),
                    timeout=60,
                    what=f"{worker} Active on kfed-manager, saying {says!r}",
                )
            yield fed
        finally:
            stop_records(records)
            _keep_logs(fed, "kfed-manager-mixed")


def test_kfed_manager_dispatches_to_a_stock_kueue_worker(kfed_manager_mixed: Federation) -> None:
    fed = kfed_manager_mixed
    active = condition(get(fed, MANAGER, "multikueuecluster", "worker-2", namespace=KFED_NAMESPACE), "Active")
    assert active is not None
    assert PROBED in str(active["message"]), active
    assert "403 Forbidden" in str(active["message"]), active  # Kueue's role: no clustercapacities.kfed.io
    names = [f"to-kueue-{i}" for i in range(4)]
    ran_on = _run_jobs(fed, names, queue=ONLY, cpu="3", stock_manager=False)
    assert set(ran_on.values()) == {"worker-2"}, ran_on


def test_kfed_manager_dispatches_to_a_kfed_worker_and_a_stock_kueue_worker(kfed_manager_mixed: Federation) -> None:
    # 6-cpu Jobs on 16-cpu workers: two fit on each at a time, so both workers take some
    names = [f"mixed-{i}" for i in range(6)]
    ran_on = _run_jobs(fed := kfed_manager_mixed, names, queue="user-queue", cpu="6", stock_manager=False)
    assert set(ran_on.values()) == set(fed.workers), ran_on


def test_a_partially_admitted_job_runs_its_admitted_count_on_a_stock_kueue_worker(
    kfed_manager_mixed: Federation,
) -> None:
    """kfed-manager admits 3 of a 5-pod Job (min 2) and routes it to the stock Kueue worker, whose queue would take
    all 5: Kueue finds the copies equivalent, admits the 3 it is asked for and runs them."""
    fed = kfed_manager_mixed
    _routed_queue(fed, ["worker-2"], cpu="16", name="partial", manager_cpu="3")
    manifest = job_manifest("partial-kueue", namespace="default", cpu="1", parallelism=5, seconds=4, queue="partial")
    manifest["metadata"]["annotations"] = {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    manifest["spec"]["completionMode"] = "Indexed"
    _apply(fed, MANAGER, [manifest])
    started = wait_for(
        lambda: get(fed, "worker-2", "job", "partial-kueue"),
        until=lambda job: job is not None and job["spec"].get("suspend") is False,
        timeout=60,
        what="stock Kueue to start the Job copy on worker-2",
    )
    assert started is not None
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (3, 3)
    try:
        job = wait_complete(fed, "partial-kueue", timeout=120)
    except AssertionError:
        _dump_state(fed, "partial-kueue")
        raise
    assert job["status"].get("succeeded") == 3, job["status"]
    assert job["spec"]["parallelism"] == 3


def test_a_job_with_a_maximum_execution_time_runs_on_a_stock_kueue_worker(kfed_manager_mixed: Federation) -> None:
    """kfed-manager keeps the execution time clock and sends copies without the limit: a stock Kueue worker finds the
    Job copy and the Workload copy equivalent (one with the label and one without would be finished OutOfSync)."""
    fed = kfed_manager_mixed
    manifest = job_manifest("capped-kueue", namespace="default", cpu="1", seconds=2, queue=ONLY)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "300"
    _apply(fed, MANAGER, [manifest])
    try:
        job = wait_complete(fed, "capped-kueue", timeout=120)
    except AssertionError:
        _dump_state(fed, "capped-kueue")
        raise
    assert job["status"].get("succeeded") == 1, job["status"]
    workload = _manager_workload(fed, "capped-kueue")
    assert workload is not None
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 300
    assert (workload.get("status") or {}).get("clusterName") == "worker-2"


def test_a_job_that_fails_on_a_stock_kueue_worker_fails_on_the_manager_with_its_status(
    kfed_manager_mixed: Federation,
) -> None:
    """Its pods exit 1 with ``backoffLimit: 0``: the stock Kueue worker's Job controller fails the Job copy (Kueue
    there finishes its Workload copy); the manager Job fails with the same reason and counts, its Workload is
    ``Finished`` with reason ``Failed``, and the copies go."""
    fed = kfed_manager_mixed
    manifest = job_manifest("fails-on-kueue", namespace="default", cpu="1", seconds=2, queue=ONLY)
    manifest["spec"]["backoffLimit"] = 0
    manifest["spec"]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
    _apply(fed, MANAGER, [manifest])
    try:
        job = wait_for(
            lambda: get(fed, MANAGER, "job", "fails-on-kueue"),
            until=lambda j: j is not None and (condition(j, "Failed") or condition(j, "Complete")) is not None,
            timeout=120,
            what="fails-on-kueue to finish on the manager",
        )
    except AssertionError:
        _dump_state(fed, "fails-on-kueue")
        raise
    assert job is not None
    failed = condition(job, "Failed")
    assert failed is not None, job["status"]
    assert (failed["status"], failed["reason"]) == ("True", "BackoffLimitExceeded"), failed
    assert job["status"].get("failed") == 1, job["status"]
    workload = wait_for(
        lambda: _manager_workload(fed, "fails-on-kueue"),
        until=lambda w: w is not None and condition(w, "Finished") is not None,
        timeout=30,
        what="the manager Workload of fails-on-kueue to be Finished",
    )
    finished = condition(workload, "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Failed", failed["message"]), finished
    assert (workload or {}).get("status", {}).get("clusterName") == "worker-2"
    wait_for(
        lambda: _left_on_workers(fed),
        until=lambda left: left == {},
        timeout=60,
        what="every copy to be removed from the workers",
    )


def test_a_job_copy_scaled_on_a_stock_kueue_worker_is_sent_again_at_its_managers_size(
    kfed_manager_mixed: Federation,
) -> None:
    """Someone raises the parallelism of the running Job copy on the stock Kueue worker: Kueue there finishes the
    Workload copy as out of sync with its Job (``OutOfSync``) and suspends the Job copy for good. That is no end of
    the Job: kfed-manager takes the copy back and sends the Job again at its manager Job's size, as Kueue v0.20's
    manager does (before, the manager Job waited on the suspended copy forever)."""
    fed = kfed_manager_mixed
    manifest = job_manifest("scaled-on-kueue", namespace="default", cpu="1", seconds=6, queue=ONLY)
    manifest["spec"]["completions"] = 3  # one pod at a time, three in all
    _apply(fed, MANAGER, [manifest])
    wait_for(
        lambda: get(fed, "worker-2", "job", "scaled-on-kueue"),
        until=lambda job: job is not None and bool((job.get("status") or {}).get("active")),
        timeout=60,
        what="the Job copy running on the stock Kueue worker",
    )
    fed.kubectl("worker-2", "patch", "job", "scaled-on-kueue", "--type", "merge", "-p", '{"spec":{"parallelism":3}}')
    workload = _manager_workload(fed, "scaled-on-kueue")
    assert workload is not None
    try:
        wait_for(
            lambda: [
                e
                for e in items(fed, MANAGER, "events.events.k8s.io")
                if e.get("reason") == "EvictedDueToAdmissionCheck"
                and (e.get("regarding") or {}).get("name") == workload["metadata"]["name"]
            ],
            until=lambda found: any("finished out of sync with its Job copy (OutOfSync" in e["note"] for e in found),
            timeout=60,
            what="kfed-manager to take back the copy Kueue finished OutOfSync",
        )
        job = wait_complete(fed, "scaled-on-kueue", timeout=180)
    except AssertionError:
        _dump_state(fed, "scaled-on-kueue")
        raise
    assert (job["spec"]["parallelism"], job["status"].get("succeeded")) == (1, 3), job["status"]
    done = _manager_workload(fed, "scaled-on-kueue")
    assert done is not None
    assert done["metadata"]["uid"] == workload["metadata"]["uid"]
    finished = condition(done, "Finished")
    assert finished is not None
    assert finished["reason"] == "Succeeded", finished
    wait_for(
        lambda: _left_on_workers(fed),
        until=lambda left: left == {},
        timeout=60,
        what="every copy to be removed from the workers",
    )
