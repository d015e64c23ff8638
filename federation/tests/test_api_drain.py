import datetime as dt
from collections.abc import Generator
from typing import Any

from federation.admission.api_drain import drain
from federation.admission.decisions import Admit, Wait
from federation.tests.api_builders import (
    admitted_status,
    cluster_queue,
    flavor,
    local_queue,
    state,
    two_borrowing_queues,
    workload,
)


def _state(*workloads: dict[str, object], strategy: str = "BestEffortFIFO"):  # type: ignore[no-untyped-def]
    return state(
        flavors=[flavor("default")],
        queues=[cluster_queue("cq", {"default": {"cpu": "4"}}, queueingStrategy=strategy)],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=list(workloads),
    )


def test_a_vetoed_admission_waits_with_the_veto_message_and_leaves_quota_to_others() -> None:
    quota = _state(
        workload("a", cpu="3", created="2026-01-01T00:00:00Z"),
        workload("b", cpu="3", created="2026-01-01T00:00:01Z"),
    )
    decisions = drain(
        quota, now_seconds=0, veto=lambda admit: "no worker has room" if admit.workload.key == "ns/a" else None
    )
    by_key = {d.workload.key: d for d in decisions}
    assert isinstance(by_key["ns/a"], Wait)
    assert by_key["ns/a"].message == "no worker has room"
    assert isinstance(by_key["ns/b"], Admit), "the vetoed workload's quota must stay free for the next one"


def test_a_vetoed_strict_fifo_head_blocks_its_queue() -> None:
    quota = _state(
        workload("a", cpu="1", created="2026-01-01T00:00:00Z"),
        workload("b", cpu="1", created="2026-01-01T00:00:01Z"),
        strategy="StrictFIFO",
    )
    decisions = drain(quota, now_seconds=0, veto=lambda admit: "no worker" if admit.workload.key == "ns/a" else None)
    assert [d.workload.key for d in decisions if isinstance(d, Admit)] == []


def test_a_share_in_a_nested_cohort_counts_what_the_whole_tree_could_lend() -> None:
    """Kueue's lendable amount is what the parent could get at most (``potentialAvailable``: up to the top of the
    tree), not the parent's own subtree: a queue in a cohort of 2 cpu under a root with 10 more borrows 3 of 12."""
    from federation.admission.fair_sharing import dominant_resource_share, precise_weighted_share

    quota = state(
        flavors=[flavor("default")],
        cohorts=[{"metadata": {"name": "mid"}, "spec": {"parentName": "root"}}],
        queues=[
            cluster_queue("a", {"default": {"cpu": "2"}}, cohort="mid"),
            cluster_queue("lender", {"default": {"cpu": "10"}}, cohort="root"),
        ],
        local_queues=[local_queue("ns", "lq-a", "a")],
        workloads=[workload("a-running", cpu="5", queue="lq-a", status=admitted_status("a", "default", "5"))],
    )
    queue = quota.snapshot.cluster_queues["a"]
    assert precise_weighted_share(queue) == 250.0
    assert dominant_resource_share(queue) == 250
    assert dominant_resource_share(quota.snapshot.cohorts["mid"]) == 250, "mid borrows the same 3 of root's 12"


def test_with_fair_sharing_cohort_objects_show_kueues_weighted_share_and_nothing_without_it() -> None:
    from federation.admission.api_queue_status import cohort_status_patches

    mid = {"metadata": {"name": "mid"}, "spec": {"parentName": "root"}}
    root = {"metadata": {"name": "root"}, "spec": {}}
    quota = state(
        flavors=[flavor("default")],
        cohorts=[mid, root],
        queues=[
            cluster_queue("a", {"default": {"cpu": "2"}}, cohort="mid"),
            cluster_queue("lender", {"default": {"cpu": "10"}}, cohort="root"),
        ],
        local_queues=[local_queue("ns", "lq-a", "a")],
        workloads=[workload("a-running", cpu="5", queue="lq-a", status=admitted_status("a", "default", "5"))],
    )
    # mid borrows 3 of the 12 root could lend; a tree's top borrows from no one
    raws = {"mid": mid, "root": root}
    patches = cohort_status_patches(quota, raws, fair_sharing=True)
    assert patches == {"mid": {"fairSharing": {"weightedShare": 250}}, "root": {"fairSharing": {"weightedShare": 0}}}
    shown = {name: {**raw, "status": patches[name]} for name, raw in raws.items()}
    assert cohort_status_patches(quota, shown, fair_sharing=True) == {}, "written only when it changes"
    assert cohort_status_patches(quota, shown, fair_sharing=False) == {key: {"fairSharing": None} for key in raws}
    assert cohort_status_patches(quota, raws, fair_sharing=False) == {}


