from __future__ import annotations

import datetime as dt

from manager.decisions.dashboard_view import WorkerInput, dashboard_state

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def _wl(name: str, *conditions: tuple[str, str, str], **status: object) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-11-21T11:59:00Z"},
        "spec": {"queueName": "lq"},
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": t, "message": m, "lastTransitionTime": "2026-11-21T11:59:30Z"}
                for t, s, m in conditions
            ],
            **status,
        },
    }


def test_dashboard_state_sums_worker_capacity_and_splits_workloads() -> None:
    report = {
        "status": {
            "observedTime": "2026-11-21T11:59:55Z",
            "clusterQueues": [
                {"name": "a", "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominal": "8", "usage": "2"}]}]},
                {
                    "name": "b",
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominal": "4", "usage": "500m"}]}],
                },
            ],
        }
    }
    cq = {
        "metadata": {"name": "cq"},
        "spec": {
            "cohortName": "co",
            "resourceGroups": [
                {
                    "flavors": [
                        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "10", "borrowingLimit": "2"}]}
                    ]
                }
            ],
        },
        "status": {
            "pendingWorkloads": 1,
            "flavorsReservation": [{"name": "f", "resources": [{"name": "cpu", "total": "3"}]}],
        },
    }
    state = dashboard_state(
        workers=[WorkerInput("w1", True, "", report), WorkerInput("w2", False, "not connected yet", None)],
        cluster_queues=[cq],
        workloads=[
            _wl("waiting", ("QuotaReserved", "False", "no worker has room")),
            _wl("running", ("QuotaReserved", "True", ""), ("Admitted", "True", ""), clusterName="w1"),
            _wl(
                "unplaced",
                ("QuotaReserved", "True", ""),
                ("Admitted", "True", ""),
                ("kfed.io/PodsUnschedulable", "True", "worker cluster w1: pod unplaced-x cannot be scheduled"),
                clusterName="w1",
            ),
            _wl("evicted", ("QuotaReserved", "False", "x"), ("Evicted", "True", "worker w2 lost")),
            _wl("done", ("QuotaReserved", "True", ""), ("Finished", "True", "")),
        ],
        now=NOW,
    )
    w1, w2 = state["workers"]
    assert w1["flavors"] == [{"name": "f", "resources": [{"name": "cpu", "nominal": 12.0, "usage": 2.5}]}]
    assert w1["reportAgeSeconds"] == 5.0
    assert (w2["connected"], w2["problem"], w2["flavors"]) == (False, "not connected yet", [])
    assert state["clusterQueues"][0]["resources"] == [
        {"flavor": "f", "resource": "cpu", "usage": 3.0, "nominal": 10.0, "borrowingLimit": 2.0}
    ]
    assert [w["name"] for w in state["running"]] == ["running", "unplaced"]
    assert state["running"][0]["worker"] == "w1"
    assert state["running"][0]["message"] == ""
    assert state["running"][1]["message"] == "worker cluster w1: pod unplaced-x cannot be scheduled"
    assert sorted(w["name"] for w in state["pending"]) == ["evicted", "waiting"]
    assert [e["name"] for e in state["evictions"]] == ["evicted"]
    assert state["counts"] == {"pending": 2, "running": 2, "workloads": 5}
