"""Stock Kueue MultiKueue on the rig, for the compare bench (not built yet: no systems offered)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from e2e.bench.compare_bench import System
    from e2e.rig.federation import Federation


def systems(submit: Callable[[Federation, list[dict[str, Any]]], None]) -> dict[str, System]:
    return {}
