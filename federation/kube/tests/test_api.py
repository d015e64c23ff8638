"""KubeApi over the in-memory FakeApiServer: paths, errors, retries, counting, patches."""

from __future__ import annotations

from typing import Any

import pytest

from federation.kube import resources as r
from federation.kube.api import PatchType, Propagation, RetryPolicy
from federation.kube.errors import AlreadyExists, Conflict, Gone, Invalid, NotFound, Unavailable
from federation.kube.fake import FakeApiServer

pytestmark = pytest.mark.anyio


def job(name: str, ns: str = "ns", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"parallelism": 1},
        "status": {"active": 5},
    }


async def test_create_get_replace_conflict() -> None:
    fake = FakeApiServer()
    api = fake.api()
    created = await api.create(r.JOBS, job("a"))
    assert created["kind"] == "Job"
    assert created["apiVersion"] == "batch/v1"
    assert "status" not in created  # status subresource ignores status on create
    with pytest.raises(AlreadyExists):
        await api.create(r.JOBS, job("a"))
    got = await api.get(r.JOBS, "a", namespace="ns")
    assert got == created
    stale = {**got, "spec": {"parallelism": 2}}
    updated = await api.replace(r.JOBS, stale)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(Conflict):
        await api.replace(r.JOBS, stale)  # resourceVersion is now old
    with pytest.raises(NotFound):
        await api.get(r.JOBS, "missing", namespace="ns")
    assert await api.get_or_none(r.JOBS, "missing", namespace="ns") is None


async def test_status_subresource_writes() -> None:
    fake = FakeApiServer()
    api = fake.api()
    created = await api.create(r.WORKLOADS, {"metadata": {"name": "w", "namespace": "ns"}, "spec": {"a": 1}})
    with_status = await api.replace_status(r.WORKLOADS, {**created, "status": {"conditions": []}, "spec": {"a": 9}})
    assert with_status["spec"] == {"a": 1}
    assert with_status["status"] == {"conditions": []}
    patched = await api.patch_status(r.WORKLOADS, "w", {"status": {"admission": {"x": 1}}}, namespace="ns")
    assert patched["status"] == {"conditions": [], "admission": {"x": 1}}
    assert patched["metadata"]["generation"] == 1
    request = fake.requests[-1]
    assert request.path.endswith("/workloads/w/status")
    assert request.content_type == "application/merge-patch+json"


async def test_json_patch_and_apply() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.CLUSTER_QUEUES, {"metadata": {"name": "cq"}, "spec": {"cohort": "a"}})
    ops = [
        {"op": "test", "path": "/spec/cohort", "value": "a"},
        {"op": "replace", "path": "/spec/cohort", "value": "b"},
    ]
    patched = await api.patch(r.CLUSTER_QUEUES, "cq", ops, patch_type=PatchType.JSON)
    assert patched["spec"]["cohort"] == "b"
    with pytest.raises(Invalid):
        await api.patch(r.CLUSTER_QUEUES, "cq", ops, patch_type=PatchType.JSON)  # test op fails now
    applied = await api.apply(
        r.CLUSTER_QUEUES, {"metadata": {"name": "cq2"}, "spec": {}}, field_manager="kfed", force=True
    )
    assert applied["metadata"]["name"] == "cq2"
    request = fake.requests[-1]
    assert request.content_type == "application/apply-patch+yaml"
    assert ("fieldManager", "kfed") in request.query
    assert ("force", "true") in request.query
    assert request.body["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    with pytest.raises(ValueError, match="field_manager"):
        await api.patch(r.CLUSTER_QUEUES, "cq", {}, patch_type=PatchType.APPLY)
    with pytest.raises(ValueError, match="force"):
        await api.patch(r.CLUSTER_QUEUES, "cq", {}, force=True)


async def test_delete_with_preconditions_and_propagation() -> None:
    fake = FakeApiServer()
    api = fake.api()
    created = await api.create(r.JOBS, job("a"))
    with pytest.raises(Conflict):
        await api.delete(r.JOBS, "a", namespace="ns", uid="someone-else")
    await api.delete(
        r.JOBS, "a", namespace="ns", uid=created["metadata"]["uid"], propagation_policy=Propagation.BACKGROUND
    )
    body = fake.requests[-1].body
    assert body["propagationPolicy"] == "Background"
    assert body["preconditions"] == {"uid": created["metadata"]["uid"]}
    with pytest.raises(NotFound):
        await api.delete(r.JOBS, "a", namespace="ns")
    assert await api.delete(r.JOBS, "a", namespace="ns", missing_ok=True) is None


async def test_delete_with_finalizers_sets_deletion_timestamp() -> None:
    fake = FakeApiServer()
    api = fake.api()
    obj = job("a")
    obj["metadata"]["finalizers"] = ["kfed.io/cleanup"]
    await api.create(r.JOBS, obj)
    pending = await api.delete(r.JOBS, "a", namespace="ns")
    assert pending is not None
    assert pending["metadata"]["deletionTimestamp"]
    await api.patch(r.JOBS, "a", {"metadata": {"finalizers": None}}, namespace="ns")
    assert fake.objects(r.JOBS) == []


async def test_list_pages_and_fills_kind() -> None:
    fake = FakeApiServer()
    api = fake.api()
    for i in range(7):
        await api.create(r.PODS, {"metadata": {"name": f"p{i}", "namespace": "ns", "labels": {"app": str(i % 2)}}})
    result = await api.list(r.PODS, namespace="ns", page_size=3)
    assert [p["metadata"]["name"] for p in result.items] == [f"p{i}" for i in range(7)]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in result.items)
    assert result.resource_version == str(fake.revision)
    assert api.counter.snapshot()[("list", "pods")] == 3
    selected = await api.list(r.PODS, label_selector="app=1")
    assert len(selected.items) == 3


