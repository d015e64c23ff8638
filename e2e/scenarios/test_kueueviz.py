"""KueueViz's backend (Kueue v0.19.1, ``cmd/kueueviz/backend``) against kfed-manager's apiserver, unchanged.

KueueViz reads Kueue's v1beta2 objects through controller-runtime informers and streams them over websockets (one
JSON document when a client connects, another after each change). kfed serves the same API, so every view of
KueueViz that reads Workloads, ClusterQueues, LocalQueues, ResourceFlavors and Events shows a federation's manager.
Only ``make test-kueueviz`` runs this (it builds the backend from Kueue's Git tag: e2e/toolchain/kueueviz.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import pytest

from e2e.queues import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import is_true, submit
from e2e.toolchain.kueueviz import ensure_kueueviz
from e2e.waiting import wait_for

pytestmark = pytest.mark.kueueviz

PROTOCOL = "kueueviz.v1"
"""The websocket subprotocol KueueViz's frontend and backend agree on (middleware.WebSocketBaseProtocol)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthz(base: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{base}/healthz", timeout=5) as response:
            return int(response.status)
    except OSError:
        return 0


@pytest.fixture(scope="module")
def kueueviz(federation: Federation) -> Iterator[str]:
    """KueueViz's backend on a free port, with the manager's admin kubeconfig; ``host:port``."""
    binary = ensure_kueueviz()
    port = _free_port()
    log = federation.directory / "logs" / "kueueviz.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(federation.kubeconfig(MANAGER)),
        "KUEUEVIZ_PORT": str(port),
        "GIN_MODE": "release",  # production mode, as KueueViz's image runs: it then requires the allowed origins
        "KUEUEVIZ_ALLOWED_ORIGINS": f"http://127.0.0.1:{port}",
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(binary)], env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"127.0.0.1:{port}"
    try:
        wait_for(
            lambda: (proc.poll(), _healthz(base)),
            until=lambda state: state[0] is not None or state[1] == 200,
            timeout=30,
            what=f"KueueViz's /healthz (log: {log})",
        )
        assert proc.poll() is None, log.read_text()[-2000:]
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stream(base: str, path: str, *, until: Callable[[Any], bool] = lambda _: True, timeout: float = 30) -> Any:
    """The first document KueueViz sends on ``path`` for which ``until`` holds (it sends one on connect, then
    one per change it sees)."""

    async def read() -> Any:
        seen: Any = None
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"ws://{base}{path}", protocols=(PROTOCOL,)) as ws,
        ):
            try:
                async with asyncio.timeout(timeout):
                    async for message in ws:
                        if message.type != aiohttp.WSMsgType.TEXT:
                            break
                        seen = json.loads(message.data)
                        if until(seen):
                            return seen
            except TimeoutError:
                pass
        raise AssertionError(f"KueueViz {path}: no matching document in {timeout:.0f}s; last: {seen!r}"[:3000])

    return asyncio.run(read())


def _owned_by(workload: dict[str, Any], job: str) -> bool:
    return any(ref.get("name") == job for ref in (workload.get("metadata") or {}).get("ownerReferences") or ())


def _admitted(workloads: list[dict[str, Any]] | None, job: str) -> dict[str, Any] | None:
    for workload in workloads or ():
        if _owned_by(workload, job) and is_true(workload, "Admitted"):
            return workload
    return None


def _usage(entries: list[dict[str, Any]] | None, flavor: str, resource: str) -> float:
    for entry in entries or ():
        if entry.get("name") == flavor:
            for used in entry.get("resources") or ():
                if used.get("name") == resource:
                    return float(used.get("total") or 0)
    return 0.0


def _named(items: list[dict[str, Any]] | None, name: str) -> dict[str, Any] | None:
    return next((item for item in items or () if item.get("name") == name), None)


def test_kueueviz_streams_the_federations_queues_and_workloads(federation: Federation, kueueviz: str) -> None:
    fed = federation
    seen: dict[str, Any] = {}
    try:
        # live: connected before the Job exists, the workloads view gets it once kfed admits it
        with ThreadPoolExecutor(max_workers=1) as pool:
            live = pool.submit(
                stream,
                kueueviz,
                "/ws/workloads?namespace=default",
                until=lambda doc: _admitted((doc.get("workloads") or {}).get("items"), "viz-running") is not None,
                timeout=60,
            )
            submit(fed, "viz-running", cpu="2", seconds=60)
            seen["workloads"] = live.result(timeout=90)
        workload = _admitted(seen["workloads"]["workloads"]["items"], "viz-running")
        assert workload is not None
        name = workload["metadata"]["name"]
        assert workload["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE

        seen["details"] = details = stream(kueueviz, f"/ws/workload/default/{name}")
        assert details["metadata"]["name"] == name
        assert details["spec"]["queueName"] == LOCAL_QUEUE

        seen["cluster-queues"] = queues = stream(
            kueueviz,
            "/ws/cluster-queues",
            until=lambda doc: _usage((_named(doc, CLUSTER_QUEUE) or {}).get("flavorsUsage"), FLAVOR, "cpu") >= 2,
        )
        queue = _named(queues, CLUSTER_QUEUE)
        assert queue is not None
        assert queue["flavors"] == [FLAVOR]
        assert queue["admittedWorkloads"] >= 1

        seen["local-queues"] = locals_ = stream(
            kueueviz,
            "/ws/local-queues",
            until=lambda doc: ((_named(doc, LOCAL_QUEUE) or {}).get("status") or {}).get("admittedWorkloads", 0) >= 1,
        )
        local = _named(locals_, LOCAL_QUEUE)
        assert local is not None
        assert local["namespace"] == "default"
        assert local["spec"]["clusterQueue"] == CLUSTER_QUEUE

        seen["local-queue-workloads"] = in_queue = stream(kueueviz, f"/ws/local-queue/default/{LOCAL_QUEUE}/workloads")
        assert name in {w["metadata"]["name"] for w in in_queue or ()}

        seen["cluster-queue"] = detail = stream(kueueviz, f"/ws/cluster-queue/{CLUSTER_QUEUE}")
        assert detail["metadata"]["name"] == CLUSTER_QUEUE
        assert [q["name"] for q in detail["queues"]] == [LOCAL_QUEUE]

        seen["resource-flavors"] = flavors = stream(kueueviz, "/ws/resource-flavors")
        assert FLAVOR in {f["name"] for f in flavors}

        seen["events"] = events = stream(kueueviz, f"/ws/workload/default/{name}/events", until=bool)
        assert {"QuotaReserved", "Admitted"} <= {e.get("reason") for e in events}, [e.get("reason") for e in events]

        seen["dashboard"] = dashboard = stream(kueueviz, "/ws/workloads/dashboard?namespace=default")
        assert CLUSTER_QUEUE in {q["name"] for q in dashboard["clusterQueues"]}
        assert name in {w["metadata"]["name"] for w in dashboard["workloads"]["items"]}

        seen["cohorts"] = stream(kueueviz, "/ws/cohorts")  # the shared federation has none: an empty view
        assert not seen["cohorts"]
    finally:
        (fed.directory / "logs" / "kueueviz-seen.json").write_text(json.dumps(seen, indent=1, default=str))
        dump = os.environ.get("KUEUEVIZ_DUMP")  # a path to keep what KueueViz sent, and its log, after the rig
        if dump:
            shutil.copy(fed.directory / "logs" / "kueueviz-seen.json", dump)
            shutil.copy(fed.directory / "logs" / "kueueviz.log", f"{dump}.log")
        fed.kubectl(MANAGER, "delete", "job", "viz-running", "--ignore-not-found", "--wait=false")
