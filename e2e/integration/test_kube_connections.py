"""kfed's own HTTP/1.1 connections (federation.kube.connections) against a real apiserver: a capped pool that
reuses its connections, chunked lists and watches, a watch the server ends, and an apiserver that stops answering."""

from __future__ import annotations

import uuid

import anyio
import pytest
import yaml

from e2e.integration.kube_support import WORKER
from e2e.rig.federation import Federation
from federation.kube import resources as r
from federation.kube.api import KubeApi, RetryPolicy
from federation.kube.clients import ApiClientTransport, ClientOptions, connect_kubeconfig_text
from federation.kube.connections import Http1Transport
from federation.kube.errors import Unavailable

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def _connect(rig: Federation, **options: object) -> tuple[KubeApi, Http1Transport]:
    api = await connect_kubeconfig_text(
        rig.kubeconfig(WORKER).read_text(),
        cluster=WORKER,
        options=ClientOptions(**options),  # type: ignore[arg-type]
    )
    assert isinstance(api.transport, Http1Transport)
    return api, api.transport


def _config_map(name: str, namespace: str, size: int = 10) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"v": "x" * size},
    }


async def test_many_requests_at_once_share_a_capped_pool_of_reused_connections(rig: Federation, namespace: str) -> None:
    api, transport = await _connect(rig, max_connections=3)
    async with api:
        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(api.create, r.CONFIG_MAPS, _config_map(f"pool-{i}", namespace))
        assert transport.opened == 3  # all three slots used at once: neither one at a time nor over the cap
        opened = transport.opened
        for i in range(10):
            await api.patch(r.CONFIG_MAPS, f"pool-{i}", {"data": {"v": str(i)}}, namespace=namespace)
        assert transport.opened == opened  # one after the other: an idle connection every time
        listed = await api.list(r.CONFIG_MAPS, namespace=namespace)
        assert {f"pool-{i}" for i in range(40)} <= {o["metadata"]["name"] for o in listed.items}


async def test_a_long_list_arrives_whole(rig: Federation, namespace: str) -> None:
    # Chunked (far over the few KiB after which the apiserver drops Content-Length), and larger than what a watch
    # may leave unread before its connection stops reading (4 MiB): a plain request always reads to the end.
    api, _ = await _connect(rig, request_timeout=30.0)
    async with api:
        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(api.create, r.CONFIG_MAPS, _config_map(f"big-{i}", namespace, size=96 * 1024))
        listed = await api.list(r.CONFIG_MAPS, namespace=namespace, page_size=None)
        big = [o for o in listed.items if o["metadata"]["name"].startswith("big-")]
        assert len(big) == 60
        assert all(len(o["data"]["v"]) == 96 * 1024 for o in big)


async def test_a_watch_sees_each_change_and_ends_when_the_server_ends_it(rig: Federation, namespace: str) -> None:
    api, transport = await _connect(rig)
    async with api:
        start = await api.list(r.CONFIG_MAPS, namespace=namespace)
        names = [f"w-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
        seen: list[tuple[str, str]] = []
        with anyio.fail_after(30):
            async with api.watch(
                r.CONFIG_MAPS, resource_version=start.resource_version, namespace=namespace, timeout_seconds=3
            ) as stream:
                for name in names:
                    await api.create(r.CONFIG_MAPS, _config_map(name, namespace))
                async for event in stream:  # ends by itself once the server's 3 s are up
                    # not kube-root-ca.crt, which kube-controller-manager may publish in the new namespace meanwhile
                    if event.type != "BOOKMARK" and event.object["metadata"]["name"] != "kube-root-ca.crt":
                        seen.append((event.type, event.object["metadata"]["name"]))
        assert seen == [("ADDED", name) for name in names]
        opened = transport.opened
        await api.get(r.NAMESPACES, namespace)
        assert transport.opened == opened  # the finished watch's connection went back to the pool


async def test_an_apiserver_that_stops_answering_is_unavailable_within_the_timeout_and_then_recovers(
    rig: Federation, namespace: str
) -> None:
    api, _ = await _connect(rig, request_timeout=2.0, retry=RetryPolicy.never())
    async with api:
        await api.get(r.NAMESPACES, namespace)  # a pooled, idle connection to the apiserver
        with rig.clusters[WORKER].paused():
            started = anyio.current_time()
            with pytest.raises(Unavailable, match="no answer within 2 s"):
                await api.get(r.NAMESPACES, namespace)
            assert anyio.current_time() - started < 10
        with anyio.fail_after(30):
            while True:  # the apiserver catches up on its own; the timed-out connection is never reused
                try:
                    assert (await api.get(r.NAMESPACES, namespace))["metadata"]["name"] == namespace
                    break
                except Unavailable:
                    await anyio.sleep(0.2)


async def test_closing_the_client_ends_an_open_watch_as_unavailable(rig: Federation, namespace: str) -> None:
    api, _ = await _connect(rig)
    start = await api.list(r.CONFIG_MAPS, namespace=namespace)
    with anyio.fail_after(30):
        async with api.watch(
            r.CONFIG_MAPS, resource_version=start.resource_version, namespace=namespace, timeout_seconds=60
        ) as stream:
            await api.aclose()
            with pytest.raises(Unavailable, match="connection closed"):
                async for _ in stream:
                    pass


async def test_a_kubeconfig_that_names_a_proxy_goes_through_aiohttp(rig: Federation) -> None:
    config = yaml.safe_load(rig.kubeconfig(WORKER).read_text())
    config["clusters"][0]["cluster"]["proxy-url"] = "http://127.0.0.1:3128"
    api = await connect_kubeconfig_text(yaml.safe_dump(config), cluster=WORKER, validate=False)
    async with api:
        assert isinstance(api.transport, ApiClientTransport)  # this transport cannot speak to a proxy
