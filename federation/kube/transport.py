"""The byte-level seam between :class:`~federation.kube.api.KubeApi` and an HTTP client.

``KubeApi`` builds paths, encodes bodies, maps errors, retries, rate-limits and counts; a :class:`Transport` only
moves one request and its answer. The one implementation (``clients.ApiClientTransport``) wraps
kubernetes_asyncio's ApiClient. Contract: connection-level failures (refused, reset, timeout) raise
:class:`~federation.kube.errors.Unavailable`; HTTP error statuses are returned, not raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    """JSON-serialisable body (dict or list), or None."""
    content_type: str = JSON
    timeout: float | None = None
    """Whole-request timeout in seconds; for streams, the maximum silence between two lines."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None


class StreamResponse(Protocol):
    """An open streaming answer (a watch). ``lines`` ends at EOF and raises ``Unavailable`` on connection loss."""

    @property
    def status(self) -> int: ...

    async def read(self) -> bytes: ...

    def lines(self) -> AsyncIterator[bytes]: ...


class Transport(Protocol):
    async def send(self, request: Request) -> Response: ...

    def stream(self, request: Request) -> AbstractAsyncContextManager[StreamResponse]: ...

    async def aclose(self) -> None: ...
