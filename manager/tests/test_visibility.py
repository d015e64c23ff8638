"""Kueue's visibility API answers: routes, positions, windows, errors, the front proxy's user and the access review."""

from __future__ import annotations

from typing import Any

from federation.tests.api_builders import admitted_status, cluster_queue, local_queue, workload
from manager.decisions.visibility import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    FrontProxy,
    PendingRequest,
    Reply,
    User,
    access_review,
    api_resources,
    forbidden,
    front_proxy_user,
    pending_summary,
    route,
)

BASE = "/apis/visibility.kueue.x-k8s.io/v1beta2"
CQS = [cluster_queue("cq", {"default": {"cpu": 4}}), cluster_queue("idle", {"default": {"cpu": 4}})]
LQS = [local_queue("team-a", "lq", "cq"), local_queue("team-b", "lq", "cq"), local_queue("team-b", "other", "idle")]


def _workloads() -> list[dict[str, Any]]:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1", "controller": True}
    early = workload("early", namespace="team-a", created="2026-11-24T10:00:00Z")
    early["metadata"]["ownerReferences"] = [owner]
    return [
        early,
        workload("urgent", namespace="team-b", priority=100, created="2026-11-24T11:00:00Z"),
        workload("late", namespace="team-a", created="2026-11-24T12:00:00Z"),
        workload("b-late", namespace="team-b", created="2026-11-24T12:30:00Z"),
        workload("running", namespace="team-a", status=admitted_status("cq", "default", "1")),
        workload("elsewhere", namespace="team-b", queue="other"),
    ]


def _summary(path: str) -> Reply:
    request = route("GET", path)
    assert isinstance(request, PendingRequest)
    return pending_summary(request, workloads=_workloads(), local_queues=LQS, cluster_queues=CQS)


def _rows(reply: Reply) -> list[tuple[str, str, int, int]]:
    return [
        (i["metadata"]["namespace"], i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
        for i in reply.body["items"]
    ]


def test_a_cluster_queue_lists_its_pending_workloads_by_priority_then_queue_time() -> None:
    reply = _summary(f"{BASE}/clusterqueues/cq/pendingworkloads")
    assert reply.code == 200
    assert reply.body["kind"] == "PendingWorkloadsSummary"
    assert reply.body["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert _rows(reply) == [
        ("team-b", "urgent", 0, 0),
        ("team-a", "early", 1, 0),
        ("team-a", "late", 2, 1),
        ("team-b", "b-late", 3, 1),
    ]
    first = reply.body["items"][1]
    assert first["priority"] == 0
    assert first["localQueueName"] == "lq"
    assert first["metadata"]["creationTimestamp"] == "2026-11-24T10:00:00Z"
    assert first["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1"}
    ]


def test_a_local_queue_lists_only_its_own_workloads_with_both_positions() -> None:
    reply = _summary(f"{BASE}/namespaces/team-a/localqueues/lq/pendingworkloads")
    assert _rows(reply) == [("team-a", "early", 1, 0), ("team-a", "late", 2, 1)]


def test_limit_and_offset_window_the_list_and_keep_positions() -> None:
    assert _rows(_summary(f"{BASE}/clusterqueues/cq/pendingworkloads?limit=2&offset=1")) == [
        ("team-a", "early", 1, 0),
        ("team-a", "late", 2, 1),
    ]
    assert _rows(_summary(f"{BASE}/namespaces/team-a/localqueues/lq/pendingworkloads?offset=1")) == [
        ("team-a", "late", 2, 1)
    ]
    assert _summary(f"{BASE}/clusterqueues/cq/pendingworkloads?limit=0").body["items"] == []


def test_limits_are_bounded_as_in_kueue() -> None:
    assert route("GET", f"{BASE}/clusterqueues/cq/pendingworkloads") == PendingRequest(
        "clusterqueues", "cq", "", DEFAULT_LIMIT, 0
    )
    bounded = route("GET", f"{BASE}/clusterqueues/cq/pendingworkloads?limit=999999999&offset=-5")
    assert bounded == PendingRequest("clusterqueues", "cq", "", MAX_LIMIT, 0)
    bad = route("GET", f"{BASE}/clusterqueues/cq/pendingworkloads?limit=ten")
    assert isinstance(bad, Reply)
    assert bad.code == 400
    assert bad.body["reason"] == "BadRequest"


