"""The event loop kfed-manager and kfed-agent run on: uvloop, through anyio's asyncio backend.

Most of both processes' CPU in a burst of Jobs is moving requests and watch events through the event loop and TLS
(asyncio's transports and its SSL protocol are Python code); uvloop does the same work in libuv and Cython. Same
asyncio semantics, so nothing else changes; the command-line tool keeps the default loop (it makes a few calls).
An environment without uvloop (an install that predates the dependency) runs on asyncio's own loop and says so.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import structlog

T = TypeVar("T")

log = structlog.get_logger(__name__)


def run_process(func: Callable[..., Awaitable[T]], *args: object) -> T:
    """``anyio.run(func, *args)`` on uvloop: the entry point of a long-running controller process."""
    if importlib.util.find_spec("uvloop") is None:
        log.warning("uvloop is not installed; running on asyncio's default event loop (more CPU per request)")
        return anyio.run(func, *args, backend="asyncio")
    return anyio.run(func, *args, backend="asyncio", backend_options={"use_uvloop": True})