def test_flavor_usage_lists_resources_by_name_and_nothing_borrowed_outside_a_cohort() -> None:
    """As Kueue writes flavorsUsage: resources sorted by name; a queue in no cohort borrows nothing even above its
    nominal quota (lowered under a running workload)."""
    from federation.admission.api_queue_status import queue_status_patches

    raw = cluster_queue("cq", {"default": {"memory": "8Gi", "cpu": "2"}})
    quota = state(
        flavors=[flavor("default")],
        queues=[raw],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=[workload("big", cpu="3", status=admitted_status("cq", "default", "3"))],
    )
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    (usage,) = queue_status_patches(quota, {"cq": raw}, pending={}, now=now)["cq"]["flavorsUsage"]
    assert usage["resources"] == [
        {"name": "cpu", "total": "3", "borrowed": "0"},
        {"name": "memory", "total": "0", "borrowed": "0"},
    ]


def test_local_queue_status_counts_and_active() -> None:
    import datetime as dt

    from federation.admission.api_queue_status import local_queue_status_patches
    from federation.tests.api_builders import admitted_status

    quota = _state(workload("held", cpu="1", status=admitted_status("cq", "default", "1")), workload("waiting"))
    lqs = {"ns/lq": local_queue("ns", "lq", "cq"), "ns/orphan": local_queue("ns", "orphan", "missing-cq")}
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    patches = local_queue_status_patches(quota, lqs, pending={"ns/lq": 1}, now=now)
    lq = patches["ns/lq"]
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 1, 1)
    assert lq["conditions"][0]["reason"] == "Ready"
    # the ClusterQueue's flavors with what this LocalQueue holds, totals only (Kueue's LocalQueueFlavorUsage)
    held = [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]
    assert lq["flavorsReservation"] == lq["flavorsUsage"] == held
    orphan = patches["ns/orphan"]["conditions"][0]
    assert (orphan["status"], orphan["reason"]) == ("False", "ClusterQueueDoesNotExist")
    assert patches["ns/orphan"]["flavorsReservation"] is None
    written = {key: {**lqs[key], "status": status} for key, status in patches.items()}
    assert local_queue_status_patches(quota, written, pending={"ns/lq": 1}, now=now) == {}


def test_a_workload_in_its_requeue_backoff_waits_until_requeue_at_then_competes() -> None:
    backoff = {"requeueState": {"count": 1, "requeueAt": "2026-11-23T10:01:00Z"}}
    inputs: dict[str, Any] = {
        "flavors": [flavor("default")],
        "queues": [cluster_queue("cq", {"default": {"cpu": "4"}})],
        "local_queues": [local_queue("ns", "lq", "cq")],
        "workloads": [workload("late", status=backoff), workload("fresh")],
    }
    before = state(**inputs, now_seconds=dt.datetime(2026, 11, 23, 10, 0, 30, tzinfo=dt.UTC).timestamp())
    assert [blocked.raw["metadata"]["name"] for blocked in before.blocked] == ["late"]
    assert "2026-11-23T10:01:00Z" in before.blocked[0].message
    assert before.next_requeue_at == dt.datetime(2026, 11, 23, 10, 1, tzinfo=dt.UTC).timestamp()
    assert [w.key for w, _ in before.pending["cq"]] == ["ns/fresh"]
    after = state(**inputs, now_seconds=dt.datetime(2026, 11, 23, 10, 1, 1, tzinfo=dt.UTC).timestamp())
    assert after.blocked == []
    assert after.next_requeue_at is None
    assert sorted(w.key for w, _ in after.pending["cq"]) == ["ns/fresh", "ns/late"]


def test_a_workload_asking_for_topology_spreading_is_refused_with_a_reason_not_admitted_without_it() -> None:
    spreading = workload("spread")
    spreading["spec"]["podSets"][0]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-topology-spreading": (
                '{"workloadLabelSelectors":[{"key":"app","operator":"In","values":["x"]}],'
                '"rules":[{"topologyKey":"rack","maxShareAllowingPlacement":"0.5"}]}'
            )
        }
    }
    quota = _state(spreading, workload("plain"))
    assert [blocked.raw["metadata"]["name"] for blocked in quota.blocked] == ["spread"]
    assert quota.blocked[0].reason == "Misconfigured"
    assert "kueue.x-k8s.io/podset-topology-spreading" in quota.blocked[0].message
    assert "pod set main" in quota.blocked[0].message
    assert [d.workload.key for d in drain(quota, now_seconds=0) if isinstance(d, Admit)] == ["ns/plain"]


def test_fair_sharing_admits_the_head_of_the_queue_with_the_lower_share_first() -> None:
    from federation.admission.cycle import CycleConfig

    def admitted(config: CycleConfig) -> list[str]:
        decisions = drain(two_borrowing_queues(), now_seconds=0, config=config)
        return [d.workload.key for d in decisions if isinstance(d, Admit)]

    assert admitted(CycleConfig()) == ["ns/a-next"], "without fair sharing the older head goes first"
    assert admitted(CycleConfig(fair_sharing=True)) == ["ns/b-next"], "b's share after admission is the lower"


