"""`kubectl kfed` against the rig, the way an operator uses it: one kubeconfig with a context per cluster, the
manager's as current; create queues, hold them, read pending positions, stop and resume, follow a Job to its
worker (describe, pods), all in tables that fit 80 columns or in -o json/yaml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from e2e.queues import FLAVOR, LOCAL_QUEUE
from e2e.rig.controllers import ADMISSION_CHECK, MULTIKUEUE_CONFIG
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, submit, worker_of, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

CQ, LQ = "cli-cq", "cli-lq"
OUTPUT = Path(os.environ.get("KFED_TEST_OUTPUT", Path(__file__).resolve().parents[2] / ".test-output"))
SESSION = OUTPUT / "kubectl-kfed-session.txt"


def _merged_kubeconfig(fed: Federation, path: Path) -> Path:
    merged: dict[str, object] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for cluster in (MANAGER, *fed.workers):
        config = yaml.safe_load(fed.kubeconfig(cluster).read_text())
        for key in ("clusters", "users", "contexts"):
            merged[key] += config[key]
    merged["current-context"] = MANAGER
    path.write_text(yaml.safe_dump(merged))
    return path


def _kfed(config: Path, *args: str, check: bool = True) -> str:
    plugin = str(Path(sys.executable).parent / "kubectl-kfed")
    result = subprocess.run(
        [plugin, "--kubeconfig", str(config), *args], capture_output=True, text=True, timeout=60, check=False
    )
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with SESSION.open("a") as session:  # a sample session, kept with the test's output
        session.write(f"$ kubectl kfed {' '.join(args)}\n{result.stdout}{result.stderr}\n")
    if check:
        assert result.returncode == 0, f"kubectl kfed {' '.join(args)}: {result.stderr}"
    return result.stdout


def _rows(table: str) -> list[list[str]]:
    lines = table.splitlines()
    assert all(len(line) <= 80 for line in lines), "a table is wider than 80 columns:\n" + table
    return [line.split() for line in lines[1:]]


def test_queues_positions_stop_resume(federation: Federation, tmp_path: Path) -> None:
    fed = federation
    config = _merged_kubeconfig(fed, tmp_path / "kubeconfig")
    out = _kfed(
        config,
        "create",
        "cq",
        CQ,
        "--nominal-quota",
        f"{FLAVOR}:cpu=4;memory=8Gi",
        "--admission-check",
        ADMISSION_CHECK,
    )
    assert out.strip() == f"clusterqueue.kueue.x-k8s.io/{CQ} created"
    try:
        _kfed(config, "create", "lq", LQ, "-c", CQ)
        _kfed(config, "create", "lq", "cli-typo", "-c", f"{CQ}-typo", check=False)  # refused, as kueuectl does
        assert get(fed, MANAGER, "localqueue", "cli-typo") is None
        rf = yaml.safe_load(
            _kfed(config, "create", "rf", "cli-rf", "--node-labels", "tier=spot", "--dry-run=client", "-o", "yaml")
        )
        assert (rf["kind"], rf["spec"]["nodeLabels"]) == ("ResourceFlavor", {"tier": "spot"})
        cq = get(fed, MANAGER, "clusterqueue", CQ)
        assert cq is not None
        assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "4"}
        assert _kfed(config, "stop", "clusterqueue", CQ).strip() == f"clusterqueue.kueue.x-k8s.io/{CQ} stopped"
        assert (get(fed, MANAGER, "clusterqueue", CQ) or {})["spec"]["stopPolicy"] == "HoldAndDrain"
        submit(fed, "cli-first", cpu="1", seconds=1, queue=LQ)
        submit(fed, "cli-second", cpu="1", seconds=1, queue=LQ)
        table = wait_for(
            lambda: _kfed(config, "pending", "-c", CQ),
            until=lambda t: len(_rows(t)) == 2 and "not tried yet" not in t,
            timeout=30,
            what="both Jobs pending in the stopped ClusterQueue, with why",
        )
        rows = _rows(table)
        assert table.splitlines()[0].split()[:5] == ["CLUSTERQUEUE", "POS", "LQ-POS", "NAMESPACE", "NAME"]
        assert [(r[1], r[2], r[4].split("-")[2]) for r in rows] == [("0", "0", "first"), ("1", "1", "second")]
        listed = _rows(_kfed(config, "workloads", "--clusterqueue", CQ, "--status", "pending"))
        assert len(listed) == 2
        assert all(r[1] == LQ and r[2] == "Pending" for r in listed)
        wide = _kfed(config, "list", "workloads", "-q", LQ, "-o", "wide")
        assert wide.splitlines()[0].split()[:8] == [
            "NAME",
            "QUEUE",
            "STATE",
            "WORKER",
            "CLUSTERQUEUE",
            "POSITION",
            "PRIORITY",
            "JOB",
        ]
        as_json = json.loads(_kfed(config, "list", "workloads", "-q", LQ, "-o", "json"))
        assert as_json["kind"] == "List"
        assert len(as_json["items"]) == 2
        cqs = wait_for(
            lambda: {r[0]: r for r in _rows(_kfed(config, "list", "clusterqueues"))},
            until=lambda rows: rows[CQ][2] == "2",
            timeout=30,
            what="the ClusterQueue's status to count both pending workloads",
        )
        assert cqs[CQ][4:6] == ["False", "HoldAndDrain"]  # ACTIVE, STOP

        first = workload_of(fed, "cli-first")
        assert first is not None
        name = first["metadata"]["name"]
        _kfed(config, "stop", "workload", name)
        wait_for(
            lambda: _rows(_kfed(config, "workloads", "-q", LQ, "--status", "deactivated")),
            until=lambda rows: [r[0] for r in rows] == [name],
            timeout=30,
            what="the stopped workload to show as Deactivated",
        )
        _kfed(config, "resume", "workload", name)
        assert (workload_of(fed, "cli-first") or {})["spec"].get("active") is True
        _kfed(config, "resume", "clusterqueue", CQ)
        assert (get(fed, MANAGER, "clusterqueue", CQ) or {})["spec"]["stopPolicy"] == "None"
    finally:
        fed.kubectl(MANAGER, "delete", "job", "cli-first", "cli-second", "--ignore-not-found", "--wait=false")
        fed.kubectl(MANAGER, "delete", "localqueue", LQ, "--ignore-not-found", "--wait=false")
        fed.kubectl(MANAGER, "delete", "clusterqueue", CQ, "--ignore-not-found", "--wait=false")


def test_describe_and_pods_follow_a_job_to_its_worker(federation: Federation, tmp_path: Path) -> None:
    fed = federation
    config = _merged_kubeconfig(fed, tmp_path / "kubeconfig")
    submit(fed, "cli-follow", cpu="1", parallelism=2, seconds=20)
    try:
        worker = wait_for(
            lambda: worker_of(fed, "cli-follow"), until=bool, timeout=60, what="cli-follow to run on a worker"
        )
        pods = wait_for(
            lambda: _rows(_kfed(config, "pods", "--for", "job/cli-follow")),
            until=lambda rows: len(rows) == 2,
            timeout=60,
            what="the Job's two pods on its worker",
        )
        assert all(r[0].startswith("cli-follow-") and r[5] == worker for r in pods)
        listed = _rows(_kfed(config, "workloads", "--worker", str(worker), "-q", LOCAL_QUEUE))
        assert any(r[3] == worker for r in listed)
        text = wait_for(
            lambda: _kfed(config, "describe", "job", "cli-follow"),
            until=lambda t: any(str(worker) in line and "SuccessfulCreate" in line for line in t.splitlines()),
            timeout=60,
            what="describe to show the worker's events (its Job controller created the pods)",
        )
        assert f"Worker:       {worker}" in text
        assert f"Conditions (Workload copy on {worker}):" in text
        assert f"Pods (on {worker}):" in text
        assert "QuotaReserved" in text  # the manager Workload's conditions and events
        assert "  manager " in text  # an event recorded on the manager side
        assert all(len(line) <= 80 for line in text.splitlines()), text
    finally:
        fed.kubectl(MANAGER, "delete", "job", "cli-follow", "--ignore-not-found", "--wait=false")


def test_describe_a_job_that_waits_says_why(federation: Federation, tmp_path: Path) -> None:
    config = _merged_kubeconfig(federation, tmp_path / "kubeconfig")
    submit(federation, "cli-huge", cpu="500", seconds=1)
    try:
        text = wait_for(
            lambda: _kfed(config, "describe", "job/cli-huge"),
            until=lambda t: "Message:" in t,
            timeout=30,
            what="describe to say why the Job waits",
        )
        assert "(Pending)" in text
        assert "Worker:       -" in text
    finally:
        federation.kubectl(MANAGER, "delete", "job", "cli-huge", "--ignore-not-found", "--wait=false")


def test_remove_worker_keeps_a_worker_whose_jobs_still_run(federation: Federation, tmp_path: Path) -> None:
    """`remove-worker` takes the worker out of the MultiKueueConfig, but while a Job still runs there it keeps the
    MultiKueueCluster and Secret (kfed must see the Job end and delete its copies) and says which Job; the Job ends
    with its status on the manager."""
    fed = federation
    config = _merged_kubeconfig(fed, tmp_path / "kubeconfig")
    clusters = get(fed, MANAGER, "multikueueconfig.kueue.x-k8s.io", MULTIKUEUE_CONFIG, namespace="")
    assert clusters is not None
    listed = list(clusters["spec"]["clusters"])
    submit(fed, "cli-drain", cpu="1", seconds=25)
    try:
        worker = wait_for(lambda: worker_of(fed, "cli-drain"), until=bool, timeout=60, what="cli-drain dispatched")
        workload = workload_of(fed, "cli-drain")
        assert workload is not None
        plugin = str(Path(sys.executable).parent / "kubectl-kfed")
        removed = subprocess.run(
            [plugin, "--kubeconfig", str(config), "remove-worker", str(worker), "--wait", "1"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert removed.returncode == 1, removed.stdout + removed.stderr
        name = workload["metadata"]["name"]
        assert f"worker {worker} still runs 1 workload(s): default/{name}." in removed.stderr
        assert f"waiting for 1 workload(s) on {worker} to finish" in removed.stdout
        after = get(fed, MANAGER, "multikueueconfig.kueue.x-k8s.io", MULTIKUEUE_CONFIG, namespace="")
        assert after is not None
        assert worker not in after["spec"]["clusters"], "out of the config: it gets no new Jobs"
        assert get(fed, MANAGER, "multikueuecluster.kueue.x-k8s.io", str(worker), namespace="") is not None
        assert get(fed, MANAGER, "secret", f"{worker}-kubeconfig", namespace="kfed-system") is not None
        job = wait_for(
            lambda: get(fed, MANAGER, "job", "cli-drain"),
            until=lambda j: any(
                c["type"] in ("Complete", "Failed") and c["status"] == "True"
                for c in ((j or {}).get("status") or {}).get("conditions", [])
            ),
            timeout=90,
            what="cli-drain to finish on the worker taken out of the config",
        )
        assert job is not None
        assert job["status"].get("succeeded") == 1, job["status"]
    finally:
        patch = json.dumps({"spec": {"clusters": listed}})
        fed.kubectl(MANAGER, "patch", "multikueueconfig.kueue.x-k8s.io", MULTIKUEUE_CONFIG, "--type=merge", "-p", patch)
        fed.kubectl(MANAGER, "delete", "job", "cli-drain", "--ignore-not-found", "--wait=false")