async def test_list_restarts_unpaged_when_continue_token_expires() -> None:
    fake = FakeApiServer()
    api = fake.api()
    for i in range(4):
        await api.create(r.NODES, {"metadata": {"name": f"n{i}"}})
    original = fake._list

    def compact_after_first_page(*args: Any) -> Any:
        response = original(*args)
        fake.compacted_revision = fake.revision + 1  # every token handed out so far is now too old
        return response

    fake._list = compact_after_first_page  # type: ignore[method-assign,assignment]
    result = await api.list(r.NODES, page_size=2)
    assert len(result.items) == 4
    continued = [q for q in fake.requests if ("continue" in dict(q.query))]
    assert len(continued) == 1
    assert ("limit", "2") not in fake.requests[-1].query


async def test_list_gone_without_paging_raises() -> None:
    fake = FakeApiServer()
    api = fake.api()
    fake.fail_next(410, reason="Expired")
    with pytest.raises(Gone):
        await api.list(r.NODES, page_size=None)


async def test_transient_errors_are_retried_and_counted() -> None:
    fake = FakeApiServer()
    api = fake.api(retry=RetryPolicy(attempts=4, initial=0.001, maximum=0.002))
    await api.create(r.NODES, {"metadata": {"name": "n"}})
    fake.fail_next(503, count=2, reason="ServiceUnavailable")
    assert (await api.get(r.NODES, "n"))["metadata"]["name"] == "n"
    assert api.counter.snapshot()[("get", "nodes")] == 3
    fake.fail_next(429, count=4, reason="TooManyRequests")
    with pytest.raises(Unavailable):
        await api.get(r.NODES, "n")
    assert api.counter.snapshot()[("get", "nodes")] == 7


@pytest.mark.parametrize(("code", "reason", "exc"), [(409, "Conflict", Conflict), (422, "Invalid", Invalid)])
async def test_conflict_and_invalid_are_never_retried(code: int, reason: str, exc: type[Exception]) -> None:
    fake = FakeApiServer()
    api = fake.api(retry=RetryPolicy(attempts=5, initial=0.001, maximum=0.002))
    fake.fail_next(code, count=5, reason=reason)
    with pytest.raises(exc):
        await api.patch(r.NODES, "n", {"metadata": {"labels": {"a": "b"}}})
    assert api.counter.writes() == 1


async def test_connection_errors_are_unavailable_and_retried() -> None:
    fake = FakeApiServer()
    api = fake.api(retry=RetryPolicy(attempts=2, initial=0.001, maximum=0.002))
    fake.stop()
    with pytest.raises(Unavailable):
        await api.get(r.NODES, "n")
    assert len(fake.requests) == 2


async def test_counter_writes_per_resource() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.WORKLOADS, {"metadata": {"name": "w", "namespace": "ns"}})
    await api.patch_status(r.WORKLOADS, "w", {"status": {"a": 1}}, namespace="ns")
    await api.get(r.WORKLOADS, "w", namespace="ns")
    assert api.counter.writes() == 2
    assert api.counter.writes(resource="workloads.kueue.x-k8s.io/status") == 1
    assert api.counter.reads() == 1


async def test_create_event() -> None:
    fake = FakeApiServer()
    api = fake.api()
    created = await api.create(r.JOBS, job("a"))
    event = await api.create_event(
        created,
        reason="Dispatched",
        note="to worker-1",
        action="Dispatch",
        reporting_controller="kfed.io/manager",
        reporting_instance="m-0",
    )
    assert event["regarding"]["uid"] == created["metadata"]["uid"]
    assert fake.requests[-1].path == "/apis/events.k8s.io/v1/namespaces/ns/events"


async def test_namespace_required_for_namespaced_writes() -> None:
    api = FakeApiServer().api()
    with pytest.raises(ValueError, match="namespaced"):
        await api.create(r.JOBS, {"metadata": {"name": "x"}})
