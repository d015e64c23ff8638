"""The rig gives real clusters: a v1.36 server, Ready kwok nodes with topology labels, Jobs that complete,
and the manager's admission policy that keeps queued Jobs suspended and managed by MultiKueue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL, NodeShape
from e2e.toolchain import ensure_built, pins

pytestmark = pytest.mark.integration


def test_servers_report_the_pinned_kubernetes_version(rig: Federation) -> None:
    for cluster in rig.clusters:
        version = json.loads(rig.kubectl(cluster, "version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"] == pins.KUBERNETES


def test_worker_nodes_are_ready_and_carry_topology_labels(rig: Federation) -> None:
    nodes = json.loads(rig.kubectl("worker-1", "get", "nodes", "-o", "json").stdout)["items"]
    assert len(nodes) == rig.spec.shape("worker-1").count
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert {BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL} <= labels.keys()
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"


def test_a_plain_job_runs_to_complete_on_a_worker(rig: Federation) -> None:
    rig.kubectl("worker-1", "create", "job", "rig-smoke", "--image=busybox", "--", "true")
    rig.kubectl("worker-1", "wait", "--for=condition=Complete", "job/rig-smoke", "--timeout=60s")
    pods = json.loads(rig.kubectl("worker-1", "get", "pods", "-l", "job-name=rig-smoke", "-o", "json").stdout)
    assert [p["status"]["phase"] for p in pods["items"]] == ["Succeeded"]
    assert pods["items"][0]["spec"]["nodeName"].startswith("worker-1-")


def test_manager_policy_suspends_only_queued_jobs(rig: Federation) -> None:
    rig.kubectl(MANAGER, "create", "job", "unqueued", "--image=busybox", "--", "true")
    queued = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "queued", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    rig.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(queued))
    jobs = {
        j["metadata"]["name"]: j["spec"]
        for j in json.loads(rig.kubectl(MANAGER, "get", "jobs", "-o", "json").stdout)["items"]
    }
    assert jobs["queued"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert jobs["queued"]["suspend"] is True
    assert "managedBy" not in jobs["unqueued"]
    assert jobs["unqueued"]["suspend"] is False
    rig.kubectl(MANAGER, "delete", "job", "unqueued", "queued", "--wait=false")


def test_light_workers_share_the_managers_etcd_and_still_see_only_their_own_objects(tmp_path: Path) -> None:
    spec = FederationSpec(workers=3, shared_etcd=True, default_shape=NodeShape(count=1))
    with running(tmp_path, ensure_built(), spec) as fed:
        etcds = [r.name for c in fed.clusters.values() for r in c.records if r.name.endswith("/etcd")]
        assert etcds == ["manager/etcd"]
        fed.kubectl("worker-1", "create", "configmap", "only-on-worker-1", "-n", "default")
        assert (
            fed.kubectl("worker-1", "get", "configmap", "only-on-worker-1", "-n", "default", check=False).returncode
            == 0
        )
        for other in ("manager", "worker-2", "worker-3"):
            found = fed.kubectl(other, "get", "configmap", "only-on-worker-1", "-n", "default", check=False)
            assert found.returncode != 0, f"{other} sees worker-1's object"
        fed.kubectl("worker-3", "create", "job", "light", "--image=busybox", "--", "true")
        fed.kubectl("worker-3", "wait", "--for=condition=Complete", "job/light", "--timeout=60s")
