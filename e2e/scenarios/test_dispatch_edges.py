"""Dispatch edge cases on a real local federation (SCENARIOS.md S2, S6, S7)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.queues import job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, is_true, items, submit, worker_of, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


def test_s2_the_manager_job_starts_only_after_admission_and_mirrors_status_while_running(
    federation: Federation,
) -> None:
    submit(federation, "s2", cpu="1", parallelism=2, seconds=8)
    samples: list[tuple[bool, bool, int]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job = get(federation, MANAGER, "job", "s2") or {}
        workload = workload_of(federation, "s2")  # read after the Job: an unsuspended Job implies admission already
        samples.append(
            (
                bool(job.get("spec", {}).get("suspend")),
                is_true(workload, "Admitted"),
                int((job.get("status") or {}).get("active", 0)),
            )
        )
        if is_true(job, "Complete"):
            break
        time.sleep(0.2)
    # (That it is created suspended is the admission policy's test; admission can beat the first sample here.)
    assert samples, "no observation"
    assert all(admitted for suspended, admitted, _ in samples if not suspended), (
        "the manager Job was unsuspended before the worker admitted the workload"
    )
    assert any(active == 2 for _, _, active in samples), "the two running pods were never mirrored"


def test_s6_a_job_that_finishes_before_the_manager_saw_it_run_still_syncs(federation: Federation) -> None:
    submit(federation, "s6", cpu="1", seconds=0)
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "s6"),
        until=lambda j: is_true(j, "Complete"),
        timeout=60,
        what="s6 Complete on the manager",
    )
    assert job is not None
    assert job["status"]["succeeded"] == 1
    assert job["status"].get("completionTime")


def _foreign_job(name: str) -> dict[str, Any]:
    manifest = job_manifest(name, namespace="default", cpu="1", seconds=600)
    manifest["metadata"]["labels"] = {"owner": "someone-else"}
    manifest["spec"]["suspend"] = True
    return manifest


def _our_copies(fed: Federation, cluster: str, prefix: str) -> Callable[[], list[str]]:
    def probe() -> list[str]:
        names = [w["metadata"]["name"] for w in items(fed, cluster, "workloads.kueue.x-k8s.io")]
        return [n for n in names if n.startswith(prefix)]

    return probe


def test_s7_a_same_named_job_that_kfed_did_not_create_is_never_touched(federation: Federation) -> None:
    before = {}
    for worker in federation.workers:
        federation.kubectl(worker, "create", "-f", "-", input=json.dumps(_foreign_job("s7")))
        before[worker] = get(federation, worker, "job", "s7")
    submit(federation, "s7", cpu="1", seconds=3)
    wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "RemoteObjectConflict" and "s7" in e.get("note", "")
        ],
        until=bool,
        timeout=60,
        what="a RemoteObjectConflict event naming s7",
    )
    for worker in federation.workers:
        after = get(federation, worker, "job", "s7")
        assert after is not None, "the foreign Job was deleted"
        assert after["metadata"]["uid"] == before[worker]["metadata"]["uid"]  # type: ignore[index]
        assert after["metadata"]["labels"] == {"owner": "someone-else"}
        assert after["spec"]["suspend"] is True
    federation.kubectl(MANAGER, "delete", "job", "s7", "--wait=false")
    chosen = worker_of(federation, "s7")
    assert chosen is None  # never admitted anywhere: the copy could not be completed
    # Our Workload copy is garbage-collected with the manager Job; the foreign Jobs stay.
    for name in federation.workers:
        wait_for(
            _our_copies(federation, name, "job-s7-"),
            until=lambda found: found == [],
            timeout=60,
            what=f"our s7 Workload copy gone from {name}",
        )
        assert get(federation, name, "job", "s7") is not None
        federation.kubectl(name, "delete", "job", "s7", "--wait=false")
