import base64
from typing import Any

import pytest
import yaml

from federation.kube.kubeconfig import parse_validated_kubeconfig
from manager.join import (
    Endpoint,
    JoinError,
    choose_config,
    context_endpoint,
    join_objects,
    parse_duration,
    running_on,
    still_running_message,
    with_cluster,
    without_cluster,
    worker_kubeconfig,
)

CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()

OPERATOR = {
    "current-context": "manager",
    "clusters": [
        {"name": "m", "cluster": {"server": "https://m:6443", "certificate-authority-data": CA}},
        {"name": "w1", "cluster": {"server": "https://w1:6443", "certificate-authority": "ca/w1.crt"}},
        {"name": "w2", "cluster": {"server": "https://w2:6443", "insecure-skip-tls-verify": True}},
    ],
    "contexts": [
        {"name": "manager", "context": {"cluster": "m", "user": "admin"}},
        {"name": "worker-1", "context": {"cluster": "w1", "user": "admin"}},
        {"name": "worker-2", "context": {"cluster": "w2", "user": "admin"}},
    ],
    "users": [{"name": "admin", "user": {"exec": {"command": "sso-login"}}}],
}


def _no_file(path: str) -> bytes:
    raise AssertionError(f"read {path}")


def test_the_endpoint_is_the_contexts_server_and_ca() -> None:
    assert context_endpoint(OPERATOR, None, read_file=_no_file) == Endpoint("https://m:6443", CA)
    files = {"ca/w1.crt": b"PEM"}
    assert context_endpoint(OPERATOR, "worker-1", read_file=files.__getitem__) == Endpoint(
        "https://w1:6443", base64.b64encode(b"PEM").decode()
    )
    assert context_endpoint(OPERATOR, "worker-2", read_file=_no_file) == Endpoint("https://w2:6443", "")


def test_an_unknown_context_lists_the_known_ones() -> None:
    with pytest.raises(JoinError, match="manager, worker-1, worker-2"):
        context_endpoint(OPERATOR, "worker-3", read_file=_no_file)


def test_the_worker_kubeconfig_is_self_contained_and_accepted_by_the_manager() -> None:
    text = worker_kubeconfig("worker-1", Endpoint("https://w1:6443", CA), token="tok", user="worker-1-access")
    config = parse_validated_kubeconfig(text)  # the manager's own check
    assert config["users"] == [{"name": "worker-1-access", "user": {"token": "tok"}}]
    assert config["clusters"][0]["cluster"] == {"server": "https://w1:6443", "certificate-authority-data": CA}
    assert "exec" not in text
    assert "insecure" not in text


def test_no_ca_no_kubeconfig() -> None:
    with pytest.raises(JoinError, match="never skips TLS"):
        worker_kubeconfig("w", Endpoint("https://w:6443", ""), token="t", user="u")
    with pytest.raises(JoinError, match="refuse"):
        worker_kubeconfig("w", Endpoint("http://w:8080", CA), token="t", user="u")


def test_the_secret_holds_the_kubeconfig_under_kueues_key_and_the_cluster_names_it() -> None:
    secret, cluster = join_objects("worker-1", namespace="kfed-system", kubeconfig="KC")
    assert secret["metadata"] == {
        "name": "worker-1-kubeconfig",
        "namespace": "kfed-system",
        "labels": {"app.kubernetes.io/managed-by": "kubectl-kfed", "kfed.io/worker": "worker-1"},
    }
    assert base64.b64decode(secret["data"]["kubeconfig"]) == b"KC"
    assert cluster["metadata"]["name"] == "worker-1"
    assert cluster["spec"] == {
        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker-1-kubeconfig"}}
    }
    yaml.safe_dump(cluster)


def test_the_config_is_the_named_one_else_the_only_one_else_kfed() -> None:
    assert choose_config(["a", "b"], "b") == "b"
    assert choose_config(["mine"], None) == "mine"
    assert choose_config([], None) == "kfed"
    with pytest.raises(JoinError, match="--multikueue-config"):
        choose_config(["a", "b"], None)


def test_config_entries_are_added_and_removed_once() -> None:
    assert with_cluster(["a"], "b") == ["a", "b"]
    assert with_cluster(["a", "b"], "b") is None
    assert without_cluster(["a", "b"], "a") == ["b"]
    assert without_cluster(["a"], "b") is None
    assert without_cluster(["a"], "a") == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("8760h", 8760 * 3600), ("30m", 1800), ("1h30m", 5400), ("3600", 3600), ("900s", 900)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1d", "h", "10x", "5m", "1h 2m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|10 minutes"):
        parse_duration(text)


def test_running_on_names_the_unfinished_workloads_the_worker_holds() -> None:
    def wl(name: str, *conditions: str, cluster: str = "w1", nominated: list[str] | None = None) -> dict[str, Any]:
        status: dict[str, Any] = {
            "conditions": [{"type": c, "status": "True", "reason": c, "message": ""} for c in conditions]
        }
        if cluster:
            status["clusterName"] = cluster
        if nominated is not None:
            status["nominatedClusterNames"] = nominated
        return {"metadata": {"namespace": "ns", "name": name}, "status": status}

    workloads = [
        wl("b-running", "QuotaReserved", "Admitted"),
        wl("a-dispatched", "QuotaReserved", cluster="", nominated=["w1"]),
        wl("finished", "QuotaReserved", "Finished"),
        wl("elsewhere", "QuotaReserved", "Admitted", cluster="w2"),
        wl("pending", cluster=""),
    ]
    assert running_on(workloads, "w1") == ["ns/a-dispatched", "ns/b-running"]
    message = still_running_message("w1", [f"ns/j{i}" for i in range(7)])
    assert message.startswith("worker w1 still runs 7 workload(s): ns/j0, ns/j1, ns/j2, ns/j3, ns/j4 and 2 more.")
    assert "--wait SECONDS" in message
    assert "--force" in message
