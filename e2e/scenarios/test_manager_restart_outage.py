"""A manager restart during a worker outage neither evicts at once nor forgets the outage (issue: recovery, 3).

The worker holding a running Job is frozen; once the manager shows it ``Active=False``, kfed-manager is stopped,
kept down for a while inside the outage and started again. The new process must count the worker-lost timeout
from when the connection was lost (Kueue #12999), which it reads back from the MultiKueueCluster's ``Active``
condition: the Job is requeued no earlier than that timeout after the loss, and well before a timeout counted from
the restart would end. Once the worker answers again its stale copies are deleted.
"""

from __future__ import annotations

import datetime as dt

import pytest

from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    WORKER_LOST_TIMEOUT,
    condition,
    get,
    items,
    remote_copies,
    submit,
    worker_of,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

DOWN_FOR = 8.0
"""Seconds after the loss the manager stays down: a clock restarted at the restart would end this much later."""


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_manager_restarted_during_an_outage_keeps_counting_from_the_loss(federation: Federation) -> None:
    submit(federation, "restart-outage", cpu="1", seconds=90)
    worker = wait_for(
        lambda: worker_of(federation, "restart-outage"),
        until=lambda w: w is not None and bool(remote_copies(federation, "restart-outage", live_only=True).get(w)),
        timeout=60,
        what="restart-outage running on a worker",
    )
    assert worker is not None
    other = next(w for w in federation.workers if w != worker)
    with federation.paused(worker):
        active = wait_for(
            lambda: condition(get(federation, MANAGER, "multikueuecluster", worker), "Active"),
            until=lambda c: c is not None and c["status"] == "False",
            timeout=30,
            what=f"{worker} shown Active=False",
        )
        assert active is not None
        lost_at = _time(active["lastTransitionTime"])
        with federation.stopped_controller("kfed-manager"):
            wait_for(
                lambda: dt.datetime.now(dt.UTC),
                until=lambda now: now >= lost_at + dt.timedelta(seconds=DOWN_FOR),
                timeout=DOWN_FOR + 5,
                what="the manager down well inside the outage",
            )
        restarted_at = dt.datetime.now(dt.UTC)
        assert restarted_at < lost_at + dt.timedelta(seconds=WORKER_LOST_TIMEOUT - 2), "restarted too late to tell"
        requeued = wait_for(
            lambda: condition(workload_of(federation, "restart-outage"), "Requeued"),
            until=lambda c: c is not None and c["status"] == "True",
            timeout=WORKER_LOST_TIMEOUT + 45,
            what="restart-outage requeued after the worker-lost timeout",
        )
        assert requeued is not None
        notes = [  # Requeued says BackoffFinished by then (Kueue); the eviction's Event says why
            str(e.get("note"))
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "EvictedDueToAdmissionCheck"
            and "restart-outage" in (e.get("regarding") or {}).get("name", "")
        ]
        assert any("worker-lost timeout" in note for note in notes), notes
        requeued_at = _time(requeued["lastTransitionTime"])
        assert requeued_at >= lost_at + dt.timedelta(seconds=WORKER_LOST_TIMEOUT - 1), "evicted before the timeout"
        assert requeued_at < restarted_at + dt.timedelta(seconds=WORKER_LOST_TIMEOUT - 2), (
            f"timeout counted from the restart: lost {lost_at}, restarted {restarted_at}, requeued {requeued_at}"
        )
        wait_for(
            lambda: worker_of(federation, "restart-outage"),
            until=lambda w: w == other,
            timeout=60,
            what=f"restart-outage dispatched to {other}",
        )
    wait_for(
        lambda: remote_copies(federation, "restart-outage").get(worker),
        until=lambda kinds: not kinds,
        timeout=45,
        what=f"stale copies of restart-outage removed from {worker}",
    )
