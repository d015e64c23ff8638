"""`python -m e2e.rig up` / `down` from a shell: clusters come up, `down` leaves no process behind, and `up` again in
the same directory starts a new federation rather than the old one's leftovers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e.rig.federation import read_state_records
from e2e.toolchain import ensure_built

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _rig(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "e2e.rig", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )


def _up(rig_dir: Path) -> subprocess.CompletedProcess[str]:
    args = ("up", "--workers", "1", "--nodes-per-worker", "2", "--no-controllers", "--dir", str(rig_dir))
    return _rig(*args, timeout=300)


def _down(rig_dir: Path) -> subprocess.CompletedProcess[str]:
    return _rig("down", "--dir", str(rig_dir), timeout=120)


def _kubectl(rig_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = rig_dir / "kubeconfigs" / "manager.yaml"
    cmd = [str(ensure_built() / "kubectl"), f"--kubeconfig={kubeconfig}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_up_then_down_leaves_no_process_behind(tmp_path: Path) -> None:
    rig_dir = tmp_path / "rig"
    up = _up(rig_dir)
    records = read_state_records(rig_dir)
    try:
        assert up.returncode == 0, up.stderr
        assert (rig_dir / "kubeconfigs" / "manager.yaml").exists()
        assert (rig_dir / "kubeconfigs" / "worker-1.yaml").exists()
        assert {r.name for r in records} >= {"manager/kube-apiserver", "worker-1/kwok", "worker-1/etcd"}
        assert all(r.alive() for r in records), "every recorded process runs after up"
    finally:
        down = _down(rig_dir)
    assert down.returncode == 0, down.stderr
    assert [r.name for r in records if r.alive()] == []


def test_up_again_in_a_stopped_rigs_directory_starts_a_new_federation(tmp_path: Path) -> None:
    rig_dir = tmp_path / "rig"
    first = _up(rig_dir)
    try:
        assert first.returncode == 0, first.stderr
        made = _kubectl(rig_dir, "create", "configmap", "left-by-the-first-rig", "-n", "default")
        assert made.returncode == 0, made.stderr
    finally:
        assert _down(rig_dir).returncode == 0
    (rig_dir / "notes.txt").write_text("the user's own file\n")

    second = _up(rig_dir)
    try:
        assert second.returncode == 0, second.stderr
        old = _kubectl(rig_dir, "get", "configmap", "left-by-the-first-rig", "-n", "default")
        assert old.returncode != 0, "the second rig still has the first one's objects"
        assert "NotFound" in old.stderr, old.stderr
        assert (rig_dir / "notes.txt").read_text() == "the user's own file\n", "only the rig's own files are removed"
    finally:
        down = _down(rig_dir)
    assert down.returncode == 0, down.stderr
    assert [r.name for r in read_state_records(rig_dir) if r.alive()] == []
