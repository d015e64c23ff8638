"""The real kubernetes_asyncio-backed transport against a tiny local aiohttp "apiserver" (HTTP and TLS).

Checks what unit tests over the fake cannot: that ``call_api(..., _preload_content=False)`` is used correctly
(auth header, content types, query strings, raw bytes), that watch lines stream (including a 1 MiB object),
that connection failures become ``Unavailable`` and that closing leaves no unclosed aiohttp session.
"""

from __future__ import annotations

import base64
import datetime as dt
import gc
import ipaddress
import json
import socket
import ssl
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from federation.kube import resources as r
from federation.kube.api import KubeApi, PatchType, RetryPolicy
from federation.kube.clients import ClientOptions, ClusterClients, connect_kubeconfig_file, connect_kubeconfig_text
from federation.kube.errors import AlreadyExists, Gone, NotFound, Unavailable
from federation.kube.kubeconfig import KubeconfigError

pytestmark = pytest.mark.anyio

FAST = ClientOptions(retry=RetryPolicy(attempts=3, initial=0.01, maximum=0.02), request_timeout=5.0)
BIG = "x" * (1 << 20)


def status(code: int, reason: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body["message"] = f"{reason} from test server"
    return web.json_response(body, status=code)


class Server:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.flaky = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.text()
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": json.loads(body) if body else None,
            }
        )
        path = request.path
        if request.query.get("watch") == "true":
            return await self.watch(request)
        if path == "/api/v1/namespaces/ns/pods/p":
            return web.json_response({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns"}})
        if path == "/api/v1/nodes/flaky":
            self.flaky += 1
            if self.flaky < 3:
                return web.Response(status=503, headers={"Retry-After": "0"}, text="busy")
            return web.json_response({"kind": "Node", "metadata": {"name": "flaky"}})
        if path == "/api/v1/nodes" and request.method == "GET":
            return web.json_response(
                {"kind": "NodeList", "metadata": {"resourceVersion": "77"}, "items": [{"metadata": {"name": "n1"}}]}
            )
        if path == "/api/v1/nodes" and request.method == "POST":
            return status(409, "AlreadyExists")
        if path == "/api/v1/nodes/n" and request.method == "PATCH":
            return web.json_response({"kind": "Node", "metadata": {"name": "n"}, "echo": self.seen[-1]["body"]})
        return status(404, "NotFound")

    async def watch(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("resourceVersion") == "1":
            return status(410, "Expired")
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        events = [
            {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "10"}}},
            {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "11"}}},
            {
                "type": "MODIFIED",
                "object": {"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "12"}, "x": BIG},
            },
            {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}},
        ]
        for event in events:
            await response.write(json.dumps(event).encode() + b"\n")
            await anyio.sleep(0.01)
        return response


async def start(app: web.Application, *, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    sockets = site._server.sockets  # type: ignore[union-attr]
    return runner, int(sockets[0].getsockname()[1])


def kubeconfig(server: str, *, ca: bytes | None = None, token: str = "tok") -> str:
    cluster: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "t",
            "contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": {"token": token}}],
        }
    )


@pytest.fixture
async def http_api() -> AsyncIterator[tuple[KubeApi, Server]]:
    server = Server()
    runner, port = await start(server.app())
    api = await connect_kubeconfig_text(
        kubeconfig(f"http://127.0.0.1:{port}"), cluster="local", options=FAST, validate=False
    )
    try:
        yield api, server
    finally:
        await api.aclose()
        await runner.cleanup()


async def test_get_sends_auth_and_reads_raw_json(http_api: tuple[KubeApi, Server]) -> None:
    api, server = http_api
    pod = await api.get(r.PODS, "p", namespace="ns")
    assert pod["metadata"]["name"] == "p"
    headers = server.seen[-1]["headers"]
    assert headers["Authorization"] == "Bearer tok"
    assert headers["Accept"] == "application/json"
    assert headers["User-Agent"] == "kfed/0.1"


async def test_errors_are_typed(http_api: tuple[KubeApi, Server]) -> None:
    api, _ = http_api
    with pytest.raises(NotFound, match="NotFound from test server"):
        await api.get(r.PODS, "nope", namespace="ns")
    with pytest.raises(AlreadyExists):
        await api.create(r.NODES, {"metadata": {"name": "n"}})


async def test_503_is_retried(http_api: tuple[KubeApi, Server]) -> None:
    api, server = http_api
    node = await api.get(r.NODES, "flaky")
    assert node["metadata"]["name"] == "flaky"
    assert server.flaky == 3


