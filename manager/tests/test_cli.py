import datetime as dt
from typing import Any

from manager.cli import namespace_of_context, render_workers, render_workloads

NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def wl(name: str, *conditions: tuple[str, str, str], **status: object) -> dict[str, object]:
    conds = [{"type": t, "status": s, "reason": t, "message": m} for t, s, m in conditions]
    return {
        "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-11-21T11:58:30Z"},
        "spec": {"queueName": "user-queue"},
        "status": {"conditions": conds, **status},
    }


def test_workloads_show_where_each_runs_and_why_others_wait() -> None:
    table = render_workloads(
        [
            wl("b", ("QuotaReserved", "True", ""), ("Admitted", "True", ""), clusterName="worker-2"),
            wl("a", ("QuotaReserved", "False", "no worker has room: worker-1: insufficient cpu")),
            wl("c", ("QuotaReserved", "True", ""), nominatedClusterNames=["worker-1"]),
        ],
        now=NOW,
        all_namespaces=False,
    )
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "QUEUE", "STATE", "WORKER", "MESSAGE", "AGE"]
    assert lines[1].split()[:4] == ["a", "user-queue", "Pending", "-"]
    assert "no worker has room" in lines[1]
    assert lines[2].split() == ["b", "user-queue", "Admitted", "worker-2", "90s"]
    assert lines[3].split() == ["c", "user-queue", "Reserved", "worker-1", "90s"]


def test_workers_show_connection_and_reason() -> None:
    clusters: list[dict[str, Any]] = [
        {
            "metadata": {"name": "worker-2"},
            "status": {
                "conditions": [
                    {"type": "Active", "status": "False", "reason": "BadKubeConfig", "message": "Secret not found"}
                ]
            },
        },
        {"metadata": {"name": "worker-1"}},
    ]
    lines = render_workers(clusters, now=NOW).splitlines()
    assert lines[1].startswith("worker-1")
    assert "not reconciled yet" in lines[1]
    assert lines[2].split()[:3] == ["worker-2", "False", "BadKubeConfig"]


def test_workloads_default_to_the_contexts_namespace_like_kubectl() -> None:
    config = {
        "current-context": "team",
        "contexts": [
            {"name": "team", "context": {"cluster": "m", "user": "u", "namespace": "team-a"}},
            {"name": "admin", "context": {"cluster": "m", "user": "u"}},
        ],
    }
    assert namespace_of_context(config, None) == "team-a"
    assert namespace_of_context(config, "admin") == "default"
    assert namespace_of_context({}, None) == "default"
