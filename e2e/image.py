"""`make image`: kfed's container image from the Containerfile, without a Docker daemon and without pulling.

    python -m e2e.image build    # -> dist/kfed-<appVersion>.oci.tar (localhost/kfed:<appVersion>), prints size, time
    python -m e2e.image check    # unpacks that archive's root filesystem and runs the entrypoints in a chroot

No public base image can be pulled here, so the base is made from Debian's packages: mmdebstrap writes a minimal
bookworm root filesystem with python3 (the same Python as the official python:3.11 images), buildah turns it into
the image localhost/kfed-base:bookworm (kept, so later builds reuse it), and the Containerfile is built on it with
``--build-arg BASE=...``. kfed and its dependencies go in as wheels made on the host beforehand (build/wheels),
so the build itself fetches nothing. buildah runs the Containerfile's RUN steps with chroot isolation (containers proper
cannot run on these machines). The archive is OCI (``oci-archive``), which `docker load` (Docker >= 25) and
`kind load image-archive` read. Both tools come from Debian; they are installed with apt-get when missing (root).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = "localhost/kfed-base:bookworm"
REPOSITORY = "localhost/kfed"
DIST = REPO_ROOT / "dist"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
"""The base's packages: Python, its venv module (the Containerfile makes /opt/kfed with it) and CA certificates."""


class ImageError(Exception):
    pass


def app_version() -> str:
    chart = yaml.safe_load((REPO_ROOT / "charts" / "kfed-manager" / "Chart.yaml").read_text())
    return str(chart["appVersion"])


def image_ref() -> str:
    """What the charts run by default: image.repository, tag = the chart's appVersion."""
    return f"{REPOSITORY}:{app_version()}"


def archive_path() -> Path:
    return DIST / f"kfed-{app_version()}.oci.tar"


def _run(*cmd: str, timeout: float = 900) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise ImageError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result.stdout


def ensure_tools() -> None:
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise ImageError(f"{', '.join(missing)} missing: apt-get install buildah mmdebstrap (as root)")
    print(f"installing {' '.join(missing)} from Debian's packages", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, env=env, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, capture_output=True, env=env, timeout=900)


def _image_exists(ref: str) -> bool:
    return (
        subprocess.run(["buildah", "inspect", "--type", "image", ref], capture_output=True, check=False).returncode == 0
    )


def build_base() -> None:
    """localhost/kfed-base:bookworm from Debian's packages, unless it exists already."""
    if _image_exists(BASE_IMAGE):
        return
    print(f"building {BASE_IMAGE} from Debian's packages ({', '.join(DEBIAN_PACKAGES)})", flush=True)
    with tempfile.TemporaryDirectory(prefix="kfed-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        _run(
            "mmdebstrap",
            "--variant=minbase",
            f"--include={','.join(DEBIAN_PACKAGES)}",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            "--aptopt=APT::Install-Recommends false",
            "--format=tar",
            "bookworm",
            str(rootfs),
        )
        container = _run("buildah", "from", "scratch").strip()
        try:
            _run("buildah", "add", container, str(rootfs), "/")
            _run(
                "buildah",
                "config",
                "--env",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                container,
            )
            _run("buildah", "commit", "-q", container, BASE_IMAGE)
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, check=False)


def build_wheels() -> None:
    """kfed and its dependencies as wheels in build/wheels (made here, with this machine's access to PyPI)."""
    wheels = REPO_ROOT / "build" / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", f"--wheel-dir={wheels}", str(REPO_ROOT))


def build(*, base: str | None = None) -> Path:
    """Build the image and write the OCI archive; returns its path."""
    ensure_tools()
    if base is None:
        build_base()
        base = BASE_IMAGE
    build_wheels()
    ref = image_ref()
    _run(
        "buildah",
        "build",
        "--isolation=chroot",
        "--layers",
        f"--build-arg=BASE={base}",
        "-f",
        str(REPO_ROOT / "Containerfile"),
        "-t",
        ref,
        str(REPO_ROOT),
        timeout=1800,
    )
    DIST.mkdir(exist_ok=True)
    archive = archive_path()
    archive.unlink(missing_ok=True)
    _run("buildah", "push", "--quiet", ref, f"oci-archive:{archive}:{ref}")
    return archive


