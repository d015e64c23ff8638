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
            wl("a", ("QuotaReserved", "False", "no worker can take it: worker-1: insufficient cpu")),
            wl("c", ("QuotaReserved", "True", ""), nominatedClusterNames=["worker-1"]),
            wl(
                "d",
                ("QuotaReserved", "True", ""),
                ("Admitted", "True", ""),
                ("kfed.io/PodsUnschedulable", "True", "worker cluster worker-1: pod d-x cannot be scheduled"),
                clusterName="worker-1",
            ),
        ],
        now=NOW,
        all_namespaces=False,
    )
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "QUEUE", "STATE", "WORKER", "MESSAGE", "AGE"]
    assert lines[1].split()[:4] == ["a", "user-queue", "Pending", "-"]
    assert "no worker can take it" in lines[1]
    assert lines[2].split() == ["b", "user-queue", "Admitted", "worker-2", "90s"]
    assert lines[3].split() == ["c", "user-queue", "Reserved", "worker-1", "90s"]
    assert lines[4].split()[:4] == ["d", "user-queue", "Admitted", "worker-1"]
    assert "pod d-x cannot be scheduled" in lines[4]


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


def _pending(name: str, *, ns: str = "team-a", queue: str = "user-queue", priority: int = 0, created: str) -> dict:  # type: ignore[type-arg]
    return {
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {"queueName": queue, "priority": priority},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "x"}]},
    }


def test_pending_positions_follow_priority_then_queue_time_per_cluster_queue_and_local_queue() -> None:
    from manager.decisions.visibility import pending_positions

    lqs = {"team-a/user-queue": "cq", "team-b/other": "cq"}
    positions = pending_positions(
        [
            _pending("old", created="2026-11-21T11:00:00Z"),
            _pending("urgent", priority=100, created="2026-11-21T11:30:00Z"),
            _pending("b-old", ns="team-b", queue="other", created="2026-11-21T10:00:00Z"),
            wl("running", ("QuotaReserved", "True", ""), ("Admitted", "True", "")),
        ],
        lqs,
    )
    assert [(p.workload["metadata"]["name"], p.in_cluster_queue, p.in_local_queue) for p in positions] == [
        ("urgent", 0, 0),
        ("b-old", 1, 0),
        ("old", 2, 1),
    ]


def test_workload_filters_match_kueuectl_statuses_queues_and_workers() -> None:
    from manager.cli_views import WorkloadFilter

    admitted = wl("b", ("QuotaReserved", "True", ""), ("Admitted", "True", ""), clusterName="worker-2")
    admitted["status"]["admission"] = {"clusterQueue": "cq"}  # type: ignore[index]
    pending = wl("a", ("QuotaReserved", "False", "no room"))
    lqs = {"team-a/user-queue": "cq"}
    assert WorkloadFilter(statuses=("admitted",)).matches(admitted, lqs)
    assert not WorkloadFilter(statuses=("pending",)).matches(admitted, lqs)
    assert WorkloadFilter(statuses=("pending",), cluster_queue="cq").matches(pending, lqs)
    assert not WorkloadFilter(cluster_queue="other").matches(pending, lqs)
    assert WorkloadFilter(worker="worker-2", local_queue="user-queue").matches(admitted, lqs)
    assert not WorkloadFilter(worker="worker-1").matches(admitted, lqs)


def test_tables_fit_80_columns_unless_wide() -> None:
    long = "no worker can take it: " + "worker-1: insufficient cpu, " * 10
    table = render_workloads([wl("a", ("QuotaReserved", "False", long))], now=NOW, all_namespaces=True)
    assert all(len(line) <= 80 for line in table.splitlines()), table
    assert table.splitlines()[1].rstrip().endswith("90s")
    wide = render_workloads([wl("a", ("QuotaReserved", "False", long))], now=NOW, all_namespaces=True, wide=True)
    assert long.strip() in wide


def test_create_objects_use_kueuectl_syntax() -> None:
    import pytest

    from manager.cli_views import cluster_queue_object, resource_flavor_object

    cq = cluster_queue_object(
        "cq", cohort="co", nominal_quota="on-demand:cpu=10;memory=10Gi,spot:cpu=5", borrowing_limit="spot:cpu=2"
    )
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"][1] == {
        "name": "spot",
        "resources": [
            {"name": "cpu", "nominalQuota": "5", "borrowingLimit": "2"},
            {"name": "memory", "nominalQuota": "0"},
        ],
    }
    assert cq["spec"]["cohortName"] == "co"
    with pytest.raises(ValueError, match="no --nominal-quota"):
        cluster_queue_object("cq", nominal_quota="a:cpu=1", lending_limit="b:cpu=1")
    rf = resource_flavor_object("spot", node_labels={"tier": "spot"}, node_taints=["spot=true:NoSchedule"])
    assert rf["spec"]["nodeTaints"] == [{"key": "spot", "effect": "NoSchedule", "value": "true"}]


def test_kubectl_flags_go_before_or_after_the_command() -> None:
    from manager.cli import parse

    args = parse(["--context", "mgr", "list", "workloads", "-n", "team-a", "-o", "wide", "--status", "pending"])
    assert (args.context, args.namespace, args.output, args.status, args.kind) == (
        "mgr",
        "team-a",
        "wide",
        ["pending"],
        "workloads",
    )
    args = parse(["workloads", "-A", "-l", "team=a"])
    assert (args.all_namespaces, args.selector, args.context) == (True, "team=a", None)


def test_an_unknown_status_is_refused_and_a_known_one_is_matched_in_any_case(capsys: Any) -> None:
    import pytest

    from manager.cli import parse

    assert parse(["list", "workloads", "--status", "Pending", "--status", "RUNNING"]).status == ["pending", "running"]
    with pytest.raises(SystemExit):
        parse(["list", "workloads", "--status", "bogus"])
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def test_describe_wraps_a_long_reason_under_its_field_instead_of_cutting_it() -> None:
    from manager.cli_views import describe_job

    reason = (
        "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec: "
        'Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )
    workload = {
        "metadata": {"name": "job-big-1", "namespace": "ns"},
        "spec": {"queueName": "lq"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Inadmissible", "message": reason}]
        },
    }
    text = describe_job(
        job={"metadata": {"name": "big", "namespace": "ns"}, "spec": {"suspend": True}},
        workload=workload,
        worker=None,
        remote_workload=None,
        remote_job=None,
        pods=[],
        events=[],
        now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        problems=["worker cluster worker-1 cannot be read: " + "x" * 90],
    )
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    start = next(i for i, line in enumerate(lines) if line.startswith("Message:"))
    shown = " ".join(line[14:] for line in lines[start : start + 3] if line[:14].strip() in ("Message:", ""))
    assert reason in shown, text
    assert sum(line.startswith("Note:") for line in lines) == 1
