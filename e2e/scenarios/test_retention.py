"""Kueue's Workload retention policies on the manager (objectRetentionPolicies.workloads), on a federation of its own.

kfed-manager starts with the configuration file shipped in Kueue's module, verbatim, and runs with
``afterFinished`` and ``afterDeactivatedByKueue`` of 10 s and a PodsReady timeout that deactivates at once (no
requeue allowed): a finished Job's Workload is deleted soon after its retention while the Job stays Complete and
gets no new Workload; a Job whose pods can never start is deactivated by kfed and then deleted with its Workload.
The clock starts at the condition's ``lastTransitionTime``: a Workload that finished just before kfed-manager was
stopped is deleted right after it starts again, not a whole retention period later.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.queues import LOCAL_QUEUE, apply_sample_queues, job_manifest
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, get, items, submit, wait_complete, workload_of
from e2e.toolchain import ensure_built
from e2e.toolchain.kueue import kueue_module_file
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

RETENTION = 10.0
SHIPPED_CONFIG = "config/components/manager/controller_manager_config.yaml"


@pytest.fixture(scope="module")
def retaining() -> Iterator[Federation]:
    spec = FederationSpec(
        workers=1,
        node_shapes={"worker-1": NodeShape(count=2)},
        job_seconds=2,
        controllers=True,
        manager_args=(
            # The configuration file Kueue v0.19.1 ships, as it is; the flags below add what it leaves commented out.
            "--config",
            str(kueue_module_file(SHIPPED_CONFIG)),
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
    assert _deleted_events(retaining, finished["metadata"]["name"]), (
        "an Event says the Workload was deleted for its retention"
    )

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


def _deleted_events(fed: Federation, workload: str) -> list[dict[str, Any]]:
    return [
        e
        for e in items(fed, MANAGER, "events.events.k8s.io")
        if e.get("reason") == "Deleted" and (e.get("regarding") or {}).get("name") == workload
    ]


def test_retention_counts_from_the_finish_across_a_manager_restart(retaining: Federation) -> None:
    submit(retaining, "restart-kept", cpu="1", seconds=1)
    wait_complete(retaining, "restart-kept", timeout=60)
    finished = wait_for(
        lambda: workload_of(retaining, "restart-kept"),
        until=lambda wl: condition(wl, "Finished") is not None,
        timeout=30,
        what="restart-kept's Workload Finished",
    )
    assert finished is not None
    name = finished["metadata"]["name"]
    finished_at = _time(str((condition(finished, "Finished") or {})["lastTransitionTime"]))
    with retaining.stopped_controller("kfed-manager"):
        assert workload_of(retaining, "restart-kept") is not None, (
            "deleted before the manager stopped: too slow to tell"
        )
        wait_for(
            lambda: dt.datetime.now(dt.UTC),
            until=lambda now: now >= finished_at + dt.timedelta(seconds=RETENTION + 2),
            timeout=RETENTION + 10,
            what="the retention elapsed while kfed-manager is down",
        )
        assert workload_of(retaining, "restart-kept") is not None, "deleted while kfed-manager was down"
    restarted_at = dt.datetime.now(dt.UTC)
    wait_for(
        lambda: workload_of(retaining, "restart-kept"),
        until=lambda wl: wl is None,
        timeout=RETENTION + 30,
        what="restart-kept's Workload deleted by the restarted kfed-manager",
    )
    events = _deleted_events(retaining, name)
    assert events, "an Event says the Workload was deleted for its retention"
    deleted_at = max(_time(str(e.get("eventTime") or e["metadata"]["creationTimestamp"])) for e in events)
    # A clock restarted at the restart could not delete before restarted_at + RETENTION.
    assert deleted_at < restarted_at + dt.timedelta(seconds=RETENTION), (
        f"finished {finished_at}, restarted {restarted_at}, deleted {deleted_at}: retention counted from the restart"
    )
