"""Stock Kueue (the MultiKueue the compare bench measures kfed against), built from its Go module on demand.

Only ``make bench BENCH=compare`` and ``make test-interop`` (the ``interop`` tests) ask for it, so ``make toolchain``
and ``make test`` never pay its build (7 min cold on CI, 15-20 min on a loaded 2-core machine; cached by version).
``go install sigs.k8s.io/kueue/cmd/kueue@VERSION`` needs the module proxy's version-list endpoint, which is
refused here; the exact version downloads fine, so the module is copied to a writable directory and built in
place with its own go.mod. Its CRDs come from the same module (``config/components/crd/bases``), and so does
kueuectl, Kueue's kubectl plugin (the interop test of kfed's visibility API runs it).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from e2e.toolchain import pins
from e2e.toolchain.build import ToolchainError, _run, _say, cache_root, check_go, go_mod_download
from e2e.toolchain.stamped import build_once

MODULE = "sigs.k8s.io/kueue"


def kueue_dir() -> Path:
    return cache_root() / f"kueue-{pins.KUEUE}_r{pins.RECIPE}"


def _download(go: str, cwd: Path) -> Path:
    """The pinned Kueue module's directory in Go's module cache (read-only there)."""
    return Path(go_mod_download(go, MODULE, pins.KUEUE, cwd=cwd)["Dir"])


def _make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR | (stat.S_IXUSR if path.is_dir() else 0))


def _go_build(go: str, *, src: Path, package: str, binary: Path, label: str, verbose: bool = False) -> None:
    """``go build`` one command of the module copy ``src`` into ``binary``, through a staging directory next to
    it, so an interrupted build never leaves a partial binary behind."""
    staging = binary.parent.parent / f"staging-{binary.name}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    flags = ["-v"] if verbose else []
    _run(
        [go, "build", *flags, "-trimpath", "-ldflags", "-s -w", "-o", str(staging / binary.name), package],
        cwd=src,
        label=label,
    )
    binary.parent.mkdir(exist_ok=True)
    os.replace(staging / binary.name, binary)
    shutil.rmtree(staging, ignore_errors=True)


def ensure_kueue() -> tuple[Path, Path]:
    """(the kueue binary, its CRD directory), building them once per pinned version (under a lock)."""
    root = kueue_dir()
    binary, crds, stamp = root / "bin" / "kueue", root / "crds", root / ".built"

    def build() -> None:
        go = check_go()
        started = time.monotonic()
        _say(f"building stock Kueue {pins.KUEUE} (for the compare bench and the interop tests; 7-20 min)")
        src = root / "src"
        module_dir = _download(go, root)
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(module_dir, src)
        _make_writable(src)
        _go_build(go, src=src, package="./cmd/kueue", binary=binary, label="kueue: compiling", verbose=True)
        shutil.rmtree(crds, ignore_errors=True)
        shutil.copytree(src / "config" / "components" / "crd" / "bases", crds)
        _say(f"built kueue in {time.monotonic() - started:.0f}s: {binary}")

    build_once(root, stamp=stamp, outputs=(binary, crds), stamp_text=pins.KUEUE + "\n", build=build)
    return binary, crds


REMOTE_CLIENT_FILE = "pkg/controller/admissionchecks/multikueue/multikueuecluster.go"
REMOTE_CLIENT_ORIGINAL = """\treturn clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
}"""


def remote_qps_patch(qps: float, burst: int) -> str:
    """The one change to Kueue's source for the equal-QPS variant: its MultiKueue clients to the workers (client-go's
    5 QPS / burst 10, which v0.19.1 has no setting for) get ``qps``/``burst``, like kfed's."""
    return (
        "\tconfig, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)\n"
        "\tif err == nil { // kfed compare bench: equal client limits\n"
        f"\t\tconfig.QPS, config.Burst = {qps}, {burst}\n"
        "\t}\n"
        "\treturn config, err\n}"
    )


def ensure_kueue_remote_qps(qps: float, burst: int) -> Path:
    """Kueue built with ``remote_qps_patch`` (for the compare bench's ``kueue-equal-qps`` only), next to the stock
    binary; Go's build cache keeps this to recompiling one package and linking (about a minute)."""
    _stock, _crds = ensure_kueue()
    root = kueue_dir()
    binary, stamp = root / "bin" / f"kueue-remote-qps-{qps:g}-{burst}", root / f".built-remote-qps-{qps:g}-{burst}"

    def build() -> None:
        go = check_go()
        started = time.monotonic()
        _say(f"building Kueue {pins.KUEUE} with its worker clients at {qps:g} QPS / burst {burst} (compare bench)")
        src = root / "src-remote-qps"
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(root / "src", src)
        target = src / REMOTE_CLIENT_FILE
        text = target.read_text()
        if text.count(REMOTE_CLIENT_ORIGINAL) != 1:
            raise ToolchainError(f"{REMOTE_CLIENT_FILE} of {pins.KUEUE} does not have the expected client setup")
        target.write_text(text.replace(REMOTE_CLIENT_ORIGINAL, remote_qps_patch(qps, burst)))
        _go_build(go, src=src, package="./cmd/kueue", binary=binary, label="kueue (equal QPS): compiling")
        shutil.rmtree(src, ignore_errors=True)
        _say(f"built it in {time.monotonic() - started:.0f}s: {binary}")

    build_once(root, stamp=stamp, outputs=(binary,), stamp_text=f"{pins.KUEUE} {qps:g} {burst}\n", build=build)
    return binary


def ensure_kueuectl() -> Path:
    """Kueue's kubectl plugin, kueuectl, from the same module copy as the stock binary (the interop test of kfed's
    visibility API runs it); Go's build cache shares Kueue's packages, so this adds about two minutes once."""
    _stock, _crds = ensure_kueue()
    root = kueue_dir()
    binary, stamp = root / "bin" / "kueuectl", root / ".built-kueuectl"

    def build() -> None:
        go = check_go()
        started = time.monotonic()
        _say(f"building kueuectl {pins.KUEUE} (for the interop test of the visibility API; about 2 min)")
        _go_build(go, src=root / "src", package="./cmd/kueuectl", binary=binary, label="kueuectl: compiling")
        _say(f"built kueuectl in {time.monotonic() - started:.0f}s: {binary}")

    build_once(root, stamp=stamp, outputs=(binary,), stamp_text=pins.KUEUE + "\n", build=build)
    return binary


def kueue_module_file(relative: str) -> Path:
    """A file of Kueue's Go module at the pinned version, exactly as shipped: the module is downloaded once into
    Go's module cache (read-only there); nothing is built."""
    go = check_go()
    with tempfile.TemporaryDirectory(prefix="kfed-kueue-module-") as cwd:
        path = _download(go, Path(cwd)) / relative
    if not path.is_file():
        raise ToolchainError(f"{MODULE}@{pins.KUEUE} has no {relative}")
    return path


if __name__ == "__main__":
    print(ensure_kueue()[0])
    print(ensure_kueuectl())
