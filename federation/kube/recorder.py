"""Best-effort Kubernetes Events for the objects users look at, sent off the reconcile path.

Controllers enqueue events without waiting; one task sends them. A full queue or a failed create drops the event
with a log line, never a controller's progress (Events are informational, as in client-go's recorder).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from federation.kube.api import KubeApi
from federation.kube.errors import KubeError

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class _Pending:
    regarding: Mapping[str, Any]
    reason: str
    note: str
    action: str
    event_type: str


class EventRecorder:
    def __init__(self, api: KubeApi, *, controller: str, instance: str, max_buffer: int = 1000) -> None:
        self._api = api
        self._controller = controller
        self._instance = instance
        self._send, self._receive = anyio.create_memory_object_stream[_Pending](max_buffer_size=max_buffer)
        self.sent = 0
        self.dropped = 0

    def emit(
        self, regarding: Mapping[str, Any], *, reason: str, note: str, action: str, event_type: str = "Normal"
    ) -> None:
        try:
            self._send.send_nowait(_Pending(regarding, reason, note, action, event_type))
        except anyio.WouldBlock:
            self.dropped += 1
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the recorder's owner has stopped
            self.dropped += 1
            log.info("event.dropped", reason=reason, error="event recorder stopped")

    async def run(self) -> None:
        async with self._receive:
            async for pending in self._receive:
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
