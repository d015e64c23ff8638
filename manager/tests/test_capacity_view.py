from __future__ import annotations

import datetime as dt

from manager.decisions.capacity_view import capacity_from_queues, parse_report, report_age
from manager.decisions.dispatch import FlavorRoom

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _cq(name: str, *, nominal: str, reserved: str | None, active: str | None = "True") -> dict[str, object]:
    status: dict[str, object] = {}
    if reserved is not None:
        status["flavorsReservation"] = [
            {"name": "default", "resources": [{"name": "cpu", "total": reserved, "borrowed": "0"}]}
        ]
    if active is not None:
        status["conditions"] = [{"type": "Active", "status": active, "reason": "Ready"}]
    return {
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [
                                {"name": "cpu", "nominalQuota": nominal},
                                {"name": "memory", "nominalQuota": "1Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
        "status": status,
    }


def _lq(namespace: str, name: str, cq: str) -> dict[str, object]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": cq}}


def test_a_worker_without_a_report_is_probed_from_its_cluster_queue_status() -> None:
    report = capacity_from_queues(
        [_cq("cq", nominal="8", reserved="2500m"), _cq("new", nominal="4", reserved=None, active=None)],
        [_lq("team-a", "user-queue", "cq"), _lq("team-b", "q", "new")],
        observed_at=NOW,
    )
    assert report.observed_at == NOW
    assert report.capacity.local_queues == {("team-a", "user-queue"): "cq", ("team-b", "q"): "new"}
    assert report.capacity.cluster_queues["cq"] == [
        FlavorRoom(
            name="default",
            nominal={"cpu": 8000, "memory": 1024**3 * 1000},
            free={"cpu": 5500, "memory": 1024**3 * 1000},
        )
    ]
    assert report.capacity.cluster_queues["new"][0].free["cpu"] == 4000


def test_an_overcommitted_or_inactive_cluster_queue_offers_no_room() -> None:
    report = capacity_from_queues(
        [_cq("full", nominal="2", reserved="3"), _cq("held", nominal="8", reserved="0", active="False")],
        [],
        observed_at=NOW,
    )
    assert report.capacity.cluster_queues["full"][0].free["cpu"] == 0
    assert "held" not in report.capacity.cluster_queues


def test_a_probed_inactive_cluster_queue_says_why() -> None:
    held = _cq("held", nominal="8", reserved="0", active="False")
    held["status"]["conditions"][0].update(reason="Stopped", message="Can't admit new workloads: is stopped")  # type: ignore[index]
    pending = _cq("pending", nominal="8", reserved="0", active="False")
    report = capacity_from_queues([held, pending, _cq("ok", nominal="8", reserved="0")], [], observed_at=NOW)
    assert report.capacity.inactive == {"held": "Can't admit new workloads: is stopped", "pending": "Ready"}


def test_a_probed_stopped_local_queue_is_listed_as_stopped() -> None:
    held = _lq("team-a", "held", "cq")
    held["spec"]["stopPolicy"] = "HoldAndDrain"  # type: ignore[index]
    report = capacity_from_queues(
        [_cq("cq", nominal="8", reserved="0")], iter([held, _lq("team-a", "open", "cq")]), observed_at=NOW
    )
    assert report.capacity.stopped_local_queues == frozenset({("team-a", "held")})
    assert set(report.capacity.local_queues) == {("team-a", "held"), ("team-a", "open")}


def test_a_probed_cluster_queue_without_a_namespace_selector_selects_none_of_its_local_queues() -> None:
    closed = _cq("closed", nominal="8", reserved="0")
    del closed["spec"]["namespaceSelector"]  # type: ignore[attr-defined]  # Kueue's default: null selects none
    report = capacity_from_queues(
        [closed, _cq("open", nominal="8", reserved="0")],
        [_lq("team-a", "a", "closed"), _lq("team-a", "b", "open")],
        observed_at=NOW,
    )
    assert report.capacity.unselected_local_queues == frozenset({("team-a", "a")})


def test_a_reported_route_whose_namespace_is_not_selected_is_read() -> None:
    status = {
        "observedTime": "2026-11-21T10:00:00Z",
        "clusterQueues": [],
        "localQueues": [
            {"namespace": "team-a", "name": "a", "clusterQueue": "cq", "namespaceNotSelected": True},
            {"namespace": "team-a", "name": "b", "clusterQueue": "cq"},
        ],
    }
    parsed = parse_report({"status": status})
    assert parsed is not None
    assert parsed.capacity.unselected_local_queues == frozenset({("team-a", "a")})


def test_a_renewed_report_is_aged_by_the_managers_clock_whatever_the_agents_clock_says() -> None:
    received = NOW - dt.timedelta(seconds=5)
    for skew in (-600, 0, 600):  # the agent's clock 10 minutes behind, right, 10 minutes ahead
        report = capacity_from_queues([], [], observed_at=NOW + dt.timedelta(seconds=skew - 5))
        assert report_age(report, now=NOW, received_at=received, renewed=True) == 5


def test_a_report_first_seen_counts_its_own_time_too_so_a_dead_agent_is_never_fresh() -> None:
    behind = capacity_from_queues([], [], observed_at=NOW - dt.timedelta(seconds=600))
    ahead = capacity_from_queues([], [], observed_at=NOW + dt.timedelta(seconds=600))
    # first seen just now: a report written 10 minutes ago by the agent's clock is old until the agent renews it
    assert report_age(behind, now=NOW, received_at=NOW, renewed=False) == 600
    # one dated in the future (the agent's clock ahead) ages from when the manager first saw it
    assert report_age(ahead, now=NOW, received_at=NOW - dt.timedelta(seconds=130), renewed=False) == 130


def test_the_reported_flavors_say_whether_they_have_a_topology_and_unreported_ones_are_not_judged() -> None:
    status = {
        "observedTime": "2026-11-21T10:00:00Z",
        "clusterQueues": [],
        "flavors": [
            {"name": "plain", "topologyName": ""},
            {"name": "tas", "topologyName": "default", "nodeLabels": {"pool": "tas"}},
            {"name": "old-agent"},
        ],
    }
    parsed = parse_report({"status": status})
    assert parsed is not None
    nodes = parsed.capacity.flavor_nodes
    assert nodes["plain"].topology_name == ""
    assert nodes["tas"].topology_name == "default"
    assert "old-agent" not in nodes  # an agent that does not say: its flavors are taken on trust
