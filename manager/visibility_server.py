"""kfed-manager's aggregated API server: Kueue's visibility API, reached through the manager cluster's apiserver.

The chart registers the APIService ``v1beta2.visibility.kueue.x-k8s.io`` for this server, as Kueue's chart does
for its own, so ``kubectl get --raw /apis/visibility.kueue.x-k8s.io/...``, kueuectl and KueueViz work unchanged.
What each request means and what it gets is decided in ``manager.decisions.visibility``; this module is the I/O:

* **TLS.** With ``--visibility-cert-dir`` (the chart mounts its Secret there), the serving certificate is that
  directory's ``tls.crt`` and ``tls.key``, signed by the CA the chart gives the APIService as ``caBundle``, so the
  apiserver verifies whom it talks to; the files are read again every minute (a renewed Secret), and until they can
  be read the readiness detail and the log say why. Without it the certificate is self-signed, made at start, and
  only an APIService that skips verification (as Kueue's chart ships its own) can use it.
* **Who is asking.** Only the apiserver's front proxy may call: a request must present a client certificate
  signed by the CA published in ``kube-system/extension-apiserver-authentication`` and named in its allowed names.
  The user is the one that certificate's headers name. The ConfigMap is read again every minute (CA rotation).
* **May they.** Every read is authorized with a SubjectAccessReview (``get`` on the ``pendingworkloads``
  subresource); answers are cached for 10 s, like Kubernetes' delegating authorizer.
* **The data.** The leader answers from its caches; a standby lists Workloads and queues from the apiserver.
* **Connections** are kept for the next request (HTTP/1.1 keep-alive, 60 s idle), so the aggregator does not pay a
  TLS handshake per request; one is closed after its answer when the client asks, when a request carries a body, or
  when the certificate or the front-proxy configuration changed since its handshake.

Failures are visible: a request that cannot be authenticated or authorized is answered with a ``Status`` saying
why, and the reason is logged; a front-proxy configuration that cannot be read is logged each time it fails and
reported by :meth:`VisibilityServer.readiness` (which never fails the probe: the API is an extra).
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSAttribute, TLSStream
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from federation.kube.api import KubeApi
from federation.kube.errors import KubeError
from federation.kube.resources import CONFIG_MAPS, SUBJECT_ACCESS_REVIEWS
from manager.decisions.visibility import (
    FrontProxy,
    PendingRequest,
    QueueObjects,
    Reply,
    User,
    access_review,
    forbidden,
    front_proxy_user,
    pending_summary,
    route,
    status,
)

log = structlog.get_logger(__name__)

AUTHENTICATION_CONFIG_MAP = ("kube-system", "extension-apiserver-authentication")
RELOAD_SECONDS = 60.0
REVIEW_TTL_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 60.0
"""How long a connection waits for its next request (the aggregator reuses its connections for about 90 s)."""
_MAX_HEADER_LINE = 16384
_MAX_HEADERS = 200
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


def self_signed_certificate(directory: Path, *, names: tuple[str, ...] = ("localhost",)) -> tuple[Path, Path]:
    """A serving key and certificate (one year) written to ``directory``; returns their paths (cert, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kfed-manager-visibility")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


class VisibilityServer:
    def __init__(
        self, *, api: KubeApi, objects: Callable[[], Awaitable[QueueObjects]], cert_dir: Path | None = None
    ) -> None:
        self._api = api
        self._objects = objects
        self._cert_dir = cert_dir
        self._cert_problem = ""
        self._loaded: tuple[bytes, bytes] | None = None
        """The certificate and key last read from ``cert_dir``."""
        self._proxy: FrontProxy | None = None
        self._proxy_problem = "the front-proxy configuration was not read yet"
        self._context: ssl.SSLContext | None = None
        self._certificate: tuple[Path, Path] | None = None
        """The serving certificate and key, made when :meth:`serve` starts."""
        self._reviews: dict[str, tuple[float, bool, str]] = {}

    def readiness(self) -> tuple[bool, str]:
        """Readiness detail: passes always, says whether requests can be authenticated and which certificate the
        server presents."""
        return True, "; ".join(p for p in (self._cert_problem, self._proxy_problem) if p) or "serving"

    async def serve(
        self, *, host: str, port: int, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; reports the bound port through ``task_status`` (port 0 picks a free one)."""
        with tempfile.TemporaryDirectory(prefix="kfed-visibility-") as tmp:
            self._certificate = self_signed_certificate(Path(tmp))
            if self._cert_dir is not None:
                self._read_cert_dir(tmp=Path(tmp))
            await self._reload()
            listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
            bound = int(listener.extra(anyio.abc.SocketAttribute.local_port))
            log.info("visibility API serving", port=bound)
            task_status.started(bound)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._reload_forever)
                await listener.serve(self._handle)

    # -- front proxy ------------------------------------------------------------------------------------------

    async def _reload_forever(self) -> None:
        while True:
            await anyio.sleep(RELOAD_SECONDS)
            await self._reload()

    def _read_cert_dir(self, *, tmp: Path) -> bool:
        """Read ``cert_dir``'s pair; True when a new one is in use. It is copied to ``tmp`` (the context loads
        files, and a Secret volume swaps its files at any moment) and used only once it loads as a pair; until
        then the server keeps what it had (at start, the self-signed pair) and says why."""
        assert self._cert_dir is not None
        try:
            pair = ((self._cert_dir / "tls.crt").read_bytes(), (self._cert_dir / "tls.key").read_bytes())
        except OSError as err:
            return self._cert_failed(f"cannot read the serving certificate in {self._cert_dir}: {err}")
        if pair == self._loaded:
            return False
        candidate = (tmp / "candidate.crt", tmp / "candidate.key")
        candidate[0].write_bytes(pair[0])
        candidate[1].touch(mode=0o600)
        candidate[1].write_bytes(pair[1])
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(*candidate)
        except (ssl.SSLError, OSError) as err:
            return self._cert_failed(f"the serving certificate in {self._cert_dir} does not load: {err}")
        mounted = (tmp / "mounted.crt", tmp / "mounted.key")
        candidate[0].replace(mounted[0])
        candidate[1].replace(mounted[1])
        self._certificate = mounted
        self._loaded = pair
        self._cert_problem = ""
        log.info("visibility API serving certificate loaded", directory=str(self._cert_dir))
        return True

    def _cert_failed(self, problem: str) -> bool:
        if problem != self._cert_problem:
            log.error(
                "visibility API cannot use its serving certificate",
                reason=problem,
                serving="the previous certificate" if self._loaded else "a self-signed certificate",
            )
        self._cert_problem = problem
        return False

    async def reload(self) -> None:
        """Read the certificate directory and the front-proxy configuration now (after a new pair was written)."""
        await self._reload()

    async def _reload(self) -> None:
        renewed = False
        if self._cert_dir is not None and self._certificate is not None:
            renewed = self._read_cert_dir(tmp=self._certificate[0].parent)
        namespace, name = AUTHENTICATION_CONFIG_MAP
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
                config_map = await self._api.get(CONFIG_MAPS, name, namespace=namespace)
        except (KubeError, TimeoutError) as err:
            self._proxy_problem = f"cannot read ConfigMap {namespace}/{name}: {err}"
            log.warning("visibility API cannot authenticate requests", reason=self._proxy_problem)
            if self._context is None or renewed:
                self._context = self._tls_context(self._proxy)
            return
        proxy = FrontProxy.from_config_map(config_map.get("data") or {})
        if proxy is None:
            self._proxy_problem = (
                f"ConfigMap {namespace}/{name} has no requestheader-client-ca-file: the apiserver runs without a "
                "front proxy (--requestheader-client-ca-file), so it cannot reach aggregated APIs"
            )
            log.warning("visibility API cannot authenticate requests", reason=self._proxy_problem)
        elif proxy != self._proxy:
            log.info("visibility API front proxy configured", allowed_names=list(proxy.allowed_names))
        if proxy != self._proxy or self._context is None or renewed:
            self._context = self._tls_context(proxy)
        self._proxy = proxy
        if proxy is not None:
            self._proxy_problem = ""

    def _tls_context(self, proxy: FrontProxy | None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        assert self._certificate is not None, "serve() makes the certificate first"
        context.load_cert_chain(*self._certificate)
        context.set_alpn_protocols(["http/1.1"])
        if proxy is not None:
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cadata=proxy.client_ca)
        return context

    # -- one connection ---------------------------------------------------------------------------------------

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        context, proxy = self._context, self._proxy
        assert context is not None
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
                tls = await TLSStream.wrap(stream, server_side=True, ssl_context=context, standard_compatible=False)
        except (TimeoutError, ssl.SSLError, OSError, anyio.BrokenResourceError, anyio.EndOfStream) as err:
            log.debug("visibility API handshake failed", error=str(err))
            await stream.aclose()
            return
        async with tls:
            buffered = BufferedByteReceiveStream(tls)
            wait = REQUEST_TIMEOUT_SECONDS
            while True:
                try:
                    with anyio.fail_after(wait):
                        request = await _read_request(buffered)
                except (
                    TimeoutError,
                    ValueError,
                    anyio.EndOfStream,
                    anyio.IncompleteRead,
                    anyio.DelimiterNotFound,
                    anyio.BrokenResourceError,
                    ssl.SSLError,
                ):
                    return
                reply = await self._answer(tls, proxy, request.method, request.target, request.headers)
                # The connection stays open for the next request (the aggregator's, saving a handshake each) unless
                # the client says otherwise, or a body was sent (never read), or the certificate or front-proxy CA
                # changed since the handshake (the next connection is verified with the new ones).
                keep = request.keep_alive and context is self._context and proxy == self._proxy
                body = json.dumps(reply.body, separators=(",", ":")).encode()
                connection = "" if keep else "Connection: close\r\n"
                head = (
                    f"HTTP/1.1 {reply.code} {_REASONS.get(reply.code, 'Error')}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                    f"{connection}\r\n"
                )
                try:
                    await tls.send(head.encode() + body)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError):
                    return
                if not keep:
                    return
                wait = KEEP_ALIVE_SECONDS

    async def _answer(
        self,
        tls: TLSStream,
        proxy: FrontProxy | None,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
    ) -> Reply:
        if proxy is None:
            return status(401, "Unauthorized", f"kfed-manager cannot authenticate requests: {self._proxy_problem}")
        peer = tls.extra(TLSAttribute.peer_certificate, None)
        common_name = _common_name(peer)
        if common_name is None:
            return status(401, "Unauthorized", "a client certificate from the apiserver's front proxy is required")
        if not proxy.allows(common_name):
            log.warning("visibility API refused a client", common_name=common_name)
            return status(401, "Unauthorized", f"client certificate {common_name!r} is not an allowed front proxy")
        asked = route(method, target)
        if isinstance(asked, Reply):
            return asked
        user = front_proxy_user(proxy, headers)
        if user is None:
            return status(401, "Unauthorized", "the front proxy named no user")
        allowed, reason = await self._authorize(asked, user)
        if not allowed:
            log.info("visibility API request denied", user=user.name, path=target, reason=reason)
            return forbidden(asked, user.name, reason)
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
                objects = await self._objects()
        except (KubeError, TimeoutError) as err:
            log.warning("visibility API cannot read the queues", error=str(err))
            return status(503, "ServiceUnavailable", f"kfed-manager cannot read the queues: {err}")
        return pending_summary(
            asked, workloads=objects.workloads, local_queues=objects.local_queues, cluster_queues=objects.cluster_queues
        )

    async def _authorize(self, request: PendingRequest, user: User) -> tuple[bool, str]:
        review = access_review(request, user)
        cache_key = json.dumps(review["spec"], sort_keys=True)
        now = time.monotonic()
        cached = self._reviews.get(cache_key)
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
                answer = await self._api.create(SUBJECT_ACCESS_REVIEWS, review)
        except (KubeError, TimeoutError) as err:
            log.warning("visibility API cannot authorize requests", error=str(err))
            return False, f"kfed-manager could not ask the apiserver: {err}"
        result = answer.get("status") or {}
        verdict = bool(result.get("allowed")), str(result.get("reason") or result.get("evaluationError") or "")
        if len(self._reviews) > 10_000:
            self._reviews = {k: v for k, v in self._reviews.items() if v[0] > now}
        self._reviews[cache_key] = (now + REVIEW_TTL_SECONDS, *verdict)
        return verdict


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    keep_alive: bool
    """HTTP/1.1 without ``Connection: close`` and without a body (requests here are GETs; a body is never read)."""


async def _read_request(buffered: BufferedByteReceiveStream) -> _Request:
    line = (await buffered.receive_until(b"\r\n", _MAX_HEADER_LINE)).decode("latin-1")
    parts = line.split()
    if len(parts) < 2:
        raise ValueError("bad request line")
    headers: list[tuple[str, str]] = []
    while header := await buffered.receive_until(b"\r\n", _MAX_HEADER_LINE):
        if len(headers) >= _MAX_HEADERS:
            raise ValueError("too many headers")
        name, _, value = header.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    fields = {name.lower(): value.lower() for name, value in headers}
    keep_alive = (
        parts[2:3] == ["HTTP/1.1"]
        and "close" not in fields.get("connection", "")
        and fields.get("content-length", "0") == "0"
        and "transfer-encoding" not in fields
    )
    return _Request(parts[0], parts[1], headers, keep_alive)


def _common_name(peer: Any) -> str | None:
    """The subject CN of a verified peer certificate (``SSLObject.getpeercert()``), None without one."""
    if not peer:
        return None
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
