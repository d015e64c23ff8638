"""Build the pinned binaries from Go modules into a versioned cache directory, once.

Each component gets a tiny wrapper Go module that requires the real module at its pinned tag. Kubernetes needs
more: its own go.mod points every staging module (k8s.io/api, k8s.io/client-go, ...) at ./staging/src, which
does not exist outside its repository, so the wrapper replaces each of them with its published v0.x release.
That list is read from the tag's go.mod, never typed by hand.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from e2e.toolchain import pins

_ENV_DIR = "KFED_TOOLCHAIN_DIR"


class ToolchainError(RuntimeError):
    """A prerequisite is missing or a build failed; the message says what to do."""


def cache_root() -> Path:
    explicit = os.environ.get(_ENV_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kfed" / "toolchain"


def versioned_dir() -> Path:
    key = f"k8s-{pins.KUBERNETES}_etcd-{pins.ETCD}_kwok-{pins.KWOK}_helm-{pins.HELM}_r{pins.RECIPE}"
    return cache_root() / key


def bin_dir() -> Path:
    """Where the binaries are (or will be) for the current pins."""
    return versioned_dir() / "bin"


def _say(message: str) -> None:
    print(f"[toolchain] {message}", flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    env["GOTOOLCHAIN"] = "local"
    env["GOFLAGS"] = "-mod=mod"
    return env


def check_go() -> str:
    """Fail fast, naming the prerequisite, when Go is missing or too old."""
    go = shutil.which("go")
    if go is None:
        raise ToolchainError(
            "Go is required to build the Kubernetes toolchain but `go` is not on PATH.\n"
            f"Install Go {pins.MIN_GO[0]}.{pins.MIN_GO[1]} or newer (https://go.dev/doc/install, or your "
            "distribution's golang package) and run `make toolchain` again."
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)", out)
    if match is None or (int(match[1]), int(match[2])) < pins.MIN_GO:
        raise ToolchainError(
            f"Go {pins.MIN_GO[0]}.{pins.MIN_GO[1]}+ is required (Kubernetes {pins.KUBERNETES} needs it); "
            f"found {out or 'an unknown version'} at {go}. Install a newer Go and run `make toolchain` again."
        )
    return go


def _run(cmd: list[str], *, cwd: Path, label: str) -> None:
    """Run a Go command, printing a progress line every 20 s; raise with the output's tail on failure."""
    started = time.monotonic()
    lines: list[str] = []
    proc = subprocess.Popen(cmd, cwd=cwd, env=_go_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(20):
            _say(f"  {label}: {time.monotonic() - started:.0f}s, {len(lines)} packages/lines so far")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
    code = proc.wait()
    stop.set()
    if code != 0:
        tail = "\n".join(lines[-40:])
        raise ToolchainError(f"{label} failed (exit {code}): {' '.join(cmd)}\n{tail}")


def go_mod_download(go: str, module: str, version: str, *, cwd: Path) -> dict[str, str]:
    """``go mod download -json module@version``: the module's ``Dir``, ``GoMod``... in the module cache (one exact
    version, which the module proxy serves even where its version-list endpoint is refused)."""
    out = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        cwd=cwd,
        env=_go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise ToolchainError(f"cannot download {module}@{version}: {out.stderr or out.stdout}")
    info: dict[str, str] = json.loads(out.stdout)
    return info


def _module_gomod(go: str, module: str, version: str, *, cwd: Path) -> str:
    return Path(go_mod_download(go, module, version, cwd=cwd)["GoMod"]).read_text()


def staging_replacements(gomod: str, kube_version: str) -> list[tuple[str, str]]:
    """Every `k8s.io/X => ./staging/src/k8s.io/X` of Kubernetes' go.mod, mapped to the published v0.x tag."""
    staging_version = "v0." + kube_version.lstrip("v").split(".", 1)[1]
    found = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/src/", gomod, flags=re.MULTILINE)
    return [(module, staging_version) for module in sorted(set(found))]


def go_binary_name(package: str) -> str:
    """The file name `go build -o DIR/` gives a main package: its last element, skipping a /vN suffix."""
    parts = package.split("/")
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        return parts[-2]
    return parts[-1]


def _write_wrapper(go: str, comp: pins.Component, src: Path) -> None:
    src.mkdir(parents=True, exist_ok=True)
    lines = [f"module kfed.local/toolchain/{comp.name}", "", "go 1.26", "", f"require {comp.module} {comp.version}"]
    if comp.name == "kubernetes":
        gomod = _module_gomod(go, comp.module, comp.version, cwd=src)
        replacements = staging_replacements(gomod, comp.version)
        if not replacements:
            raise ToolchainError(f"found no staging modules in {comp.module}@{comp.version}'s go.mod")
        lines += ["", "replace ("]
        lines += [f"\t{module} => {module} {version}" for module, version in replacements]
        lines += [")"]
    (src / "go.mod").write_text("\n".join(lines) + "\n")
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in comp.packages)
    (src / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")


def _build_component(go: str, comp: pins.Component, root: Path) -> None:
    bins = root / "bin"
    stamp = bins / f".{comp.name}.built"
    if (
        stamp.exists()
        and stamp.read_text().strip() == comp.version
        and all((bins / b).exists() for b in comp.binary_names)
    ):
        return
    src = root / "src" / comp.name
    started = time.monotonic()
    _say(f"building {comp.name} {comp.version} ({', '.join(comp.binary_names)})")
    _write_wrapper(go, comp, src)
    _run([go, "mod", "tidy"], cwd=src, label=f"{comp.name}: resolving modules")
    staging = root / "staging" / comp.name
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    ldflags = " ".join(("-s", "-w", *comp.ldflags))
    _run(
        [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(staging) + "/", *comp.packages],
        cwd=src,
        label=f"{comp.name}: compiling",
    )
    bins.mkdir(parents=True, exist_ok=True)
    for pkg, name in zip(comp.packages, comp.binary_names, strict=True):
        built = staging / go_binary_name(pkg)
        if not built.exists():
            raise ToolchainError(f"{comp.name}: go build produced no binary for {pkg} in {staging}")
        os.replace(built, bins / name)
    shutil.rmtree(staging, ignore_errors=True)
    stamp.write_text(comp.version + "\n")
    _say(f"built {comp.name} in {time.monotonic() - started:.0f}s")


def ensure_built() -> Path:
    """Build whatever is missing for the current pins (under a lock, so parallel runs wait) and return bin/."""
    root = versioned_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        bins = root / "bin"
        missing = [
            c
            for c in pins.COMPONENTS
            if not all((bins / b).exists() for b in c.binary_names) or not (bins / f".{c.name}.built").exists()
        ]
        if not missing:
            return bins
        go = check_go()
        started = time.monotonic()
        _say(f"cache: {root}")
        for comp in missing:
            _build_component(go, comp, root)
        _say(f"toolchain ready in {time.monotonic() - started:.0f}s: {bins}")
        return bins


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "build"
    try:
        if command == "build":
            ensure_built()
        elif command == "path":
            print(bin_dir())
        else:
            print("usage: python -m e2e.toolchain [build|path]", file=sys.stderr)
            return 2
    except ToolchainError as err:
        print(f"[toolchain] error: {err}", file=sys.stderr)
        return 1
    return 0
