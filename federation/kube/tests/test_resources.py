from __future__ import annotations

import pytest

from federation.kube import resources as r


def test_core_and_group_paths() -> None:
    assert r.PODS.path(namespace="ns") == "/api/v1/namespaces/ns/pods"
    assert r.PODS.path() == "/api/v1/pods"
    assert r.NODES.path(name="n1") == "/api/v1/nodes/n1"
    assert r.JOBS.path(namespace="a", name="j", subresource="status") == "/apis/batch/v1/namespaces/a/jobs/j/status"
    assert r.CLUSTER_QUEUES.path(name="cq") == "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"
    assert r.CLUSTER_CAPACITIES.path() == "/apis/kfed.io/v1alpha1/clustercapacities"


def test_api_version_and_label() -> None:
    assert r.PODS.api_version == "v1"
    assert r.WORKLOADS.api_version == "kueue.x-k8s.io/v1beta2"
    assert r.JOBS.label == "jobs.batch"
    assert r.PODS.label == "pods"


def test_names_are_escaped() -> None:
    assert r.SECRETS.path(namespace="ns", name="a/b") == "/api/v1/namespaces/ns/secrets/a%2Fb"


def test_scope_errors() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        r.PODS.path(name="p")
    with pytest.raises(ValueError, match="cluster-scoped"):
        r.NODES.path(namespace="ns")
    with pytest.raises(ValueError, match="subresource"):
        r.JOBS.path(namespace="ns", subresource="status")
    with pytest.raises(ValueError, match="empty"):
        r.NODES.path(name="")


def test_kueue_kinds_are_v1beta2() -> None:
    assert len(r.KUEUE_RESOURCES) == 10
    assert {res.version for res in r.KUEUE_RESOURCES} == {"v1beta2"}
    assert [res.kind for res in r.KUEUE_RESOURCES if res.namespaced] == ["Workload", "LocalQueue"]
