"""The image `make image` built (an OCI archive): its root filesystem unpacked as a runtime would, kfed's
entrypoints run in a chroot of it as the charts' non-root user, and its config as the charts expect it.

Marked ``image``: `make test-image` builds the image first and runs only these (see e2e/image.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from e2e.image import REPO_ROOT, archive_path, image_config, run_in_chroot, unpack_rootfs

pytestmark = pytest.mark.image

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
USER = "65532:65532"
"""The charts' podSecurityContext runAsUser / runAsGroup."""


@pytest.fixture(scope="module")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = archive_path()
    assert archive.is_file(), f"{archive} missing: run `make image` first"
    root = tmp_path_factory.mktemp("rootfs")
    unpack_rootfs(archive, root)
    return root


@pytest.mark.parametrize("binary", ["kfed-manager", "kfed-agent"])
def test_the_entrypoints_run_in_a_chroot_of_the_image_as_the_charts_user(rootfs: Path, binary: str) -> None:
    env = {"PATH": "/opt/kfed/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = run_in_chroot(rootfs, [binary, "--version"], env=env, user=USER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{binary} {VERSION}"


def test_the_kubectl_plugin_is_in_the_image(rootfs: Path) -> None:
    result = run_in_chroot(rootfs, ["kubectl-kfed", "--help"], env={"PATH": "/opt/kfed/bin"}, user=USER)
    assert result.returncode == 0, result.stderr
    assert "add-worker" in result.stdout


def test_the_image_runs_as_the_charts_user_with_kfed_on_its_path() -> None:
    config = image_config(archive_path())["config"]
    assert isinstance(config, dict)
    assert config["User"] == USER
    path = next(e for e in config["Env"] if e.startswith("PATH="))
    assert path.startswith("PATH=/opt/kfed/bin:")