def test_with_fair_sharing_the_cluster_queue_status_shows_kueues_weighted_share() -> None:
    from federation.admission.api_queue_status import queue_status_patches

    quota = two_borrowing_queues()
    raws = {name: cluster_queue(name, {"default": {"cpu": "10"}}, cohort="c") for name in ("a", "b", "lender")}
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    patches = queue_status_patches(quota, raws, pending={}, now=now, fair_sharing=True)
    # a borrows 4 cpu of the cohort's 30: 133.3 per mille at weight 1, rounded up as Kueue does.
    assert {name: patch["fairSharing"] for name, patch in patches.items()} == {
        "a": {"weightedShare": 134},
        "b": {"weightedShare": 0},
        "lender": {"weightedShare": 0},
    }
    shown = {name: {**raw, "status": patches[name]} for name, raw in raws.items()}
    off = queue_status_patches(quota, shown, pending={}, now=now)
    assert {name: patch["fairSharing"] for name, patch in off.items()} == dict.fromkeys(raws), "removed when off"
    assert "fairSharing" not in queue_status_patches(quota, raws, pending={}, now=now)["a"]


def test_a_stopped_local_queue_shows_nothing_pending_as_kueue_does() -> None:
    from federation.admission.api_queue_status import local_queue_status_patches, pending_by_local_queue

    stopped = local_queue("ns", "lq", "cq", stopPolicy="Hold")
    quota = state(
        flavors=[flavor("default")],
        queues=[cluster_queue("cq", {"default": {"cpu": "4"}})],
        local_queues=[stopped],
        workloads=[workload("waiting")],
    )
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    pending = pending_by_local_queue(quota, set())
    assert pending == {"ns/lq": 1}, "it still waits (and says why)"
    status = local_queue_status_patches(quota, {"ns/lq": stopped}, pending=pending, now=now)["ns/lq"]
    assert (status["pendingWorkloads"], status["conditions"][0]["reason"]) == (0, "Stopped")


def test_local_queue_pending_counts_with_a_memo_match_the_counts_without() -> None:
    from federation.admission.api_queue_status import pending_by_local_queue

    quota = _state(workload("a"), workload("b"), workload("lost", queue="missing"))
    memo: dict[str, Any] = {}
    plain = pending_by_local_queue(quota, set())
    assert plain == {"ns/lq": 2, "ns/missing": 1}
    assert pending_by_local_queue(quota, set(), memo=memo) == plain
    assert pending_by_local_queue(quota, set(), memo=memo) == plain, "reused counts are the same"
    assert pending_by_local_queue(quota, {"ns/a"}, memo=memo, admitted_in={"cq"}) == {"ns/lq": 1, "ns/missing": 1}
    fewer = _state(workload("a"))
    assert pending_by_local_queue(fewer, set(), memo=memo) == {"ns/lq": 1}, "a changed list is counted again"


def test_cluster_queue_pending_counts_the_workloads_parked_in_backoff_or_out_of_its_namespaces() -> None:
    """Kueue's pendingWorkloads counts its queue's heap and its inadmissible list: a workload in requeue backoff,
    or in a namespace the ClusterQueue does not select, is pending there too; one of a missing LocalQueue is not."""
    from federation.admission.api_queue_status import pending_by_cluster_queue

    backing_off = workload("backoff")
    backing_off["status"] = {"requeueState": {"count": 1, "requeueAt": "2026-01-01T01:00:00Z"}}
    elsewhere = workload("other-ns")
    elsewhere["metadata"]["namespace"] = "team-b"
    quota = state(
        flavors=[flavor("default")],
        queues=[cluster_queue("cq", {"default": {"cpu": "4"}}, namespaceSelector={"matchLabels": {"team": "a"}})],
        local_queues=[local_queue("ns", "lq", "cq"), local_queue("team-b", "lq", "cq")],
        workloads=[workload("ready"), backing_off, elsewhere, workload("lost", queue="missing")],
        namespaces={"ns": {"team": "a"}, "team-b": {}},
        now_seconds=dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp(),
    )
    assert pending_by_cluster_queue(quota, set()) == {"cq": 3}
    assert pending_by_cluster_queue(quota, {"ns/ready"}) == {"cq": 2}


def _stop_before_cycle(n: int) -> tuple[list[int], Any]:
    """A ``stop`` that ends the drain before its ``n``-th cycle, and the cycle numbers it was asked before."""
    asked: list[int] = []

    def stop() -> bool:
        asked.append(len(asked) + 2)  # asked before every cycle but the first
        return asked[-1] >= n

    return asked, stop


