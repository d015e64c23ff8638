"""kueuectl, Kueue's kubectl plugin built from Kueue v0.19.1's module, against kfed-manager (marker ``interop``).

``kueuectl list workload`` reads pending positions from the visibility API (``visibility.kueue.x-k8s.io``); with
stock MultiKueue replaced by kfed, its POSITION IN QUEUE column must still be filled, from kfed-manager's visibility
server. (kueuectl reads a ClusterQueue's list, so it needs ``clusterqueues/pendingworkloads`` cluster-wide, with
kfed as with Kueue; the namespace-scoped reads are in ``test_visibility_api.py``.)
"""

from __future__ import annotations

import subprocess

import pytest

from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import pending_jobs
from e2e.toolchain.kueue import ensure_kueuectl
from e2e.waiting import wait_for

pytestmark = pytest.mark.interop

QUEUE = "kueuectl"
JOBS = ("kctl-a", "kctl-b", "kctl-c")
VIEWER = "kueuectl-viewer"


def _positions(fed: Federation, kueuectl: str) -> dict[str, str]:
    """JOB NAME → POSITION IN QUEUE of ``kueuectl list workload -q QUEUE`` (``{"error": ...}`` when it fails; its
    ``-c`` matches admitted workloads only)."""
    command = [kueuectl, f"--kubeconfig={fed.kubeconfig(MANAGER)}", "list", "workload", "-n", "default", "-q", QUEUE]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = result.stdout.splitlines()
    if result.returncode != 0 or not lines:
        return {"error": f"exit {result.returncode}: {result.stdout}{result.stderr}"}
    header = lines[0]
    job_at, position_at = header.index("JOB NAME"), header.index("POSITION IN QUEUE")
    return {line[job_at:].split()[0]: line[position_at:].split()[0] for line in lines[1:] if line.strip()}


def test_kueuectl_shows_kfeds_queue_positions(federation: Federation) -> None:
    kueuectl = str(ensure_kueuectl())
    expected = {"kctl-a": "0", "kctl-b": "1", "kctl-c": "2"}
    with pending_jobs(federation, QUEUE, JOBS, viewer=VIEWER):
        shown = wait_for(
            lambda: _positions(federation, kueuectl),
            until=lambda positions: positions == expected,
            timeout=60,
            what="kueuectl list workload to show the three Jobs at positions 0, 1, 2",
        )
        assert shown == expected
