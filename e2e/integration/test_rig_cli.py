"""`python -m e2e.rig up` / `down` from a shell: clusters come up, `down` leaves no process behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from e2e.rig.federation import read_state_records

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_up_then_down_leaves_no_process_behind(tmp_path: Path) -> None:
    rig_dir = tmp_path / "rig"
    up = subprocess.run(
        [
            sys.executable,
            "-m",
            "e2e.rig",
            "up",
            "--workers",
            "1",
            "--nodes-per-worker",
            "2",
            "--no-controllers",
            "--dir",
            str(rig_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    records = read_state_records(rig_dir)
    try:
        assert up.returncode == 0, up.stderr
        assert (rig_dir / "kubeconfigs" / "manager.yaml").exists()
        assert (rig_dir / "kubeconfigs" / "worker-1.yaml").exists()
        assert {r.name for r in records} >= {"manager/kube-apiserver", "worker-1/kwok", "worker-1/etcd"}
        assert all(r.alive() for r in records), "every recorded process runs after up"
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "e2e.rig", "down", "--dir", str(rig_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=REPO,
        )
    assert down.returncode == 0, down.stderr
    assert [r.name for r in records if r.alive()] == []
