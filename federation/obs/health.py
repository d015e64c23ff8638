"""A minimal HTTP endpoint for /healthz, /readyz and /metrics, so probes need no web framework.

Readiness is a set of named checks (caches synced, remotes connected, leader or standby); each returns
``(ok, detail)``. /readyz answers 200 when all pass, else 503 listing what is not ready, like Kubernetes' own;
``/readyz?verbose`` lists every check with its detail (a check may pass and still report something degraded).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

ReadinessCheck = Callable[[], tuple[bool, str]]
Route = Callable[[], tuple[str, bytes]]
"""A read-only page: returns its content type and body (kfed-manager's dashboard)."""

_MAX_REQUEST_LINE = 8192


class HealthEndpoints:
    def __init__(self, *, metrics: Callable[[], bytes] | None = None) -> None:
        self._checks: dict[str, ReadinessCheck] = {}
        self._metrics = metrics
        self._routes: dict[str, Route] = {}

    def add_route(self, path: str, route: Route) -> None:
        self._routes[path] = route

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    def respond(self, path: str, *, verbose: bool = False) -> tuple[int, str, bytes]:
        """Status, content type and body for a GET of ``path`` (pure; the server below only does I/O)."""
        if path == "/healthz":
            return 200, "text/plain", b"ok"
        if path == "/readyz":
            results = {name: check() for name, check in self._checks.items()}
            failing = [f"[-]{name} failed: {detail}" for name, (ok, detail) in results.items() if not ok]
            if verbose:  # Kubernetes' ?verbose: every check, passing ones with their detail too
                lines = [
                    f"[+]{name} ok: {detail}" if ok else f"[-]{name} failed: {detail}"
                    for name, (ok, detail) in results.items()
                ]
                verdict = "readyz check failed" if failing else "readyz check passed"
                return (503 if failing else 200), "text/plain", ("\n".join([*lines, verdict])).encode()
            if failing:
                return 503, "text/plain", ("\n".join(failing) + "\nreadyz check failed").encode()
            return 200, "text/plain", b"ok"
        if path == "/metrics" and self._metrics is not None:
            return 200, "text/plain; version=0.0.4; charset=utf-8", self._metrics()
        route = self._routes.get(path)
        if route is not None:
            ctype, body = route()
            return 200, ctype, body
        return 404, "text/plain", b"not found"

    async def serve(
        self, *, host: str, port: int, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; reports the bound port through ``task_status`` (useful with port 0)."""
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        bound = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        task_status.started(bound)
        await listener.serve(self._handle)

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                line = await buffered.receive_until(b"\r\n", _MAX_REQUEST_LINE)
                while await buffered.receive_until(b"\r\n", _MAX_REQUEST_LINE):
                    pass
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError):
                return
            parts = line.decode("latin-1").split()
            path, _, query = (parts[1] if len(parts) >= 2 else "/").partition("?")
            verbose = "verbose" in query.split("&") or any(q.startswith("verbose=") for q in query.split("&"))
            status, ctype, body = (
                self.respond(path, verbose=verbose) if parts and parts[0] == "GET" else (405, "text/plain", b"")
            )
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
            head = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            try:
                await stream.send(head.encode() + body)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
