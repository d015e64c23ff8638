"""The parts of KubeApi and WatchCache that need no server: retry and backoff arithmetic, object keys, and the
argument checks that reject a call before anything is sent.

Everything that talks to an apiserver is tested against a real one in e2e/integration/test_kube_api.py and
test_kube_watch.py.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import pytest

from federation.kube import resources as r
from federation.kube import transport as tp
from federation.kube.api import KubeApi, PatchType, RetryPolicy, object_key
from federation.kube.cache import Backoff

pytestmark = pytest.mark.anyio


class NoNetwork:
    """A transport that fails the test if anything is sent: the checks below must happen before any I/O."""

    async def send(self, request: tp.Request) -> tp.Response:
        raise AssertionError(f"unexpected request {request.method} {request.path}")

    def stream(self, request: tp.Request) -> AbstractAsyncContextManager[tp.StreamResponse]:
        raise AssertionError(f"unexpected watch {request.path}")

    async def aclose(self) -> None:
        return None


def offline() -> KubeApi:
    return KubeApi(NoNetwork())


def test_object_key() -> None:
    assert object_key({"metadata": {"name": "a", "namespace": "ns"}}) == "ns/a"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert object_key({}) == ""


def test_retry_delay_is_capped_exponential_with_jitter_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=5, initial=0.2, maximum=1.0, max_retry_after=10.0)
    for attempt, ceiling in [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (30, 1.0)]:
        for _ in range(50):
            assert ceiling / 2 <= policy.delay(attempt) <= ceiling
    assert policy.delay(1, retry_after=3.0) >= 3.0
    assert policy.delay(1, retry_after=3600.0) == 10.0  # a huge Retry-After is capped
    assert RetryPolicy.never().attempts == 1


def test_backoff_is_capped_exponential_with_jitter() -> None:
    backoff = Backoff(initial=1.0, maximum=30.0, factor=2.0, jitter=1.0)
    assert backoff.delay(0) == 0.0
    assert [backoff.delay(n, rand=0.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert backoff.delay(2, rand=0.5) == 3.0
    assert backoff.delay(1000, rand=0.99) == 30.0
    assert 1.0 <= backoff.delay(1) < 2.0


async def test_namespaced_writes_need_a_namespace() -> None:
    api = offline()
    with pytest.raises(ValueError, match="namespaced"):
        await api.create(r.JOBS, {"metadata": {"name": "x"}})
    with pytest.raises(ValueError, match=r"metadata\.name"):
        await api.replace(r.NODES, {"metadata": {}})
    with pytest.raises(ValueError, match="namespace is required"):
        await api.get(r.JOBS, "x")
    with pytest.raises(ValueError, match="cluster-scoped"):
        await api.get(r.NODES, "x", namespace="ns")
    assert api.counter.total() == 0


async def test_patch_arguments_are_checked_before_sending() -> None:
    api = offline()
    with pytest.raises(ValueError, match="field_manager"):
        await api.patch(r.CLUSTER_QUEUES, "cq", {}, patch_type=PatchType.APPLY)
    with pytest.raises(ValueError, match="force"):
        await api.patch(r.CLUSTER_QUEUES, "cq", {}, force=True)
    with pytest.raises(ValueError, match="list of operations"):
        await api.patch(r.CLUSTER_QUEUES, "cq", {"op": "add"}, patch_type=PatchType.JSON)
    assert api.counter.total() == 0


def _workload(name: str, version: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


async def test_a_watch_event_runs_synchronous_handlers_at_once_and_hands_back_only_what_must_be_awaited() -> None:
    from anyio.lowlevel import checkpoint

    from federation.kube.cache import WatchCache

    calls: list[str] = []
    cache = WatchCache(offline(), r.WORKLOADS, handlers=[lambda kind, obj, old: calls.append(f"sync {kind}")])
    assert cache._apply("ADDED", _workload("a", "1")) is None  # nothing to await: no shielded scope per event
    assert calls == ["sync ADDED"]
    assert cache.resource_version == "1"

    async def slow(kind: str, obj: object, old: object) -> None:
        await checkpoint()
        calls.append(f"async {kind}")

    def broken(kind: str, obj: object, old: object) -> None:
        raise RuntimeError("handler bug")

    cache.add_handler(slow)
    cache.add_handler(broken)
    cache.add_handler(lambda kind, obj, old: calls.append(f"after {kind}"))
    changes = cache.subscribe()
    calls.clear()
    pending = cache._apply("MODIFIED", _workload("a", "2"))
    assert calls == ["sync MODIFIED"]  # handlers run in order: the rest waits for the async one
    assert pending is not None
    await pending
    assert calls == ["sync MODIFIED", "async MODIFIED", "after MODIFIED"]  # a failing handler stops no other
    change = changes.receive_nowait()
    assert (change.type, change.old) == ("MODIFIED", _workload("a", "1"))
    assert cache.store.get("ns/a") == _workload("a", "2")
