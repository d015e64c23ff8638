"""The client's own CPU per API request, through each transport ``KubeApi`` can send by, against a real apiserver.

Both kfed processes spend most of their CPU moving requests and watch events, so what one request costs the client
decides much of their CPU per Job. This sends the same ConfigMap merge patches ``KFED_REQUESTS`` times (default 2000),
``KFED_REQUESTS_AT_ONCE`` at a time (default 8), through kfed's own HTTP/1.1 connections (``connections``, what kfed
uses) and through kubernetes_asyncio's aiohttp session (``aiohttp``, what kfed uses when a proxy is named), on uvloop
as kfed runs, and prints each one's process CPU time per request (the apiserver's CPU is not counted). Two rounds,
alternating, since the machine is shared.
"""

from __future__ import annotations

import os
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from e2e.rig.federation import MANAGER, FederationSpec, running
from e2e.toolchain import ensure_built
from federation.kube import resources as r
from federation.kube.api import KubeApi
from federation.kube.clients import ApiClientTransport, connect_kubeconfig_file
from federation.kube.connections import Http1Transport


async def _round(kubeconfig: Path, *, aiohttp: bool, requests: int, at_once: int) -> tuple[float, float]:
    """(client CPU ms per request, requests per second)."""
    api = await connect_kubeconfig_file(kubeconfig, cluster=MANAGER)
    if aiohttp:
        assert isinstance(api.transport, Http1Transport)
        await api.transport.aclose()
        api = KubeApi(ApiClientTransport(await _api_client(kubeconfig), cluster=MANAGER), cluster=MANAGER)
    name = f"bench-{'aiohttp' if aiohttp else 'connections'}"
    async with api:
        await api.create(
            r.CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        )
        slots = anyio.Semaphore(at_once)

        async def one(i: int) -> None:
            async with slots:
                await api.patch(r.CONFIG_MAPS, name, {"data": {"v": str(i)}}, namespace="default")

        cpu, wall = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(requests):
                tg.start_soon(one, i)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await api.delete(r.CONFIG_MAPS, name, namespace="default")
    return cpu / requests * 1000, requests / wall


async def _api_client(kubeconfig: Path) -> Any:
    from kubernetes_asyncio.client import ApiClient, Configuration
    from kubernetes_asyncio.config import kube_config

    from federation.kube.clients import _skip_netrc

    configuration = Configuration()
    await kube_config.load_kube_config(config_file=os.fspath(kubeconfig), client_configuration=configuration)
    api_client = ApiClient(configuration=configuration)
    _skip_netrc(api_client)  # as kfed set up its aiohttp session (no .netrc lookup per request)
    return api_client


def main() -> None:
    requests = int(os.environ.get("KFED_REQUESTS", "2000"))
    at_once = int(os.environ.get("KFED_REQUESTS_AT_ONCE", "8"))
    bins = ensure_built()
    spec = FederationSpec(workers=0)
    with tempfile.TemporaryDirectory(prefix="kfed-bench-") as tmp, running(Path(tmp), bins, spec) as fed:
        kubeconfig = fed.kubeconfig(MANAGER)
        figures: dict[str, list[tuple[float, float]]] = {"connections": [], "aiohttp": []}
        for _ in range(2):
            for label, rounds in figures.items():
                one_round = partial(_round, kubeconfig, aiohttp=label == "aiohttp", requests=requests, at_once=at_once)
                rounds.append(anyio.run(one_round, backend="asyncio", backend_options={"use_uvloop": True}))
    print(f"{requests} merge patches, {at_once} at once, client CPU per request (two rounds):")
    for label, rounds in figures.items():
        cpu = ", ".join(f"{ms:.3f} ms" for ms, _ in rounds)
        rate = ", ".join(f"{rate:.0f}/s" for _, rate in rounds)
        print(f"  {label:<12} {cpu}   ({rate})")
