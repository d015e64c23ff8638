"""Kueue's waitForPodsReady on the federation (issue: recovery, deliverable 5).

The shared federation's manager runs with a PodsReady timeout, a short requeuing backoff and a limit of one
requeue (``e2e.scenarios.helpers``). A Job whose pods can never start on its worker (a nodeSelector no node has)
is evicted with ``PodsReadyTimeout``, requeued with ``status.requeueState`` and dispatched again only after its
backoff; the second timeout is past the limit, so it is deactivated and taken off its worker. A healthy Job beside
it records ``PodsReady`` and is never evicted.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from e2e.queues import LOCAL_QUEUE, job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    PODS_READY_TIMEOUT,
    REQUEUE_BACKOFF_BASE,
    condition,
    get,
    is_true,
    submit,
    wait_complete,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _copies(fed: Federation, name: str) -> list[str]:
    return [w for w in fed.workers if get(fed, w, "job", name) is not None]


def test_pods_ready_timeout_requeues_with_backoff_then_deactivates_past_the_limit(federation: Federation) -> None:
    manifest = job_manifest("never-ready", namespace="default", cpu="1", queue=LOCAL_QUEUE)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kfed.io/no-such-node": "true"}
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    submit(federation, "ready-soon", cpu="1", seconds=3)

    evicted = wait_for(
        lambda: workload_of(federation, "never-ready"),
        until=lambda wl: (condition(wl, "Evicted") or {}).get("reason") == "PodsReadyTimeout",
        timeout=PODS_READY_TIMEOUT + 60,
        what="never-ready evicted with PodsReadyTimeout",
    )
    assert evicted is not None
    name = evicted["metadata"]["name"]
    eviction = condition(evicted, "Evicted")
    assert eviction is not None
    assert eviction["message"] == f"Exceeded the PodsReady timeout default/{name}"
    created = _time(evicted["metadata"]["creationTimestamp"])  # admitted after that, so timed out no earlier than:
    assert _time(eviction["lastTransitionTime"]) >= created + dt.timedelta(seconds=PODS_READY_TIMEOUT - 1)
    assert evicted["status"]["schedulingStats"]["evictions"] == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}
    ], "Kueue's per-Workload count, with the wait that timed out"
    state = evicted["status"]["requeueState"]
    assert state["count"] == 1
    requeue_at = _time(state["requeueAt"])
    assert requeue_at >= _time(eviction["lastTransitionTime"]) + dt.timedelta(seconds=REQUEUE_BACKOFF_BASE - 1)

    def reserved_again(wl: dict[str, Any] | None) -> bool:
        reserved = condition(wl, "QuotaReserved")
        return (
            reserved is not None
            and reserved["status"] == "True"
            and _time(reserved["lastTransitionTime"]) > _time(eviction["lastTransitionTime"])
        )

    again = wait_for(
        lambda: workload_of(federation, "never-ready"),
        until=reserved_again,
        timeout=60,
        what="never-ready dispatched again after its backoff",
    )
    reserved = condition(again, "QuotaReserved")
    assert reserved is not None
    assert _time(reserved["lastTransitionTime"]) >= requeue_at - dt.timedelta(seconds=1), "backoff not honoured"

    deactivated = wait_for(
        lambda: workload_of(federation, "never-ready"),
        until=lambda wl: (
            wl is not None
            and wl["spec"].get("active") is False
            and not is_true(wl, "QuotaReserved")
            and (condition(wl, "Evicted") or {}).get("reason") == "DeactivatedDueToRequeuingLimitExceeded"
        ),
        timeout=PODS_READY_TIMEOUT + 60,
        what="never-ready deactivated past the requeuing limit and its reservation released",
    )
    assert deactivated is not None
    assert (condition(deactivated, "Evicted") or {}).get("message") == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    assert condition(deactivated, "Requeued") is not None
    wait_for(
        lambda: _copies(federation, "never-ready"),
        until=lambda found: found == [],
        timeout=30,
        what="never-ready's copies gone from every worker",
    )
    job = get(federation, MANAGER, "job", "never-ready")
    assert job is not None
    assert job["spec"]["suspend"] is True

    wait_complete(federation, "ready-soon", timeout=60)
    healthy = workload_of(federation, "ready-soon")
    assert condition(healthy, "Evicted") is None
    assert (condition(healthy, "PodsReady") or {}).get("status") == "True"
