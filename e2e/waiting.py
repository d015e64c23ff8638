"""Wait for a condition with a deadline, never a bare sleep; on timeout say what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T], *, until: Callable[[T], bool], timeout: float, what: str, interval: float = 0.25
) -> T:
    """Call ``probe`` until ``until(value)`` holds; return that value or fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen: {value!r}")
        time.sleep(interval)
