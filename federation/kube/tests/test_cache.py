"""WatchCache against the in-memory apiserver: sync, events, reconnects, 410 re-lists, isolation."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from federation.kube import resources as r
from federation.kube.api import Obj
from federation.kube.cache import Backoff, WatchCache
from federation.kube.fake import FakeApiServer
from federation.kube.store import Change

from .helpers import eventually

pytestmark = pytest.mark.anyio

FAST = Backoff(initial=0.05, maximum=0.2, jitter=0.0)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []

    def __call__(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        old_rv = old["metadata"].get("resourceVersion") if old else None
        self.events.append((event_type, obj["metadata"]["name"], old_rv))

    def seen(self, event_type: str, name: str) -> bool:
        return any(e[0] == event_type and e[1] == name for e in self.events)


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": {"v": 0}}


def names(cache: WatchCache) -> set[str]:
    return {o["metadata"]["name"] for o in cache.store}


async def test_initial_list_then_watch_events() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.PODS, pod("a"))
    await api.create(r.PODS, pod("b"))
    rec = Recorder()
    cache = WatchCache(api, r.PODS, namespace="ns", handlers=[rec], backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        assert await cache.wait_synced(timeout=5)
        assert rec.events == [("ADDED", "a", None), ("ADDED", "b", None)]
        await eventually(lambda: cache.connected, what="watch open")

        await api.create(r.PODS, pod("c"))
        await api.patch(r.PODS, "a", {"spec": {"v": 1}}, namespace="ns")
        await api.delete(r.PODS, "b", namespace="ns")
        await eventually(lambda: rec.seen("DELETED", "b"), what="DELETED b")
        assert rec.events[2:] == [("ADDED", "c", None), ("MODIFIED", "a", "2"), ("DELETED", "b", "3")]
        assert names(cache) == {"a", "c"}
        assert cache.store.get("ns/a") == await api.get(r.PODS, "a", namespace="ns")
        assert cache.resource_version == str(fake.revision)
        tg.cancel_scope.cancel()
    assert not cache.connected


async def test_wait_synced_times_out_when_apiserver_is_down() -> None:
    fake = FakeApiServer()
    fake.stop()
    cache = WatchCache(fake.api(), r.NODES, backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        assert not await cache.wait_synced(timeout=0.2)
        assert cache.last_error is not None
        assert "down" in cache.last_error
        fake.start()
        assert await cache.wait_synced(timeout=5)
        tg.cancel_scope.cancel()


async def test_reconnect_after_restart_resumes_from_resource_version() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.PODS, pod("a"))
    rec = Recorder()
    cache = WatchCache(api, r.PODS, handlers=[rec], backoff=Backoff(initial=0.2, maximum=0.2, jitter=0.0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        await cache.wait_synced(timeout=5)
        await eventually(lambda: cache.connected, what="watch open")
        fake.stop()
        await eventually(lambda: not cache.connected, what="watch broken")
        fake.start()  # the cache is still backing off: these changes happen "while disconnected"
        await api.create(r.PODS, pod("b"))
        await api.delete(r.PODS, "a", namespace="ns")
        await eventually(lambda: names(cache) == {"b"}, what="converged")
        assert rec.seen("DELETED", "a")
        assert rec.seen("ADDED", "b")
        assert cache.relists == 0  # history was still available: no re-list needed
        tg.cancel_scope.cancel()


async def test_gone_relists_and_emits_synthetic_events() -> None:
    fake = FakeApiServer()
    api = fake.api()
    for name in ("keep", "change", "vanish"):
        await api.create(r.PODS, pod(name))
    rec = Recorder()
    cache = WatchCache(api, r.PODS, handlers=[rec], backoff=Backoff(initial=0.2, maximum=0.2, jitter=0.0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        await cache.wait_synced(timeout=5)
        await eventually(lambda: cache.connected, what="watch open")
        fake.stop()
        fake.start()
        await api.delete(r.PODS, "vanish", namespace="ns")
        await api.patch(r.PODS, "change", {"spec": {"v": 7}}, namespace="ns")
        await api.create(r.PODS, pod("new"))
        fake.compact()  # the cache's resourceVersion is now too old: 410 on re-watch
        await eventually(lambda: cache.relists == 1, what="re-list")
        await eventually(lambda: names(cache) == {"keep", "change", "new"}, what="converged")
        after = rec.events[3:]
        assert ("DELETED", "vanish", "4") in after
        assert any(e[:2] == ("MODIFIED", "change") for e in after)
        assert ("ADDED", "new", None) in after
        assert not any(e[1] == "keep" for e in after)
        store_obj = cache.store.get("ns/change")
        assert store_obj is not None
        assert store_obj["spec"] == {"v": 7}
        tg.cancel_scope.cancel()


async def test_bookmarks_advance_resource_version_without_events() -> None:
    fake = FakeApiServer()
    api = fake.api()
    rec = Recorder()
    cache = WatchCache(api, r.PODS, namespace="ns", handlers=[rec], backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        await cache.wait_synced(timeout=5)
        await eventually(lambda: cache.connected, what="watch open")
        await api.create(r.NODES, {"metadata": {"name": "n"}})  # another resource moves the revision
        fake.send_bookmarks()
        await eventually(lambda: cache.resource_version == str(fake.revision), what="bookmark applied")
        assert rec.events == []
        watch_request = next(q for q in fake.requests if ("watch", "true") in q.query)
        assert ("allowWatchBookmarks", "true") in watch_request.query
        tg.cancel_scope.cancel()


async def test_failing_handler_does_not_stop_the_cache_and_async_handlers_are_awaited() -> None:
    fake = FakeApiServer()
    api = fake.api()
    seen: list[str] = []

    def broken(event_type: str, obj: Obj, old: Obj | None) -> None:
        raise RuntimeError("bug in a controller")

    async def slow(event_type: str, obj: Obj, old: Obj | None) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(obj["metadata"]["name"])

    cache = WatchCache(api, r.PODS, handlers=[broken, slow], backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        await cache.wait_synced(timeout=5)
        await api.create(r.PODS, pod("a"))
        await api.create(r.PODS, pod("b"))
        await eventually(lambda: seen == ["a", "b"], what="both events")
        tg.cancel_scope.cancel()


async def test_subscribe_channel_receives_changes_and_closes_on_stop() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.PODS, pod("a"))
    cache = WatchCache(api, r.PODS, backoff=FAST)
    receive = cache.subscribe()
    got: list[Change] = []

    async def consume() -> None:
        async with receive:
            async for change in receive:
                got.append(change)

    async with anyio.create_task_group() as outer:
        outer.start_soon(consume)
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            await cache.wait_synced(timeout=5)
            await api.delete(r.PODS, "a", namespace="ns")
            await eventually(lambda: len(got) == 2, what="two changes")
            tg.cancel_scope.cancel()
    assert [c.type for c in got] == ["ADDED", "DELETED"]
    deleted = got[1]
    assert deleted.old is not None
    assert deleted.old["metadata"]["name"] == "a"


async def test_label_selector_is_sent_and_respected() -> None:
    fake = FakeApiServer()
    api = fake.api()
    await api.create(r.PODS, pod("mine", owner="kfed"))
    await api.create(r.PODS, pod("other"))
    cache = WatchCache(api, r.PODS, label_selector="owner=kfed", backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.run)
        await cache.wait_synced(timeout=5)
        await api.create(r.PODS, pod("mine2", owner="kfed"))
        await api.create(r.PODS, pod("other2"))
        await eventually(lambda: names(cache) == {"mine", "mine2"}, what="selected objects")
        tg.cancel_scope.cancel()


async def test_dead_cluster_does_not_stall_a_live_one() -> None:
    live, dead = FakeApiServer(), FakeApiServer()
    dead.stop()
    live_api, dead_api = live.api("live"), dead.api("dead")
    live_cache = WatchCache(live_api, r.WORKLOADS, backoff=FAST)
    dead_cache = WatchCache(dead_api, r.WORKLOADS, backoff=FAST)
    async with anyio.create_task_group() as tg:
        tg.start_soon(dead_cache.run)
        tg.start_soon(live_cache.run)
        assert await live_cache.wait_synced(timeout=5)
        await live_api.create(r.WORKLOADS, {"metadata": {"name": "w", "namespace": "ns"}})
        await eventually(lambda: "ns/w" in live_cache.store, what="live event")
        assert not dead_cache.synced
        tg.cancel_scope.cancel()


def test_backoff_is_capped_exponential_with_jitter() -> None:
    backoff = Backoff(initial=1.0, maximum=30.0, factor=2.0, jitter=1.0)
    assert backoff.delay(0) == 0.0
    assert [backoff.delay(n, rand=0.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert backoff.delay(2, rand=0.5) == 3.0
    assert backoff.delay(1000, rand=0.99) == 30.0
