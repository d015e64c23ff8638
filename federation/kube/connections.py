"""kfed's own keep-alive HTTP/1.1 connections to an apiserver: the :class:`~federation.kube.transport.Transport`
that :class:`~federation.kube.api.KubeApi` sends through.

Why not aiohttp's client session: against a real apiserver, one PATCH through it costs kfed's process about 0.9 ms
of CPU, and the same exchange on a bare asyncio connection about a third of that. kfed-manager sends about ten
requests per Job, so the session's bookkeeping (per-request timers, header multidicts, cookie jars, tracing hooks)
was a large share of its CPU in a burst. This transport does only what kfed's calls need:

- at most ``max_connections`` connections per cluster, kept alive and reused; every open watch holds one;
- TLS as the kubeconfig says (CA, client certificate, server name), through the running event loop's own TLS;
- the request headers, the bearer token included, from a callable the client module supplies for every request, so
  kubernetes_asyncio's token refresh (exec plugins, expiring tokens) keeps working;
- bodies framed by ``Content-Length`` or chunked (lists, and watches: one event after another for minutes);
- a whole-request timeout, and for a watch the longest silence allowed between two chunks.

It sends no ``Accept-Encoding`` (apiservers then answer uncompressed), never pipelines, and speaks neither HTTP/2
nor proxies: :mod:`federation.kube.clients` keeps aiohttp's session when the kubeconfig or the environment names a
proxy. As the Transport contract says, a connection that fails, is refused, closes early or times out raises
:class:`~federation.kube.errors.Unavailable`; HTTP error statuses are returned.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import cast
from urllib.parse import urlencode

import anyio

from federation.kube import transport as tp
from federation.kube.errors import Unavailable
from federation.kube.http1 import ProtocolError, ResponseReader
from federation.kube.jsoncodec import encode as encode_json

CONNECT_TIMEOUT = 10.0
PAUSE_ABOVE = 4 * 1024 * 1024
"""Stop reading a connection while this many decoded body bytes wait for the caller (a slow watch consumer)."""

Headers = Callable[[], Awaitable[dict[str, str]]]
"""Returns the headers every request carries (User-Agent, Authorization...), fresh for each request."""

_FAILURES = (OSError, ProtocolError, TimeoutError)  # ssl.SSLError is an OSError


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: it feeds what arrives to the current response's reader and wakes its waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader: ResponseReader | None = None
        self.failure: BaseException | None = None
        self.closed = False
        self._waiter: asyncio.Future[bool] | None = None
        self._paused = False
        self._pause_above: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's TLS transport is not a subclass

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        try:
            if reader is None:
                raise ProtocolError("data arrived on an idle connection")
            reader.feed(data)
        except ProtocolError as exc:
            self.failure = exc
            self.close()
        else:
            limit = self._pause_above
            if limit is not None and reader.buffered > limit and not self._paused and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        return None  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        reader = self.reader
        if reader is not None and self.failure is None:
            try:
                reader.feed_eof()
            except ProtocolError as eof_error:
                self.failure = exc or eof_error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    async def wait(self, within: float | None) -> bool:
        """Until more bytes arrive or the connection ends (True), or ``within`` seconds pass first (False). A loop
        timer, not a cancel scope: entering and leaving anyio's scopes was a tenth of a request's CPU."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(within, _expire, waiter) if within is not None else None
        try:
            return await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def begin(self, method: str, data: bytes, *, pause_above: int | None = None) -> ResponseReader:
        """Send one request; the returned reader collects its answer. With ``pause_above``, reading stops while that
        many body bytes wait to be taken (a stream's consumer takes them as they come; a plain request's caller takes
        the whole body at the end, so it must never pause)."""
        reader = ResponseReader(method=method)
        self.reader = reader
        self._pause_above = pause_above
        assert self.transport is not None
        self.transport.write(data)
        return reader

    def taken(self) -> None:
        """The caller took the buffered body: read again if reading was paused."""
        limit = self._pause_above
        if self._paused and limit is not None and self.reader is not None and self.reader.buffered < limit // 2:
            self._paused = False
            if self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def broken(self) -> BaseException | None:
        """Why no more of the current response can arrive (None while it still can)."""
        if self.failure is not None:
            return self.failure
        if self.closed:
            return ConnectionResetError("connection closed")
        return None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Stream:
    """:class:`~federation.kube.transport.StreamResponse` over a connection that stays with one watch."""

    def __init__(self, conn: _Connection, reader: ResponseReader, *, silence: float | None, description: str) -> None:
        self._conn = conn
        self._reader = reader
        self._silence = silence
        self._description = description

    @property
    def status(self) -> int:
        assert self._reader.head is not None
        return self._reader.head.status

    async def wait_head(self) -> None:
        while self._reader.head is None:
            await self._more()

    async def _more(self) -> None:
        failure = self._conn.broken()
        if failure is not None:
            raise Unavailable(f"{self._description}: watch stream broken: {type(failure).__name__}: {failure}")
        if not await self._conn.wait(self._silence or None):
            raise Unavailable(f"{self._description}: no data for {self._silence:g} s")

    async def read(self) -> bytes:
        parts = []
        while True:
            parts.append(self._reader.take_body())
            self._conn.taken()
            if self._reader.done:
                return b"".join(parts)
            await self._more()

    async def lines(self) -> AsyncIterator[bytes]:
        pending = b""
        while True:
            data = self._reader.take_body()
            self._conn.taken()
            if data:
                pending = pending + data if pending else data
                start = 0
                while (end := pending.find(b"\n", start)) >= 0:
                    yield pending[start : end + 1]
                    start = end + 1
                pending = pending[start:]
            if self._reader.done:
                if pending:
                    yield pending
                return
            await self._more()