def test_a_stopped_drain_decides_the_cycles_it_ran_and_leaves_the_rest_undecided_and_unparked() -> None:
    from federation.admission.parking import ParkingLot

    def one_cpu_quota(*workloads: dict[str, object]) -> Any:
        return state(
            flavors=[flavor("default")],
            queues=[cluster_queue("cq", {"default": {"cpu": "1"}})],
            local_queues=[local_queue("ns", "lq", "cq")],
            workloads=list(workloads),
        )

    names = [("a", "00"), ("b", "01"), ("c", "02"), ("d", "03")]
    lot = ParkingLot()
    asked, stop = _stop_before_cycle(3)
    first = drain(
        one_cpu_quota(*(workload(n, created=f"2026-01-01T00:00:{s}Z") for n, s in names)),
        now_seconds=100,
        parking=lot,
        stop=stop,
    )
    assert asked == [2, 3], "asked before each cycle but the first, and not again once it said stop"
    assert [(type(d).__name__, d.workload.key) for d in first] == [("Admit", "ns/a"), ("Wait", "ns/b")]
    assert "ns/b" in lot, "a verdict the stopped pass reached is parked as usual"
    assert "ns/c" not in lot, "what it did not reach is left to the next pass"
    assert "ns/d" not in lot

    # the next pass sees a's reservation written; b stays parked, c and d are decided now
    admitted_a = workload("a", created="2026-01-01T00:00:00Z", status=admitted_status("cq", "default", "1"))
    rest = [workload(n, created=f"2026-01-01T00:00:{s}Z") for n, s in names[1:]]
    second = drain(one_cpu_quota(admitted_a, *rest), now_seconds=101, parking=lot)
    assert [(type(d).__name__, d.workload.key) for d in second] == [("Wait", "ns/c"), ("Wait", "ns/d")]


def test_a_drain_that_is_never_told_to_stop_decides_everything_and_stop_is_not_asked_for_one_cycle() -> None:
    asked, stop = _stop_before_cycle(100)
    decisions = drain(_state(workload("only")), now_seconds=0, stop=stop)
    assert [d.workload.key for d in decisions] == ["ns/only"]
    assert asked == []


def _steps_taken(steps: Generator[None, None, Any]) -> tuple[int, Any]:
    """How many steps are left in ``steps`` when they are all taken, and what it returns then."""
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return taken, done.value
        taken += 1


def test_a_state_built_in_steps_yields_per_batch_of_workloads_looked_at_and_equals_one_built_at_once(
    monkeypatch: Any,
) -> None:
    from federation.admission import api_state
    from federation.admission.api_state import QuotaStateBuilder

    monkeypatch.setattr(api_state, "LOOKS_PER_STEP", 2)
    workloads = [workload(f"w{i}", created=f"2026-01-01T00:00:0{i}Z") for i in range(5)]
    inputs: dict[str, Any] = {
        "flavors": [flavor("default")],
        "cluster_queues": [cluster_queue("cq", {"default": {"cpu": "4"}})],
        "cohorts": [],
        "local_queues": [local_queue("ns", "lq", "cq")],
        "namespaces": [{"metadata": {"name": "ns"}}],
    }
    builder = QuotaStateBuilder()
    steps = builder.build_steps(**inputs, workloads=workloads, changed=set(), lookup=lambda key: None)
    taken, stepped = _steps_taken(steps)
    assert taken == 2, "five Workloads looked at in batches of two: a step after the second and the fourth"
    at_once = QuotaStateBuilder().build(**inputs, workloads=workloads)
    assert (
        [w.key for w, _ in stepped.pending["cq"]]
        == [w.key for w, _ in at_once.pending["cq"]]
        == [f"ns/w{i}" for i in range(5)]
    )
    again = builder.build_steps(**inputs, workloads=workloads, changed={"ns/w0"}, lookup=lambda key: workloads[0])
    assert sum(1 for _ in again) == 0, "one changed Workload is looked at in one go"
    by_key = {f"ns/w{i}": {**w, "metadata": {**w["metadata"], "resourceVersion": "2"}} for i, w in enumerate(workloads)}
    looked_up: list[str] = []

    def lookup(key: str) -> dict[str, Any]:
        looked_up.append(key)
        return by_key[key]

    changed_steps = builder.build_steps(**inputs, workloads=workloads, changed=set(by_key), lookup=lookup)
    next(changed_steps)
    assert sorted(looked_up) == sorted(by_key), "every changed Workload is looked up before the first step"
    rest, changed_state = _steps_taken(changed_steps)
    assert rest == 1, "five changed Workloads looked at in batches of two: a step after the second and the fourth"
    assert [w.key for w, _ in changed_state.pending["cq"]] == [f"ns/w{i}" for i in range(5)]
