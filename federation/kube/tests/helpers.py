"""Condition waiting with deadlines (never bare sleeps) for async tests."""

from __future__ import annotations

from collections.abc import Callable

import anyio


async def eventually(predicate: Callable[[], bool], *, within: float = 5.0, what: str = "condition") -> None:
    """Wait until ``predicate()`` is true; fail the test after ``within`` seconds."""
    with anyio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110 - polling plain state owned by the code under test
            await anyio.sleep(0.005)
        return
    raise AssertionError(f"timed out after {within}s waiting for {what}")
