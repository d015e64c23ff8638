"""Clients built from kubeconfigs, one connection pool per cluster.

This is the only module that touches kubernetes_asyncio and aiohttp. It turns a kubeconfig (a file the operator
mounts, or YAML text the manager reads from a worker's Secret) into a :class:`~federation.kube.api.KubeApi`.
kubernetes_asyncio reads the kubeconfig and supplies the server, the TLS material and the credentials; requests go
over kfed's own connections (:mod:`federation.kube.connections`), or through the ApiClient's aiohttp session when a
proxy is named. Either way raw bytes go out and come back, so no generated model class is ever built and no body
walks through its serialisation helpers. :class:`ClusterClients` keeps many clusters open at once and closes every
client on shutdown.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
import anyio
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import kube_config
from kubernetes_asyncio.config.config_exception import ConfigException

from federation.kube import transport as tp
from federation.kube.api import KubeApi, RetryPolicy
from federation.kube.connections import Http1Transport
from federation.kube.errors import Unavailable
from federation.kube.jsoncodec import encode as encode_json
from federation.kube.kubeconfig import KubeconfigError, load_kubeconfig_text, parse_validated_kubeconfig
from federation.kube.ratelimit import DEFAULT_BURST, DEFAULT_QPS

USER_AGENT = "kfed/0.1"
_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Per-cluster client settings. Defaults are generous, like Kueue's 300 QPS / 500 burst."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    max_connections: int = 100
    """Connections to this cluster at most; every open watch holds one."""
    request_timeout: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    user_agent: str = USER_AGENT


_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class _AiohttpStream:
    def __init__(self, response: Any, *, description: str) -> None:
        self._response = response
        self._description = description

    @property
    def status(self) -> int:
        return int(self._response.status)

    async def read(self) -> bytes:
        try:
            return bytes(await self._response.read())
        except _CONNECTION_ERRORS as exc:
            raise Unavailable(f"{self._description}: {type(exc).__name__}: {exc}") from exc

    async def lines(self) -> AsyncIterator[bytes]:
        content = self._response.content
        while True:
            try:
                line = await content.readline()
            except _CONNECTION_ERRORS as exc:
                raise Unavailable(f"{self._description}: watch stream broken: {type(exc).__name__}: {exc}") from exc
            if not line:
                return
            yield bytes(line)


class ApiClientTransport:
    """:class:`~federation.kube.transport.Transport` over a kubernetes_asyncio ``ApiClient`` (which it owns)."""

    def __init__(self, api_client: Any, *, cluster: str = "") -> None:
        self.api_client = api_client
        self.cluster = cluster
        self._closed = False

    def _describe(self, request: tp.Request) -> str:
        who = f"cluster {self.cluster}: " if self.cluster else ""
        return f"{who}{request.method} {request.path}"

    async def _open(self, request: tp.Request, client_timeout: aiohttp.ClientTimeout) -> Any:
        """Send straight through the ApiClient's aiohttp session. ``ApiClient.call_api`` would walk the body and the
        parameters through ``sanitize_for_serialization`` and re-encode them on every call (a sixth of
        kfed-manager's CPU in a 300-Job burst); the ApiClient still supplies the host, TLS, proxy and the
        credentials (``update_params_for_auth``: a refreshed token when the kubeconfig has an exec/refresh hook)."""
        api_client = self.api_client
        rest = api_client.rest_client
        headers = {**api_client.default_headers, "Accept": tp.JSON, "Content-Type": request.content_type}
        if api_client.cookie:
            headers["Cookie"] = api_client.cookie
        url = api_client.configuration.host + request.path
        if request.query:
            url += "?" + urlencode(request.query)
        kwargs: dict[str, Any] = {"headers": headers, "timeout": client_timeout}
        if request.body is not None:
            kwargs["data"] = request.body if isinstance(request.body, bytes) else encode_json(request.body)
        if rest.proxy:
            kwargs["proxy"] = rest.proxy
        if rest.proxy_headers:
            kwargs["proxy_headers"] = rest.proxy_headers
        if rest.server_hostname:
            kwargs["server_hostname"] = rest.server_hostname
        try:
            await api_client.update_params_for_auth(headers, None, ["BearerToken"])
            return await rest.pool_manager.request(request.method, url, **kwargs)
        except _CONNECTION_ERRORS as exc:
            raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc

    async def send(self, request: tp.Request) -> tp.Response:
        timeout = aiohttp.ClientTimeout(total=request.timeout, connect=_CONNECT_TIMEOUT)
        response = await self._open(request, timeout)
        try:
            body = await response.read()  # reads to the end and returns the connection to the pool
        except BaseException as exc:
            response.close()  # a half-read connection must not go back to the pool
            if isinstance(exc, _CONNECTION_ERRORS):
                raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc
            raise
        return tp.Response(int(response.status), bytes(body), response.headers.get("Retry-After"))

    @asynccontextmanager
    async def stream(self, request: tp.Request) -> AsyncIterator[tp.StreamResponse]:
        # No total timeout (a watch lasts minutes); sock_read bounds the silence between chunks.
        timeout = aiohttp.ClientTimeout(
            total=None, connect=_CONNECT_TIMEOUT, sock_connect=_CONNECT_TIMEOUT, sock_read=request.timeout
        )
        response = await self._open(request, timeout)
        try:
            yield _AiohttpStream(response, description=self._describe(request))
        finally:
            # Closing (not releasing) drops the connection of an unfinished stream instead of draining it.
            response.close()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.api_client.close()


async def _configuration_from_dict(config: dict[str, Any], *, context: str | None) -> Any:
    configuration = Configuration()
    try:
        await kube_config.load_kube_config_from_dict(
            config_dict=config, context=context, client_configuration=configuration
        )
    except (ConfigException, KeyError, AssertionError, ValueError, TypeError) as exc:
        raise KubeconfigError([f"kubeconfig cannot be loaded: {exc or type(exc).__name__}"]) from exc
    return configuration


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _proxy_in_environment() -> bool:
    return any(os.environ.get(name) for name in _PROXY_VARIABLES)


def _skip_netrc(api_client: Any) -> None:
    """kubernetes_asyncio's aiohttp session trusts the environment, so aiohttp looks for ~/.netrc credentials on
    every request that carries no auth header (client certificates: every request of the rig, in-cluster tokens
    aside) — in a thread-pool hop each time: two thirds of the agent's CPU and a third of the manager's in a
    300-Job burst. A Kubernetes client never uses .netrc; the environment is still trusted when it names a proxy
    (client-go honours HTTPS_PROXY too)."""
    if _proxy_in_environment():
        return
    session = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


def _proxied(configuration: Any) -> bool:
    return bool(configuration.proxy) or _proxy_in_environment()


def _tls_context(configuration: Any) -> ssl.SSLContext:
    """The TLS settings a kubernetes_asyncio Configuration describes (CA, client certificate, verification)."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _transport(api_client: Any, *, cluster: str, max_connections: int) -> tp.Transport:
    """kfed's own connections (:mod:`federation.kube.connections`), with the ApiClient supplying the server, TLS
    material and credentials; through the ApiClient's aiohttp session when a proxy is named (the only case they do
    not cover)."""
    configuration = api_client.configuration
    if _proxied(configuration):
        return ApiClientTransport(api_client, cluster=cluster)
    url = urlsplit(configuration.host)
    secure = url.scheme == "https"
    if not url.hostname or url.scheme not in ("http", "https"):
        raise KubeconfigError([f"server {configuration.host!r} is not an http(s) URL"])

    async def headers() -> dict[str, str]:
        found = dict(api_client.default_headers)
        if api_client.cookie:
            found["Cookie"] = api_client.cookie
        if "BearerToken" in configuration.api_key:  # else there is nothing to add (client certificates)
            await api_client.update_params_for_auth(found, None, ["BearerToken"])
        return found

    return Http1Transport(
        host=url.hostname,
        port=url.port or (443 if secure else 80),
        netloc=url.netloc,
        path_prefix=url.path,
        ssl_context=_tls_context(configuration) if secure else None,
        server_hostname=configuration.tls_server_name,
        headers=headers,
        max_connections=max_connections,
        cluster=cluster,
        on_close=api_client.close,
    )


def _api_from_configuration(configuration: Any, *, cluster: str, options: ClientOptions) -> KubeApi:
    configuration.connection_pool_maxsize = options.max_connections
    try:
        api_client = ApiClient(configuration=configuration)
        api_client.user_agent = options.user_agent
        _skip_netrc(api_client)
        transport = _transport(api_client, cluster=cluster, max_connections=options.max_connections)
    except KubeconfigError:
        raise
    except (OSError, ValueError) as exc:  # ssl errors (bad CA / cert data) are OSErrors
        raise KubeconfigError([f"TLS material in kubeconfig is unusable: {exc}"]) from exc
    return KubeApi(
        transport,
        cluster=cluster,
        qps=options.qps,
        burst=options.burst,
        retry=options.retry,
        request_timeout=options.request_timeout,
    )


async def connect_kubeconfig_text(
    text: str,
    *,
    cluster: str,
    options: ClientOptions | None = None,
    validate: bool = True,
) -> KubeApi:
    """A client from kubeconfig YAML text (e.g. a Secret's ``kubeconfig`` key).

    With ``validate`` (the default) the kubeconfig must pass :func:`~federation.kube.kubeconfig.validate_kubeconfig`;
    raises :class:`KubeconfigError` listing every problem. Must be called inside the event loop.
    """
    config = parse_validated_kubeconfig(text) if validate else load_kubeconfig_text(text)
    configuration = await _configuration_from_dict(config, context=None)
    return _api_from_configuration(configuration, cluster=cluster, options=options or ClientOptions())


async def connect_kubeconfig_file(
    path: str | os.PathLike[str],
    *,
    cluster: str,
    options: ClientOptions | None = None,
    context: str | None = None,
    validate: bool = False,
) -> KubeApi:
    """A client from a kubeconfig file the operator controls (file references are resolved relative to it).

    Not validated by default: a mounted kubeconfig may legitimately point at mounted certificate files.
    """
    text = await anyio.Path(path).read_text()
    if validate:
        parse_validated_kubeconfig(text)
    configuration = Configuration()
    try:
        await kube_config.load_kube_config(
            config_file=os.fspath(path), context=context, client_configuration=configuration
        )
    except (ConfigException, KeyError, AssertionError, ValueError, TypeError) as exc:
        raise KubeconfigError([f"kubeconfig {os.fspath(path)} cannot be loaded: {exc or type(exc).__name__}"]) from exc
    return _api_from_configuration(configuration, cluster=cluster, options=options or ClientOptions())


async def connect_in_cluster(*, cluster: str, options: ClientOptions | None = None) -> KubeApi:
    """A client from the pod's service account (how kfed-manager and kfed-agent reach their own apiserver)."""
    from kubernetes_asyncio.config import incluster_config

    configuration = Configuration()
    incluster_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return _api_from_configuration(configuration, cluster=cluster, options=options or ClientOptions())


class ClusterClients:
    """Open clients for many clusters, each with its own connection pool and rate limiter.

    Use as ``async with ClusterClients() as clients:``; leaving the block closes every session.
    """

    def __init__(self, *, options: ClientOptions | None = None) -> None:
        self.options = options or ClientOptions()
        self._apis: dict[str, KubeApi] = {}

    async def __aenter__(self) -> ClusterClients:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __contains__(self, cluster: object) -> bool:
        return cluster in self._apis

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._apis))

    def __len__(self) -> int:
        return len(self._apis)

    def get(self, cluster: str) -> KubeApi:
        return self._apis[cluster]

    def items(self) -> list[tuple[str, KubeApi]]:
        return list(self._apis.items())

    async def _put(self, cluster: str, api: KubeApi) -> KubeApi:
        old = self._apis.pop(cluster, None)
        self._apis[cluster] = api
        if old is not None:
            await old.aclose()
        return api

    def add(self, cluster: str, api: KubeApi) -> None:
        """Register an already-built client; a client it replaces is not closed."""
        self._apis[cluster] = api

    async def add_from_text(
        self, cluster: str, text: str, *, options: ClientOptions | None = None, validate: bool = True
    ) -> KubeApi:
        """Connect (or reconnect, closing the old client) from kubeconfig text; raises :class:`KubeconfigError`."""
        api = await connect_kubeconfig_text(text, cluster=cluster, options=options or self.options, validate=validate)
        return await self._put(cluster, api)

    async def add_from_file(
        self, cluster: str, path: str | os.PathLike[str], *, options: ClientOptions | None = None
    ) -> KubeApi:
        api = await connect_kubeconfig_file(path, cluster=cluster, options=options or self.options)
        return await self._put(cluster, api)

    async def remove(self, cluster: str) -> None:
        api = self._apis.pop(cluster, None)
        if api is not None:
            await api.aclose()

    async def aclose(self) -> None:
        apis, self._apis = list(self._apis.values()), {}
        for api in apis:
            await api.aclose()