def test_an_empty_queue_answers_an_empty_list_and_a_missing_one_not_found() -> None:
    assert _summary(f"{BASE}/clusterqueues/idle/pendingworkloads").body["items"] == [
        {
            "metadata": {"name": "elsewhere", "namespace": "team-b", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "priority": 0,
            "localQueueName": "other",
            "positionInClusterQueue": 0,
            "positionInLocalQueue": 0,
        }
    ]
    missing = _summary(f"{BASE}/clusterqueues/nope/pendingworkloads")
    assert missing.code == 404
    assert missing.body["message"] == 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found'
    lq = _summary(f"{BASE}/namespaces/team-c/localqueues/lq/pendingworkloads")
    assert lq.code == 404
    assert lq.body["reason"] == "NotFound"
    assert lq.body["details"]["kind"] == "localqueue"


def test_discovery_lists_the_subresources_and_other_paths_are_refused() -> None:
    resources = route("GET", f"{BASE}")
    assert resources == Reply(200, api_resources())
    names = {(r["name"], r["namespaced"], tuple(r["verbs"])) for r in api_resources()["resources"]}
    assert ("localqueues/pendingworkloads", True, ("get",)) in names
    assert ("clusterqueues/pendingworkloads", False, ("get",)) in names
    group = route("GET", "/apis/visibility.kueue.x-k8s.io")
    assert isinstance(group, Reply)
    assert group.body["preferredVersion"]["version"] == "v1beta2"
    for method, path in [
        ("POST", f"{BASE}/clusterqueues/cq/pendingworkloads"),
        ("GET", f"{BASE}/clusterqueues/cq"),
        ("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads"),
        ("GET", f"{BASE}/namespaces/a/clusterqueues/cq/pendingworkloads"),
    ]:
        answer = route(method, path)
        assert isinstance(answer, Reply), (method, path)
        assert answer.code in (404, 405), (method, path)


PROXY_DATA = {
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n...",
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]',
    "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
}


def test_the_front_proxy_configuration_comes_from_the_apiservers_config_map() -> None:
    proxy = FrontProxy.from_config_map(PROXY_DATA)
    assert proxy is not None
    assert proxy.allows("front-proxy-client")
    assert not proxy.allows("kfed-rig-admin")
    assert FrontProxy.from_config_map({"client-ca-file": "x"}) is None
    anyone = FrontProxy.from_config_map({"requestheader-client-ca-file": "x", "requestheader-allowed-names": "[]"})
    assert anyone is not None
    assert anyone.allows("whoever")
    assert anyone.username_headers == ("X-Remote-User",)


def test_the_user_comes_from_the_proxy_headers_case_insensitively() -> None:
    proxy = FrontProxy.from_config_map(PROXY_DATA)
    assert proxy is not None
    user = front_proxy_user(
        proxy,
        [
            ("x-remote-user", "alice"),
            ("X-Remote-Group", "team-a"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes%2FA", "one"),
            ("X-Remote-Uid", "u-7"),
            ("Accept", "application/json"),
        ],
    )
    assert user == User("alice", ("team-a", "system:authenticated"), {"scopes/a": ["one"]}, "u-7")
    assert front_proxy_user(proxy, [("Accept", "*/*")]) is None


def test_the_access_review_asks_for_get_on_the_subresource() -> None:
    lq = PendingRequest("localqueues", "lq", "team-a", 10, 0)
    review = access_review(lq, User("alice", ("g",), {"k": ["v"]}))
    assert review["kind"] == "SubjectAccessReview"
    assert review["spec"] == {
        "resourceAttributes": {
            "verb": "get",
            "group": "visibility.kueue.x-k8s.io",
            "version": "v1beta2",
            "resource": "localqueues",
            "subresource": "pendingworkloads",
            "name": "lq",
            "namespace": "team-a",
        },
        "user": "alice",
        "groups": ["g"],
        "extra": {"k": ["v"]},
    }
    cq = access_review(PendingRequest("clusterqueues", "cq", "", 10, 0), User("bob", (), {}))
    assert "namespace" not in cq["spec"]["resourceAttributes"]
    assert "extra" not in cq["spec"]
    denied = forbidden(lq, "alice", "")
    assert denied.code == 403
    assert denied.body["message"] == (
        'localqueues.visibility.kueue.x-k8s.io "lq" is forbidden: User "alice" cannot get resource '
        '"localqueues/pendingworkloads" in API group "visibility.kueue.x-k8s.io" in the namespace "team-a"'
    )
