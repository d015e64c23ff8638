"""federation.kube against a real kube-apiserver: watch caches survive an apiserver restart, a stopped cache
re-lists and emits what it missed, 410 Gone comes back typed (and a cache of a re-created CRD lists at once on it),
a label-selected cache of a CRD (Workloads) sees an object that stops matching as DELETED, handlers and channels
behave, a dead cluster does not stall a live one, and Lease leader election hands over (on release, on expiry) and
steps down when the lease is taken.

kubectl runs in worker threads so the caches keep running on the event loop; the apiserver restart runs on the
loop's thread (see the comment there). Every wait has a deadline; nothing sleeps blindly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
import yaml

from e2e.integration.kube_support import MANAGER, WORKER, connect, kubectl
from e2e.rig.federation import Federation
from e2e.rig.ports import free_port
from federation.kube import resources as r
from federation.kube.api import KubeApi, Obj, RetryPolicy
from federation.kube.cache import Backoff, WatchCache
from federation.kube.clients import ClientOptions, connect_kubeconfig_text
from federation.kube.errors import Gone, Unavailable
from federation.kube.leader import LeaderElectionConfig, LeaderElector
from federation.kube.store import ADDED, DELETED, MODIFIED, Change

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

FAST_BACKOFF = Backoff(initial=0.2, maximum=2.0, jitter=0.5)


async def eventually(predicate: Callable[[], bool], *, within: float, what: str) -> None:
    with anyio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110 - polls state owned by the cache under test
            await anyio.sleep(0.05)
        return
    raise AssertionError(f"timed out after {within}s waiting for {what}")


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


def workload(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": template}]},
    }


async def test_label_selected_workload_cache_sees_objects_leave_the_selector_as_deleted(
    rig: Federation, namespace: str
) -> None:
    api = await connect(rig, WORKER)
    async with api:
        await api.create(r.WORKLOADS, workload("in", namespace, **{LABEL: "selected"}))
        await api.create(r.WORKLOADS, workload("out", namespace))
        events: list[tuple[str, str]] = []
        seen_by_async: list[str] = []

        def record(event_type: str, obj: Obj, old: Obj | None) -> None:
            events.append((event_type, obj["metadata"]["name"]))

        def broken(event_type: str, obj: Obj, old: Obj | None) -> None:
            raise RuntimeError("a bug in some controller's handler")

        async def slow(event_type: str, obj: Obj, old: Obj | None) -> None:
            await anyio.lowlevel.checkpoint()
            seen_by_async.append(f"{event_type} {obj['metadata']['name']}")

        cache = WatchCache(
            api,
            r.WORKLOADS,
            namespace=namespace,
            label_selector=f"{LABEL}=selected",
            handlers=[broken, record, slow],
            backoff=FAST_BACKOFF,
        )
        channel = cache.subscribe()
        changes: list[Change] = []

        async def consume() -> None:
            async with channel:
                async for change in channel:
                    changes.append(change)

        def names() -> set[str]:
            return {o["metadata"]["name"] for o in cache.store}

        async with anyio.create_task_group() as outer:
            outer.start_soon(consume)
            async with anyio.create_task_group() as tg:
                tg.start_soon(cache.run)
                assert await cache.wait_synced(timeout=30)
                assert names() == {"in"}
                assert events == [(ADDED, "in")]
                assert all(o["kind"] == "Workload" for o in cache.store)
                await eventually(lambda: cache.connected, within=30, what="watch open")

                # "out" starts matching: ADDED.  "in" stops matching: the apiserver sends DELETED for it.
                await api.patch(r.WORKLOADS, "out", {"metadata": {"labels": {LABEL: "selected"}}}, namespace=namespace)
                await eventually(lambda: (ADDED, "out") in events, within=30, what="ADDED out")
                await api.patch(r.WORKLOADS, "in", {"metadata": {"labels": {LABEL: None}}}, namespace=namespace)
                await eventually(lambda: (DELETED, "in") in events, within=30, what="DELETED in (left the selector)")
                assert names() == {"out"}
                # Still there on the server: it only left the selection.
                assert await api.get_or_none(r.WORKLOADS, "in", namespace=namespace) is not None

                # A status write is a MODIFIED; a real delete is a DELETED.
                status = {"conditions": [], "clusterName": "worker-2"}
                await api.patch_status(r.WORKLOADS, "out", {"status": status}, namespace=namespace)
                await eventually(lambda: (MODIFIED, "out") in events, within=30, what="MODIFIED out")
                stored = cache.store.get(f"{namespace}/out")
                assert stored is not None
                assert stored["status"]["clusterName"] == "worker-2"
                await api.delete(r.WORKLOADS, "out", namespace=namespace)
                await eventually(lambda: (DELETED, "out") in events, within=30, what="DELETED out")
                assert names() == set()
                # Handlers run before the channel gets the change: stop only once every consumer has the last one.
                await eventually(
                    lambda: (
                        f"{DELETED} out" in seen_by_async
                        and any(c.type == DELETED and c.obj["metadata"]["name"] == "out" for c in changes)
                    ),
                    within=30,
                    what="the async handler and the channel to see DELETED out",
                )
                tg.cancel_scope.cancel()
            # The cache stopped: its channel is closed, so the consumer ends on its own.
        expected = [(ADDED, "in"), (ADDED, "out"), (DELETED, "in"), (MODIFIED, "out"), (DELETED, "out")]
        assert events == expected  # the failing handler before it changed nothing
        assert seen_by_async == [f"{t} {n}" for t, n in expected]  # async handlers are awaited, in order
        assert [(c.type, c.obj["metadata"]["name"]) for c in changes] == expected
        deleted_in = changes[2]
        assert deleted_in.old is not None
        assert deleted_in.old["metadata"]["labels"] == {LABEL: "selected"}
        assert api.counter.total(verbs=["list"], resource=r.WORKLOADS.label) == 1
        assert api.counter.total(verbs=["watch"], resource=r.WORKLOADS.label) >= 1


async def test_restart_watch_rewatches_at_once_without_relisting_or_losing_events(
    rig: Federation, namespace: str
) -> None:
    api = await connect(rig, WORKER)
    async with api:
        rec = Recorder()
        cache = WatchCache(
            api, r.CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR, handlers=[rec], backoff=FAST_BACKOFF
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.run)
            assert await cache.wait_synced(timeout=30)
            await eventually(lambda: cache.connected, within=30, what="watch open")
            api.counter.reset()
            for i in range(3):
                cache.restart_watch()
                await api.create(r.CONFIG_MAPS, config_map(f"r{i}", namespace, "1"))
            await eventually(
                lambda: all(rec.saw(ADDED, f"r{i}") for i in range(3)), within=30, what="every ADDED across restarts"
            )
            await eventually(lambda: cache.connected, within=30, what="watch open again")
            assert [e for e in rec.events if e[1].startswith("r")] == [(ADDED, f"r{i}", "1") for i in range(3)]
            assert cache.relists == 0
            assert api.counter.total(verbs=["list"]) == 0
            assert api.counter.total(verbs=["watch"]) >= 1
            assert cache.failing_for() is None
            tg.cancel_scope.cancel()


async def test_a_dead_cluster_does_not_stall_a_live_one(rig: Federation, namespace: str) -> None:
    config = yaml.safe_load(rig.kubeconfig(WORKER).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    # Few, quick retries inside KubeApi so the cache itself sees the failure (and backs off) within the test.
    options = ClientOptions(retry=RetryPolicy(attempts=2, initial=0.05, maximum=0.1))
    dead_api = await connect_kubeconfig_text(yaml.safe_dump(config), cluster="dead", options=options)
    live_api = await connect(rig, WORKER)
    async with dead_api, live_api:
        dead = WatchCache(dead_api, r.WORKLOADS, namespace=namespace, backoff=FAST_BACKOFF)
        live = WatchCache(live_api, r.WORKLOADS, namespace=namespace, backoff=FAST_BACKOFF)
        async with anyio.create_task_group() as tg:
            tg.start_soon(dead.run)
            tg.start_soon(live.run)
            assert await live.wait_synced(timeout=30)
            await live_api.create(r.WORKLOADS, workload("w", namespace))
            await eventually(lambda: f"{namespace}/w" in live.store, within=30, what="live event")
            await eventually(lambda: dead.last_error is not None, within=15, what="the dead cache to record its error")
            assert "cluster dead" in str(dead.last_error)
            assert not dead.synced
            assert not dead.connected
            failing = dead.failing_for()
            assert failing is not None
            assert failing >= 0
            assert live.failing_for() is None
            tg.cancel_scope.cancel()
        assert dead_api.counter.total(verbs=["list"]) >= 1
        with pytest.raises(Unavailable):
            await dead_api.server_version()


def elector(api: KubeApi, namespace: str, identity: str, log: list[str], *, release: bool = True) -> LeaderElector:
    config = LeaderElectionConfig(
        "kfed-test",
        namespace,
        identity,
        lease_duration=4.0,
        renew_deadline=3.0,
        retry_period=0.5,
        release_on_cancel=release,
    )

    async def work() -> None:
        log.append(f"start {identity}")
        await anyio.sleep_forever()

    return LeaderElector(
        api, config, on_started_leading=work, on_stopped_leading=lambda: log.append(f"stop {identity}")
    )


@pytest.fixture
async def lease_namespace(rig: Federation) -> AsyncIterator[str]:
    name = f"kube-leader-{uuid.uuid4().hex[:8]}"
    await kubectl(rig, MANAGER, "create", "namespace", name)
    try:
        yield name
    finally:
        await kubectl(rig, MANAGER, "delete", "namespace", name, "--wait=false")


async def test_standby_takes_over_after_expiry_when_the_leader_vanishes_without_release(
    rig: Federation, lease_namespace: str
) -> None:
    api_a, api_b = await connect(rig, MANAGER), await connect(rig, MANAGER)
    log: list[str] = []
    async with api_a, api_b:
        a = elector(api_a, lease_namespace, "replica-a", log, release=False)
        async with a:
            assert await a.wait_leading(timeout=30)
        # "a" is gone but its Lease still names it for 4 s: "b" must wait for expiry, then take over.
        b = elector(api_b, lease_namespace, "replica-b", log)
        async with b:
            await eventually(lambda: b.leader == "replica-a", within=30, what="b observes the old holder")
            assert not b.is_leader
            assert await b.wait_leading(timeout=30)
        lease = await api_a.get(r.LEASES, "kfed-test", namespace=lease_namespace)
        assert lease["spec"]["leaseTransitions"] == 1
        assert log == ["start replica-a", "stop replica-a", "start replica-b", "stop replica-b"]


async def test_leader_steps_down_when_another_holder_takes_the_lease(rig: Federation, lease_namespace: str) -> None:
    api = await connect(rig, MANAGER)
    log: list[str] = []
    async with api:
        a = elector(api, lease_namespace, "replica-a", log)
        async with a:
            assert await a.wait_leading(timeout=30)
            # Someone else writes the Lease (as a replica that judged it expired would): "a" cannot renew, so it
            # must stop its work within the renew deadline, then campaign as a standby.
            patch = json.dumps({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 3600}})
            await kubectl(
                rig, MANAGER, "-n", lease_namespace, "patch", "lease", "kfed-test", "--type=merge", "-p", patch
            )
            await eventually(lambda: log == ["start replica-a", "stop replica-a"], within=15, what="a steps down")
            assert not a.is_leader
            await eventually(lambda: a.leader == "intruder", within=15, what="a observes the new holder")
            lease = await api.get(r.LEASES, "kfed-test", namespace=lease_namespace)
            assert lease["spec"]["holderIdentity"] == "intruder"  # a standby does not release others' leases


RECREATED = r.Resource("it.kfed.io", "v1", "recreateds", "Recreated", namespaced=False)


def recreated_crd() -> str:
    return json.dumps(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{RECREATED.plural}.{RECREATED.group}"},
            "spec": {
                "group": RECREATED.group,
                "scope": "Cluster",
                "names": {"plural": RECREATED.plural, "singular": "recreated", "kind": RECREATED.kind},
                "versions": [
                    {
                        "name": RECREATED.version,
                        "served": True,
                        "storage": True,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                ],
            },
        }
    )


async def test_a_cache_of_a_re_created_crd_lists_at_once_once_the_server_answers_gone(rig: Federation) -> None:
    """Someone deletes a CRD kfed watches (uninstalling Kueue from a worker) and installs it again. Once the watch
    from the old resourceVersion is answered 410 Gone, the cache lists at once: the failures before it were the CRD's
    absence, not the server's. (It used to sleep one more full backoff step, up to 30 s, with the server fine.)"""
    crd = f"{RECREATED.plural}.{RECREATED.group}"

    async def install() -> None:
        await kubectl(rig, WORKER, "apply", "-f", "-", stdin=recreated_crd())
        await kubectl(rig, WORKER, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")

    step = 20.0  # every backoff step (no jitter): the old behaviour took two after the CRD was back, this one
    api = await connect(rig, WORKER, retry=RetryPolicy(attempts=1))
    await install()
    try:
        async with api:
            await api.create(
                RECREATED, {"apiVersion": RECREATED.api_version, "kind": RECREATED.kind, "metadata": {"name": "before"}}
            )
            cache = WatchCache(api, RECREATED, backoff=Backoff(initial=step, maximum=step, jitter=0.0))
            async with anyio.create_task_group() as tg:
                tg.start_soon(cache.run)
                assert await cache.wait_synced(timeout=30)
                await eventually(lambda: cache.connected, within=30, what="watch open")
                await kubectl(rig, WORKER, "delete", "crd", crd, "--wait=true", "--timeout=60s")
                # The watch ends with the CRD; watching again fails (404) and the cache backs off one step.
                await eventually(lambda: cache.failing_for() is not None, within=30, what="the cache failing")
                failing_since = anyio.current_time()
                await install()
                await api.create(
                    RECREATED,
                    {"apiVersion": RECREATED.api_version, "kind": RECREATED.kind, "metadata": {"name": "after"}},
                )
                # Well within two steps of the failure: one step of backoff, then a Gone and an immediate list.
                await eventually(
                    lambda: "after" in {o["metadata"]["name"] for o in cache.store},
                    within=step * 1.6 - (anyio.current_time() - failing_since),
                    what="the object made after the CRD was re-created",
                )
                assert "before" not in {o["metadata"]["name"] for o in cache.store}
                tg.cancel_scope.cancel()
    finally:
        await kubectl(rig, WORKER, "delete", "crd", crd, "--ignore-not-found", "--wait=false")
