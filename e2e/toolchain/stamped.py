"""Build-once-per-version for the on-demand toolchain builds (stock Kueue, its equal-QPS variant, KueueViz).

Each is built into its own cache directory, at most one build at a time per directory (``.lock``: a second process
asking for it waits, then finds it built), and counts as built only once a stamp file says so and its outputs are
there; a build that failed halfway writes no stamp and is done again next time.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path


def build_once(
    root: Path, *, stamp: Path, outputs: tuple[Path, ...], stamp_text: str, build: Callable[[], None]
) -> None:
    """Run ``build`` under ``root``'s lock unless ``stamp`` and all ``outputs`` exist; then write ``stamp_text``."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and all(path.exists() for path in outputs):
            return
        build()
        stamp.write_text(stamp_text)
