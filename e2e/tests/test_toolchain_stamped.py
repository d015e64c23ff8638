"""An on-demand toolchain build runs once per version: again only when its stamp or an output is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.toolchain.stamped import build_once


def test_builds_once_and_again_only_when_the_stamp_or_an_output_is_missing(tmp_path: Path) -> None:
    root, builds = tmp_path / "tool", []
    binary, stamp = root / "bin" / "tool", root / ".built"

    def build() -> None:
        builds.append(1)
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("binary")

    for _ in range(2):
        build_once(root, stamp=stamp, outputs=(binary,), stamp_text="v1\n", build=build)
    assert len(builds) == 1
    assert stamp.read_text() == "v1\n"
    binary.unlink()
    build_once(root, stamp=stamp, outputs=(binary,), stamp_text="v1\n", build=build)
    assert len(builds) == 2
    stamp.unlink()
    build_once(root, stamp=stamp, outputs=(binary,), stamp_text="v1\n", build=build)
    assert len(builds) == 3


def test_a_failed_build_writes_no_stamp(tmp_path: Path) -> None:
    root = tmp_path / "tool"

    def fail() -> None:
        raise RuntimeError("compiler failed")

    with pytest.raises(RuntimeError, match="compiler failed"):
        build_once(root, stamp=root / ".built", outputs=(), stamp_text="v1\n", build=fail)
    assert not (root / ".built").exists()