# -- checking an archive --------------------------------------------------------------------------------------------


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    algorithm, value = digest.split(":", 1)
    member = tar.extractfile(f"blobs/{algorithm}/{value}")
    if member is None:
        raise ImageError(f"blob {digest} missing from the archive")
    return member.read()


def image_config(archive: Path) -> dict[str, object]:
    """The image's config (Env, User, Entrypoint, Cmd...) from an OCI archive."""
    with tarfile.open(archive) as tar:
        manifest = _manifest(tar)
        config: dict[str, object] = json.loads(_blob(tar, manifest["config"]["digest"]))
        return config


def _manifest(tar: tarfile.TarFile) -> dict[str, Any]:
    index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    manifest: dict[str, Any] = json.loads(_blob(tar, index["manifests"][0]["digest"]))
    return manifest


def unpack_rootfs(archive: Path, dest: Path) -> None:
    """Apply the image's layers in order into ``dest`` (OCI whiteouts honoured), as a runtime would."""
    dest.chmod(0o755)  # the root of the filesystem, also for its non-root user (temporary directories are 0700)
    with tarfile.open(archive) as tar:
        manifest = _manifest(tar)
        for layer in manifest["layers"]:
            data = _blob(tar, layer["digest"])
            if layer["mediaType"].endswith("gzip"):
                data = gzip.decompress(data)
            _apply_layer(data, dest)


def _apply_layer(data: bytes, dest: Path) -> None:
    import io

    with tarfile.open(fileobj=io.BytesIO(data)) as layer:
        members = []
        for member in layer.getmembers():
            path = Path(member.name)
            if path.name == ".wh..wh..opq":
                target = dest / path.parent
                if target.is_dir():
                    for child in target.iterdir():
                        _remove(child)
            elif path.name.startswith(".wh."):
                _remove(dest / path.parent / path.name.removeprefix(".wh."))
            else:
                existing = dest / path
                if existing.is_symlink() or (existing.exists() and not existing.is_dir()):
                    existing.unlink()
                members.append(member)
        layer.extractall(dest, members=members, filter="tar")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def run_in_chroot(
    rootfs: Path, argv: list[str], *, env: dict[str, str], user: str = "65532:65532"
) -> subprocess.CompletedProcess[str]:
    """``argv`` in a chroot of ``rootfs`` as ``user`` (uid:gid; the charts' non-root user). Needs root to chroot."""
    return subprocess.run(
        [shutil.which("chroot") or "/usr/sbin/chroot", f"--userspec={user}", str(rootfs), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.image", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "check"))
    parser.add_argument("--base", help="build on this image instead of one made from Debian's packages")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            started = time.monotonic()
            archive = build(base=args.base)
            seconds = time.monotonic() - started
            size = archive.stat().st_size / 2**20
            print(f"{image_ref()} -> {archive.relative_to(REPO_ROOT)}: {size:.0f} MiB in {seconds:.0f}s")
            print(f"load it with: docker load -i {archive}   or: kind load image-archive {archive}")
            return 0
        archive = archive_path()
        with tempfile.TemporaryDirectory(prefix="kfed-rootfs-") as tmp:
            unpack_rootfs(archive, Path(tmp))
            env = {"PATH": "/opt/kfed/bin:/usr/bin:/bin"}
            for binary in ("kfed-manager", "kfed-agent"):
                result = run_in_chroot(Path(tmp), [binary, "--version"], env=env)
                print(f"{binary} --version: {result.stdout.strip() or result.stderr.strip()}")
                if result.returncode != 0:
                    return 1
        return 0
    except ImageError as err:
        print(f"image: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
