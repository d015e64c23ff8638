"""A coalescing wake-up: many ``pull()`` calls between two waits become one pass of a level-triggered loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio


def spec_changed(event_type: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """True unless the event only changed status (same ``metadata.generation``): lets a controller ignore its own
    status writes on objects whose spec it reacts to."""
    if old is None or event_type == "DELETED":
        return True
    return (obj.get("metadata") or {}).get("generation") != (old.get("metadata") or {}).get("generation")


class Trigger:
    def __init__(self) -> None:
        self._event = anyio.Event()

    def pull(self, *_: object) -> None:
        """Request a pass (usable directly as a watch-cache handler)."""
        self._event.set()

    @property
    def pulled(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        """Wait for a request, then reset so requests made during the pass cause another one."""
        await self._event.wait()
        self._event = anyio.Event()
