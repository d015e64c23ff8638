"""Kueue's Workload retention policies on the manager (objectRetentionPolicies.workloads), on a federation of its own.

kfed-manager runs with ``afterFinished`` and ``afterDeactivatedByKueue`` of 4 s and a PodsReady timeout that
deactivates at once (no requeue allowed): a finished Job's Workload is deleted a few seconds after it finished while
the Job stays Complete and gets no new Workload; a Job whose pods can never start is deactivated by kfed and then
deleted with its Workload.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.queues import LOCAL_QUEUE, apply_sample_queues, job_manifest
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, get, items, submit, wait_complete, workload_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

RETENTION = 4.0


@pytest.fixture(scope="module")
def retaining() -> Iterator[Federation]:
    spec = FederationSpec(
        workers=1,
        node_shapes={"worker-1": NodeShape(count=2)},
        job_seconds=2,
        controllers=True,
        manager_args=(
            "--workload-retention-after-finished",
            str(RETENTION),
            "--workload-retention-after-deactivated-by-kueue",
            str(RETENTION),
            "--wait-for-pods-ready-timeout",
            "8",
            "--requeuing-backoff-limit-count",
            "0",
        ),
    )
    with tempfile.TemporaryDirectory(prefix="kfed-retention-") as tmp, running(Path(tmp), ensure_built(), spec) as fed:
        apply_sample_queues(fed)
        yield fed


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_finished_workloads_and_jobs_kfed_deactivated_are_deleted_after_their_retention(retaining: Federation) -> None:
    submit(retaining, "kept-job", cpu="1", seconds=2)
    wait_complete(retaining, "kept-job", timeout=60)
    finished = wait_for(
        lambda: workload_of(retaining, "kept-job"),
        until=lambda wl: condition(wl, "Finished") is not None,
        timeout=30,
        what="kept-job's Workload Finished",
    )
    assert finished is not None
    finished_at = _time(str((condition(finished, "Finished") or {})["lastTransitionTime"]))
    wait_for(
        lambda: workload_of(retaining, "kept-job"),
        until=lambda wl: wl is None,
        timeout=RETENTION + 30,
        what="kept-job's finished Workload deleted after its retention",
    )
    assert dt.datetime.now(dt.UTC) >= finished_at + dt.timedelta(seconds=RETENTION - 1)
    deleted = [
        e
        for e in items(retaining, MANAGER, "events.events.k8s.io")
        if e.get("reason") == "Deleted" and (e.get("regarding") or {}).get("name") == finished["metadata"]["name"]
    ]
    assert deleted, "an Event says the Workload was deleted for its retention"

    manifest = job_manifest("never-starts", namespace="default", cpu="1", queue=LOCAL_QUEUE)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    retaining.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    deactivated = wait_for(
        lambda: workload_of(retaining, "never-starts"),
        until=lambda wl: (condition(wl, "Evicted") or {}).get("reason") == "DeactivatedDueToRequeuingLimitExceeded",
        timeout=90,
        what="never-starts deactivated by kfed",
    )
    assert deactivated is not None
    wait_for(
        lambda: get(retaining, MANAGER, "job", "never-starts"),
        until=lambda job: job is None,
        timeout=RETENTION + 60,
        what="the deactivated Job deleted after its retention",
    )
    # The finished Job stays, Complete, and never got a new Workload.
    job = get(retaining, MANAGER, "job", "kept-job")
    assert job is not None
    assert workload_of(retaining, "kept-job") is None
