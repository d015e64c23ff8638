"""Best-effort Kubernetes Events for the objects users look at, sent off the reconcile path.

Controllers enqueue events without waiting; ``SENDERS`` tasks send them, several creates in flight at once (one
sender at a time kept up with ~20 Events/s on a busy apiserver and dropped a third of a 300-Job burst's Events). A
full queue or a failed create drops the event with a log line (the first of a run of full-queue drops, then every
hundredth) and counts it, never blocking a controller's progress (Events are informational, as in client-go's
recorder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import structlog

from federation.kube.api import KubeApi
from federation.kube.errors import KubeError

log = structlog.get_logger(__name__)

SENDERS = 4


class EventSink(Protocol):
    """Where a controller's Events go: :class:`EventRecorder`, or a stand-in in tests."""

    def emit(
        self, regarding: Mapping[str, Any], *, reason: str, note: str, action: str, event_type: str = "Normal"
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class _Pending:
    regarding: Mapping[str, Any]
    reason: str
    note: str
    action: str
    event_type: str


class EventRecorder:
    def __init__(
        self, api: KubeApi, *, controller: str, instance: str, max_buffer: int = 1000, senders: int = SENDERS
    ) -> None:
        self._api = api
        self._senders = senders
        self._controller = controller
        self._instance = instance
        self._send, self._receive = anyio.create_memory_object_stream[_Pending](max_buffer_size=max_buffer)
        self.sent = 0
        self.dropped = 0
        self._full_drops = 0

    def emit(
        self, regarding: Mapping[str, Any], *, reason: str, note: str, action: str, event_type: str = "Normal"
    ) -> None:
        try:
            self._send.send_nowait(_Pending(regarding, reason, note, action, event_type))
        except anyio.WouldBlock:
            self.dropped += 1
            self._full_drops += 1
            if self._full_drops % 100 == 1:
                log.warning("event.dropped", reason=reason, error="event queue full", dropped_so_far=self.dropped)
            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the recorder's owner has stopped
            self.dropped += 1
            log.info("event.dropped", reason=reason, error="event recorder stopped")
            return
        self._full_drops = 0

    async def run(self) -> None:
        async with self._receive, anyio.create_task_group() as tg:
            for _ in range(self._senders):
                tg.start_soon(self._send_from, self._receive.clone())

    async def _send_from(self, receive: anyio.abc.ObjectReceiveStream[_Pending]) -> None:
        async with receive:
            async for pending in receive:
                try:
                    await self._api.create_event(
                        pending.regarding,
                        reason=pending.reason,
                        note=pending.note,
                        action=pending.action,
                        reporting_controller=self._controller,
                        reporting_instance=self._instance,
                        event_type=pending.event_type,
                    )
                    self.sent += 1
                except (KubeError, ValueError) as exc:
                    self.dropped += 1
                    log.info("event.dropped", reason=pending.reason, error=str(exc)[:200])
