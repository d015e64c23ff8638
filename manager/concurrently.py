"""Run a few independent API calls at once and wait for all of them.

Each call to a busy apiserver waits; kfed-manager's steps that do not depend on each other (a Workload copy and a
Job copy, a Workload status write and its Job's unsuspend, the deletes of several copies) go together instead of one
after the other. Errors come out as a single call's would, so callers keep their ``except`` clauses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio


async def concurrently(*calls: Callable[[], Awaitable[Any]]) -> None:
    """Run the calls at once and wait for all; the first one's error (in call order) is raised as itself, not
    inside an exception group, so callers catch what a single call raises."""
    if len(calls) <= 1:
        for call in calls:
            await call()
        return
    errors: list[tuple[int, Exception]] = []

    async def one(index: int, call: Callable[[], Awaitable[Any]]) -> None:
        try:
            await call()
        except Exception as err:  # collected and raised below, unwrapped
            errors.append((index, err))

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(one, index, call)
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