class Http1Transport:
    """Keep-alive HTTP/1.1 connections to one apiserver (see the module's docstring)."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        netloc: str,
        path_prefix: str = "",
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        headers: Headers,
        max_connections: int = 100,
        cluster: str = "",
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._netloc = netloc
        self._prefix = path_prefix.rstrip("/")
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._headers = headers
        self._slots = anyio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._cluster = cluster
        self._on_close = on_close
        self._closed = False
        self.opened = 0
        """Connections made so far (a pool that reuses them makes few)."""

    def _describe(self, request: tp.Request) -> str:
        who = f"cluster {self._cluster}: " if self._cluster else ""
        return f"{who}{request.method} {request.path}"

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        with anyio.fail_after(CONNECT_TIMEOUT):
            _, conn = await loop.create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=(self._server_hostname or self._host) if self._ssl is not None else None,
            )
        self.opened += 1
        return conn

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise Unavailable(f"cluster {self._cluster}: client closed")
        try:
            self._slots.acquire_nowait()  # no checkpoint (an extra turn of the loop) while a slot is free
        except anyio.WouldBlock:
            await self._slots.acquire()
        try:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    break
            else:
                conn = await self._connect()
            self._busy.add(conn)
            return conn
        except BaseException:
            self._slots.release()
            raise

    def _release(self, conn: _Connection, *, reusable: bool) -> None:
        self._slots.release()
        self._busy.discard(conn)
        conn.reader = None
        if reusable and not conn.closed and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()

    async def _encode(self, request: tp.Request) -> bytes:
        headers = await self._headers()
        path = self._prefix + request.path
        if request.query:
            path += "?" + urlencode(request.query)
        body = request.body
        data = b"" if body is None else body if isinstance(body, bytes) else encode_json(body)
        lines = [f"{request.method} {path} HTTP/1.1", f"Host: {self._netloc}", f"Accept: {tp.JSON}"]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        if body is not None:
            lines.append(f"Content-Type: {request.content_type}")
        lines.append(f"Content-Length: {len(data)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data

    async def send(self, request: tp.Request) -> tp.Response:
        data = await self._encode(request)
        reusable = False
        try:
            conn = await self._acquire()
        except _FAILURES as exc:
            raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + request.timeout if request.timeout else None
            reader = conn.begin(request.method, data)
            while not reader.done:
                failure = conn.broken()
                if failure is not None:
                    raise Unavailable(f"{self._describe(request)}: {type(failure).__name__}: {failure}")
                if not await conn.wait(None if deadline is None else max(0.0, deadline - loop.time())):
                    raise Unavailable(f"{self._describe(request)}: no answer within {request.timeout:g} s")
            assert reader.head is not None
            reusable = reader.keep_alive
            return tp.Response(reader.head.status, reader.take_body(), reader.head.retry_after)
        except _FAILURES as exc:
            raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._release(conn, reusable=reusable)

    @asynccontextmanager
    async def stream(self, request: tp.Request) -> AsyncIterator[tp.StreamResponse]:
        data = await self._encode(request)
        try:
            conn = await self._acquire()
        except _FAILURES as exc:
            raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc
        reusable = False
        try:
            try:
                reader = conn.begin(request.method, data, pause_above=PAUSE_ABOVE)
                stream = _Stream(conn, reader, silence=request.timeout, description=self._describe(request))
                await stream.wait_head()
            except _FAILURES as exc:
                raise Unavailable(f"{self._describe(request)}: {type(exc).__name__}: {exc}") from exc
            yield stream
            reusable = reader.done and reader.keep_alive
        finally:
            self._release(conn, reusable=reusable)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in [*idle, *self._busy]:  # a request or watch still under way ends Unavailable, as on a dropped link
            conn.close()
        if self._on_close is not None:
            with anyio.CancelScope(shield=True):
                await self._on_close()
