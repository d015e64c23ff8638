"""federation.kube against a real kube-apiserver: watch caches survive an apiserver restart, a stopped cache
re-lists and emits what it missed, 410 Gone comes back typed, and Lease leader election hands over.

kubectl runs in worker threads so the caches keep running on the event loop; the apiserver restart runs on the
loop's thread (see the comment there). Every wait has a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest

from e2e.rig.federation import Federation
from federation.kube import resources as r
from federation.kube.api import KubeApi, Obj
from federation.kube.cache import Backoff, WatchCache
from federation.kube.clients import ClientOptions, connect_kubeconfig_text
from federation.kube.errors import Gone
from federation.kube.leader import LeaderElectionConfig, LeaderElector
from federation.kube.store import ADDED, DELETED, MODIFIED

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

WORKER = "worker-1"
MANAGER = "manager"
FAST_BACKOFF = Backoff(initial=0.2, maximum=2.0, jitter=0.5)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def eventually(predicate: Callable[[], bool], *, within: float, what: str) -> None:
    with anyio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110 - polls state owned by the cache under test
            await anyio.sleep(0.05)
        return
    raise AssertionError(f"timed out after {within}s waiting for {what}")


async def kubectl(rig: Federation, cluster: str, *args: str, stdin: str | None = None) -> str:
    def run() -> str:
        return rig.kubectl(cluster, *args, input=stdin).stdout

    return await anyio.to_thread.run_sync(run)


async def connect(rig: Federation, cluster: str) -> KubeApi:
    # The rig's kubeconfigs carry inline CA and client certificates: exactly what a worker Secret must hold, so
    # this also checks that the validator accepts a real, well-formed kubeconfig.
    text = rig.kubeconfig(cluster).read_text()
    return await connect_kubeconfig_text(text, cluster=cluster, options=ClientOptions(request_timeout=15.0))


@pytest.fixture
async def namespace(rig: Federation) -> AsyncIterator[str]:
    name = f"kube-watch-{uuid.uuid4().hex[:8]}"
    await kubectl(rig, WORKER, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(rig, WORKER, "delete", "namespace", name, "--wait=false")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        self.events.append((event_type, obj["metadata"]["name"], (obj.get("data") or {}).get("v", "")))

    def saw(self, event_type: str, name: str, value: str | None = None) -> bool:
        return any(t == event_type and n == name and (value is None or v == value) for t, n, v in self.events)


LABEL = "kfed.io/test"
SELECTOR = f"{LABEL}=kube-watch"  # every namespace also holds kube-root-ca.crt: watch only ours


def config_map(name: str, namespace: str, value: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "kube-watch"}}, "data": {"v": value}}


def data(cache: WatchCache) -> dict[str, str]:
    return {o["metadata"]["name"]: (o.get("data") or {}).get("v", "") for o in cache.store}


async def test_watch_cache_keeps_delivering_across_an_apiserver_restart(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        await api.create(r.CONFIG_MAPS, config_map("a", namespace, "1"))
        await api.create(r.CONFIG_MAPS, config_map("b", namespace, "1"))
        rec = Recorder()
        cache = WatchCache(
            api, r.CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR, handlers=[rec], backoff=FAST_BACKOFF
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            assert await cache.wait_synced(timeout=30)
            assert data(cache) == {"a": "1", "b": "1"}
            await eventually(lambda: cache.connected, within=30, what="watch open")

            # Live events before the restart.
            await api.patch(r.CONFIG_MAPS, "a", {"data": {"v": "2"}}, namespace=namespace)
            await eventually(lambda: rec.saw(MODIFIED, "a", "2"), within=30, what="MODIFIED a=2")

            # On the event loop's own thread on purpose: the rig gives its processes PR_SET_PDEATHSIG, which fires
            # when the *thread* that spawned them exits, so an apiserver started from a worker thread would be
            # killed once that thread is reaped. Blocking the loop here is harmless: the open watch is dead either
            # way when the loop resumes, and the cache must notice and reconnect.
            rig.restart_apiserver(WORKER)

            # Written with kubectl (another client) right after the apiserver is back.
            manifest = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", **config_map("c", namespace, "1")})
            await kubectl(rig, WORKER, "create", "-f", "-", stdin=manifest)
            await kubectl(rig, WORKER, "-n", namespace, "patch", "configmap", "a", "-p", '{"data":{"v":"3"}}')
            await kubectl(rig, WORKER, "-n", namespace, "delete", "configmap", "b")

            await eventually(lambda: data(cache) == {"a": "3", "c": "1"}, within=90, what="cache converged")
            assert rec.saw(ADDED, "c")
            assert rec.saw(MODIFIED, "a", "3")
            assert rec.saw(DELETED, "b")
            await eventually(lambda: cache.connected, within=30, what="watch re-opened")

            # And it keeps delivering after the reconnect.
            await api.delete(r.CONFIG_MAPS, "c", namespace=namespace)
            await eventually(lambda: "c" not in data(cache), within=30, what="DELETED c after reconnect")
            tg.cancel_scope.cancel()
        assert api.counter.total(verbs=["watch"]) >= 2


async def test_stopped_cache_relists_and_emits_what_it_missed(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        for name in ("keep", "change", "vanish"):
            await api.create(r.CONFIG_MAPS, config_map(name, namespace, "1"))
        rec = Recorder()
        cache = WatchCache(
            api, r.CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR, handlers=[rec], backoff=FAST_BACKOFF
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            assert await cache.wait_synced(timeout=30)
            tg.cancel_scope.cancel()
        assert len(rec.events) == 3

        # While nobody watches.
        await api.delete(r.CONFIG_MAPS, "vanish", namespace=namespace)
        await api.patch(r.CONFIG_MAPS, "change", {"data": {"v": "2"}}, namespace=namespace)
        await api.create(r.CONFIG_MAPS, config_map("new", namespace, "1"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)  # same store: the list is diffed against it
            await eventually(lambda: len(rec.events) >= 6, within=30, what="re-list events")
            tg.cancel_scope.cancel()
        assert sorted(rec.events[3:]) == [(ADDED, "new", "1"), (DELETED, "vanish", "1"), (MODIFIED, "change", "2")]
        assert data(cache) == {"keep": "1", "change": "2", "new": "1"}


async def test_watch_from_an_expired_resource_version_is_gone(rig: Federation, namespace: str) -> None:
    # resourceVersion "1" predates the apiserver's watch cache window: the server answers 410 (as an ERROR event
    # on a 200 stream, or as an HTTP 410), which must surface as Gone, the signal for a re-list.
    api = await connect(rig, WORKER)
    async with api:
        await api.create(r.CONFIG_MAPS, config_map("x", namespace, "1"))

        async def watch_from_the_beginning() -> None:
            async with api.watch(r.CONFIG_MAPS, namespace=namespace, resource_version="1", timeout_seconds=10) as s:
                async for _ in s:
                    pass

        with anyio.fail_after(30), pytest.raises(Gone):
            await watch_from_the_beginning()


async def test_leader_election_hands_over(rig: Federation) -> None:
    lease_ns = f"kube-leader-{uuid.uuid4().hex[:8]}"
    await kubectl(rig, MANAGER, "create", "namespace", lease_ns)
    api_a, api_b = await connect(rig, MANAGER), await connect(rig, MANAGER)
    log: list[str] = []

    def make(api: KubeApi, identity: str) -> LeaderElector:
        config = LeaderElectionConfig(
            "kfed-test", lease_ns, identity, lease_duration=4.0, renew_deadline=3.0, retry_period=0.5
        )

        async def work() -> None:
            log.append(f"start {identity}")
            await anyio.sleep_forever()

        return LeaderElector(
            api, config, on_started_leading=work, on_stopped_leading=lambda: log.append(f"stop {identity}")
        )

    a, b = make(api_a, "replica-a"), make(api_b, "replica-b")
    a_scope = anyio.CancelScope()

    async def run_a() -> None:
        with a_scope:
            await a.run()

    try:
        async with api_a, api_b, anyio.create_task_group() as tg:
            tg.start_soon(run_a)
            assert await a.wait_leading(timeout=30)
            tg.start_soon(b.run)
            await eventually(lambda: b.leader == "replica-a", within=30, what="standby sees the leader")
            assert not b.is_leader
            assert log == ["start replica-a"]

            a_scope.cancel()  # the leader stops (and releases the Lease)
            assert await b.wait_leading(timeout=30)
            await eventually(lambda: log[-1:] == ["start replica-b"], within=10, what="b starts its work")
            assert "stop replica-a" in log
            lease = json.loads(await kubectl(rig, MANAGER, "-n", lease_ns, "get", "lease", "kfed-test", "-o", "json"))
            assert lease["spec"]["holderIdentity"] == "replica-b"
            assert lease["spec"]["leaseDurationSeconds"] == 4
            tg.cancel_scope.cancel()
    finally:
        await kubectl(rig, MANAGER, "delete", "namespace", lease_ns, "--wait=false")
