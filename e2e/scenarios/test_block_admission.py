"""Kueue's waitForPodsReady.blockAdmission on the manager, on a federation of its own whose kfed-manager reads it
from a Kueue configuration file: while an admitted Workload's pods are not ready, no other Workload gets quota (its
``QuotaReserved`` is False with Kueue's reason ``WaitingForPodsReady`` and message); once that Workload is gone, the
next is admitted and runs.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.queues import LOCAL_QUEUE, apply_sample_queues, job_manifest
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, is_true, submit, wait_complete, workload_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 5m
  blockAdmission: true
"""


@pytest.fixture(scope="module")
def blocking() -> Iterator[Federation]:
    with tempfile.TemporaryDirectory(prefix="kfed-block-") as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(CONFIG)
        spec = FederationSpec(
            workers=1,
            node_shapes={"worker-1": NodeShape(count=2)},
            job_seconds=2,
            controllers=True,
            manager_args=("--config", str(config)),
        )
        with running(Path(tmp) / "rig", ensure_built(), spec) as fed:
            apply_sample_queues(fed)
            yield fed


def test_nothing_is_admitted_while_an_admitted_workload_is_not_pods_ready(blocking: Federation) -> None:
    manifest = job_manifest("never-ready", namespace="default", cpu="1", queue=LOCAL_QUEUE)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    blocking.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    wait_for(
        lambda: workload_of(blocking, "never-ready"),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what="never-ready admitted (its pods can never be scheduled)",
    )
    submit(blocking, "next", cpu="1", seconds=2)
    waiting = wait_for(
        lambda: workload_of(blocking, "next"),
        until=lambda wl: (condition(wl, "QuotaReserved") or {}).get("reason") == "WaitingForPodsReady",
        timeout=30,
        what="next to wait for never-ready's pods (QuotaReserved=False, reason WaitingForPodsReady)",
    )
    reserved = condition(waiting, "QuotaReserved") or {}
    assert reserved["status"] == "False"
    assert reserved["message"] == "waiting for all admitted workloads to be in PodsReady condition"
    assert not is_true(waiting, "Admitted")

    blocking.kubectl(MANAGER, "delete", "job", "never-ready", "--wait=false")
    wait_complete(blocking, "next", timeout=60)
