"""KueueViz's backend at Kueue's pinned version, built on demand for ``make test-kueueviz`` (never by ``make test``).

The backend (``cmd/kueueviz/backend``) is a Go module of its own, named ``kueueviz``: Go's module zip of
``sigs.k8s.io/kueue@VERSION`` leaves nested modules out, so the proxy has only KueueViz's README and examples, and
``kueueviz`` is no fetchable module path. Its source comes from Kueue's Git tag instead: ``KUEUE_GIT`` names the
repository (a URL, or a local clone or mirror that has the tag; default GitHub). Its dependencies come from the Go
module proxy as usual. Cached per version: about 10 min cold on 2 busy cores, seconds once Go's build cache is warm.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from e2e.toolchain import pins
from e2e.toolchain.build import ToolchainError, _run, _say, cache_root, check_go
from e2e.toolchain.stamped import build_once

DEFAULT_GIT = "https://github.com/kubernetes-sigs/kueue.git"
BACKEND = "cmd/kueueviz/backend"


def kueueviz_dir() -> Path:
    return cache_root() / f"kueueviz-{pins.KUEUE}_r{pins.RECIPE}"


def _fetch_source(repository: str, into: Path) -> None:
    """Kueue's ``cmd/kueueviz/backend`` at the pinned tag, into ``into``."""
    git = shutil.which("git")
    if git is None:
        raise ToolchainError("git is required to fetch KueueViz's source (its backend is not in Kueue's Go module)")
    if Path(repository).is_dir():
        archive = subprocess.run(
            [git, "-C", repository, "archive", "--format=tar", pins.KUEUE, BACKEND], capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise ToolchainError(f"{repository} has no {pins.KUEUE}:{BACKEND}: {archive.stderr.decode()[-500:]}")
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
        return
    with tempfile.TemporaryDirectory(prefix="kfed-kueue-git-") as tmp:
        clone = subprocess.run(
            [git, "clone", "--quiet", "--depth", "1", "--branch", pins.KUEUE, repository, tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        if clone.returncode != 0:
            raise ToolchainError(
                f"cannot clone {repository} at {pins.KUEUE} for KueueViz's backend: {clone.stderr[-500:]}\n"
                "Set KUEUE_GIT to a local clone or mirror of kubernetes-sigs/kueue that has the tag."
            )
        shutil.copytree(Path(tmp) / BACKEND, into / BACKEND)


def ensure_kueueviz() -> Path:
    """The KueueViz backend binary, built once per pinned version (under a lock)."""
    root = kueueviz_dir()
    binary, stamp = root / "bin" / "kueueviz-backend", root / ".built"

    def build() -> None:
        go = check_go()
        started = time.monotonic()
        repository = os.environ.get("KUEUE_GIT", DEFAULT_GIT)
        _say(f"building KueueViz's backend {pins.KUEUE} from {repository} (make test-kueueviz only)")
        src = root / "src"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        _fetch_source(repository, src)
        staging = root / "staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        _run(
            [go, "build", "-ldflags", "-s -w", "-o", str(staging / "kueueviz-backend"), "."],
            cwd=src / BACKEND,
            label="kueueviz backend: compiling",
        )
        (root / "bin").mkdir(exist_ok=True)
        os.replace(staging / "kueueviz-backend", binary)
        shutil.rmtree(staging, ignore_errors=True)
        _say(f"built KueueViz's backend in {time.monotonic() - started:.0f}s: {binary}")

    build_once(root, stamp=stamp, outputs=(binary,), stamp_text=pins.KUEUE + "\n", build=build)
    return binary


if __name__ == "__main__":
    print(ensure_kueueviz())
