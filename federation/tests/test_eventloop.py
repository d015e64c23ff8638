"""kfed's controller processes run on uvloop (most of their CPU is the event loop's and TLS's work)."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel

from federation.eventloop import run_process


async def _loop_module(value: int) -> tuple[str, int]:
    await anyio.lowlevel.checkpoint()
    return type(asyncio.get_running_loop()).__module__, value


def test_run_process_runs_the_function_on_uvloop_and_returns_its_result() -> None:
    assert run_process(_loop_module, 7) == ("uvloop", 7)