async def test_list_and_patch_encoding(http_api: tuple[KubeApi, Server]) -> None:
    api, server = http_api
    nodes = await api.list(r.NODES, label_selector="a=b")
    assert nodes.resource_version == "77"
    assert nodes.items[0]["kind"] == "Node"
    assert server.seen[-1]["query"] == {"labelSelector": "a=b", "limit": "500"}
    echoed = await api.patch(r.NODES, "n", {"metadata": {"labels": {"x": "1"}}}, field_manager="kfed")
    assert echoed["echo"] == {"metadata": {"labels": {"x": "1"}}}
    assert server.seen[-1]["headers"]["Content-Type"] == "application/merge-patch+json"
    assert server.seen[-1]["query"] == {"fieldManager": "kfed"}
    await api.patch(
        r.NODES, "n", {"metadata": {"name": "n"}}, patch_type=PatchType.APPLY, field_manager="kfed", force=True
    )
    seen = server.seen[-1]
    assert seen["headers"]["Content-Type"] == "application/apply-patch+yaml"
    assert seen["query"] == {"fieldManager": "kfed", "force": "true"}
    assert seen["body"]["kind"] == "Node"


async def test_watch_streams_lines_and_raises_gone(http_api: tuple[KubeApi, Server]) -> None:
    api, server = http_api
    got = []

    async def consume() -> None:
        async with api.watch(r.PODS, resource_version="5", namespace="ns", timeout_seconds=30) as stream:
            async for event in stream:
                got.append(event)

    with pytest.raises(Gone, match="too old"):
        await consume()
    assert [e.type for e in got] == ["ADDED", "BOOKMARK", "MODIFIED"]
    assert got[2].object["x"] == BIG
    query = server.seen[-1]["query"]
    assert query["allowWatchBookmarks"] == "true"
    assert query["resourceVersion"] == "5"
    assert query["timeoutSeconds"] == "30"


async def test_watch_http_410_at_open(http_api: tuple[KubeApi, Server]) -> None:
    api, _ = http_api
    with pytest.raises(Gone):
        async with api.watch(r.PODS, resource_version="1"):
            pass  # pragma: no cover


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connection_refused_is_unavailable_and_close_is_clean() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with ClusterClients(options=FAST) as clients:
            api = await clients.add_from_text("gone", kubeconfig(f"http://127.0.0.1:{free_port()}"), validate=False)
            with pytest.raises(Unavailable):
                await api.get(r.NODES, "n")
            assert api.counter.reads() == 3
            await clients.add_from_text("gone", kubeconfig(f"http://127.0.0.1:{free_port()}"), validate=False)
            assert list(clients) == ["gone"]
        del api
        gc.collect()
    assert not [w for w in caught if "Unclosed" in str(w.message)], [str(w.message) for w in caught]


async def test_validation_is_enforced_for_secret_kubeconfigs() -> None:
    with pytest.raises(KubeconfigError, match="does not use https"):
        await connect_kubeconfig_text(kubeconfig("http://127.0.0.1:1"), cluster="x")


def make_tls(tmp: Path) -> tuple[bytes, ssl.SSLContext]:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kfed-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "tls.crt", tmp / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return ca.public_bytes(serialization.Encoding.PEM), context


async def test_tls_with_inline_ca_passes_validation_and_connects(tmp_path: Path) -> None:
    ca_pem, server_tls = make_tls(tmp_path)
    server = Server()
    runner, port = await start(server.app(), ssl_context=server_tls)
    try:
        text = kubeconfig(f"https://127.0.0.1:{port}", ca=ca_pem)
        async with await connect_kubeconfig_text(text, cluster="tls", options=FAST) as api:
            assert (await api.get(r.PODS, "p", namespace="ns"))["metadata"]["name"] == "p"
        path = tmp_path / "kubeconfig"
        path.write_text(text)
        async with await connect_kubeconfig_file(path, cluster="tls-file", options=FAST) as api:
            assert (await api.get(r.PODS, "p", namespace="ns"))["metadata"]["name"] == "p"
        wrong_ca, _ = make_tls(tmp_path)
        async with await connect_kubeconfig_text(
            kubeconfig(f"https://127.0.0.1:{port}", ca=wrong_ca), cluster="bad", options=FAST
        ) as api:
            with pytest.raises(Unavailable, match="certificate verify failed"):
                await api.get(r.PODS, "p", namespace="ns")
    finally:
        await runner.cleanup()
