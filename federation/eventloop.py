"""The event loop kfed-manager and kfed-agent run on: uvloop, through anyio's asyncio backend.

Most of both processes' CPU in a burst of Jobs is moving requests and watch events through the event loop and TLS
(asyncio's transports and its SSL protocol are Python code); uvloop does the same work in libuv and Cython. Same
asyncio semantics, so nothing else changes; the command-line tool keeps the default loop (it makes a few calls).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def run_process(func: Callable[..., Awaitable[T]], *args: object) -> T:
    """``anyio.run(func, *args)`` on uvloop: the entry point of a long-running controller process."""
    return anyio.run(func, *args, backend="asyncio", backend_options={"use_uvloop": True})
