from typing import Any

from federation.admission.api_state import IgnoredObject, QuotaStateBuilder
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, workload


def _inputs(bad_flavor_version: str) -> dict[str, Any]:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "broken", "resourceVersion": bad_flavor_version},
        "spec": {"nodeLabels": "not-a-map"},
    }
    good = flavor("default")
    good["metadata"]["resourceVersion"] = "1"
    return {
        "flavors": [good, bad],
        "cluster_queues": [cluster_queue("cq", {"default": {"cpu": "4"}})],
        "cohorts": [],
        "local_queues": [local_queue("ns", "lq", "cq")],
        "namespaces": [{"metadata": {"name": "ns"}}],
        "workloads": [workload("w", cpu="1")],
    }


def test_a_malformed_flavor_is_reported_once_per_version_and_the_rest_still_schedules() -> None:
    builder = QuotaStateBuilder()
    state = builder.build(**_inputs("5"))
    assert [(i.kind, i.name) for i in builder.ignored] == [("ResourceFlavor", "broken")]
    assert isinstance(builder.ignored[0], IgnoredObject)
    assert "cq" in state.pending
    builder.build(**_inputs("5"))
    assert builder.ignored == [], "the same version is not reported again"
    builder.build(**_inputs("6"))
    assert [i.name for i in builder.ignored] == ["broken"], "a new version is read (and reported) again"


def test_a_pending_workload_is_parsed_again_only_when_its_spec_changes() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    raw = inputs["workloads"][0]
    raw["metadata"].update(uid="u-1", generation=1)
    first = builder.build(**inputs).pending["cq"][0][0]
    assert builder.build(**inputs).pending["cq"][0][0] is first, "an unchanged spec is not parsed again"
    changed = {**raw, "metadata": {**raw["metadata"], "generation": 2}, "spec": {**raw["spec"], "priority": 7}}
    again = builder.build(**{**inputs, "workloads": [changed]}).pending["cq"][0][0]
    assert again is not first
    assert again.priority == 7


def test_a_quota_holding_workload_is_read_again_only_when_it_changes() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    raw = inputs["workloads"][0]
    raw["metadata"].update(uid="u-2", generation=1, resourceVersion="10")
    raw["status"] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}}],
        },
    }
    first = builder.build(**inputs).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert first is not None
    again = builder.build(**inputs).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert again is first, "an unchanged workload is not read again"
    evicted = {
        **raw,
        "metadata": {**raw["metadata"], "resourceVersion": "11"},
        "status": {
            **raw["status"],
            "conditions": [*raw["status"]["conditions"], {"type": "Evicted", "status": "True", "reason": "x"}],
        },
    }
    changed = builder.build(**{**inputs, "workloads": [evicted]}).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert changed is not None
    assert changed.evicted


def test_an_unchanged_workload_object_is_not_classified_again_and_a_replaced_one_is() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    inputs["workloads"] = [workload("w", cpu="1"), workload("lost", queue="missing"), workload("v", cpu="2")]
    first = builder.build(**inputs)
    assert builder._classified.hits == 0
    again = builder.build(**inputs)
    assert builder._classified.hits == 3, "the same objects are not classified again"
    assert [(w.key, raw) for w, raw in again.pending["cq"]] == [(w.key, raw) for w, raw in first.pending["cq"]]
    assert [b.message for b in again.blocked] == ["LocalQueue missing doesn't exist"]
    replaced = {**inputs["workloads"][0], "spec": {**inputs["workloads"][0]["spec"], "queueName": "missing"}}
    replaced["metadata"] = {**replaced["metadata"], "resourceVersion": "8"}
    third = builder.build(**{**inputs, "workloads": [replaced, *inputs["workloads"][1:]]})
    assert builder._classified.hits == 2
    assert [w.key for w, _ in third.pending["cq"]] == ["ns/v"]
    assert len(third.blocked) == 2


def test_a_local_queue_change_classifies_every_workload_again() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    assert "cq" in builder.build(**inputs).pending
    stopped = local_queue("ns", "lq", "cq")
    stopped["spec"]["stopPolicy"] = "Hold"
    state = builder.build(**{**inputs, "local_queues": [stopped]})
    assert builder._classified.hits == 0
    assert state.pending == {}
    assert [b.message for b in state.blocked] == ["LocalQueue lq is inactive"]
    namespace_labels_changed = builder.build(
        **{**inputs, "namespaces": [{"metadata": {"name": "ns", "labels": {"a": "b"}}}]}
    )
    assert builder._classified.hits == 0
    assert "cq" in namespace_labels_changed.pending


def test_a_workload_in_its_requeue_backoff_is_looked_at_again_when_it_ends() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    inputs["workloads"] = [workload("late", status={"requeueState": {"count": 1, "requeueAt": "2026-11-23T10:01:00Z"}})]
    before = builder.build(**inputs, now_seconds=1795428030.0)  # 10:00:30
    assert before.pending == {}
    assert len(before.blocked) == 1
    after = builder.build(**inputs, now_seconds=1795428061.0)  # 10:01:01
    assert [w.key for w, _ in after.pending["cq"]] == ["ns/late"]


def test_queue_order_is_kept_for_the_same_workloads_and_redone_when_one_arrives() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    inputs["workloads"] = [
        workload("young", created="2026-01-01T00:00:09Z"),
        workload("old", created="2026-01-01T00:00:01Z"),
    ]
    assert [w.key for w, _ in builder.build(**inputs).pending["cq"]] == ["ns/old", "ns/young"]
    assert [w.key for w, _ in builder.build(**inputs).pending["cq"]] == ["ns/old", "ns/young"]
    inputs["workloads"].append(workload("urgent", priority=9, created="2026-01-01T00:00:10Z"))
    assert [w.key for w, _ in builder.build(**inputs).pending["cq"]] == ["ns/urgent", "ns/old", "ns/young"]


def _holder(name: str, cpu: str, rv: str, *, finished: bool = False) -> dict[str, Any]:
    raw = workload(name, cpu=cpu, status=admitted_status("cq", "default", cpu, finished=finished))
    raw["metadata"].update(uid=f"u-{name}", resourceVersion=rv)
    return raw


def test_a_quota_holder_is_charged_from_its_remembered_entry_and_classified_again_once_replaced() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    inputs["workloads"] = [_holder("a", "1", "10"), _holder("b", "2", "11")]
    first = builder.build(**inputs)
    used = dict(first.snapshot.cluster_queues["cq"].usage)
    assert sum(used.values()) > 0
    again = builder.build(**inputs)
    assert builder._classified.hits == 2, "the same quota holders are not read again"
    assert again.snapshot is not first.snapshot
    assert again.snapshot.cluster_queues["cq"].usage == used, "each new snapshot is charged all the same"
    assert {w.key for w in again.snapshot.admitted_workloads()} == {"ns/a", "ns/b"}
    assert [r["metadata"]["name"] for r in again.reserving["cq"]] == ["a", "b"]
    finished = _holder("a", "1", "12", finished=True)  # the watch cache replaces the object
    third = builder.build(**{**inputs, "workloads": [finished, inputs["workloads"][1]]})
    assert builder._classified.hits == 1
    assert {w.key for w in third.snapshot.admitted_workloads()} == {"ns/b"}, "a finished holder holds nothing"
    assert [r["metadata"]["name"] for r in third.reserving["cq"]] == ["b"]
    assert sum(third.snapshot.cluster_queues["cq"].usage.values()) == 2 * sum(used.values()) // 3
    gone = builder.build(**{**inputs, "cluster_queues": [cluster_queue("other", {"default": {"cpu": "4"}})]})
    assert list(gone.snapshot.admitted_workloads()) == [], "nothing is charged to a ClusterQueue that is gone"


def _summary(state: Any) -> tuple[object, ...]:
    return (
        {queue: [w.key for w, _ in items] for queue, items in state.pending.items()},
        sorted((b.raw["metadata"]["name"], b.reason, b.message) for b in state.blocked),
        sorted(w.key for w in state.snapshot.admitted_workloads()),
        dict(state.snapshot.cluster_queues["cq"].usage),
        {queue: sorted(r["metadata"]["name"] for r in raws) for queue, raws in state.reserving.items()},
        state.next_requeue_at,
    )


def test_looking_only_at_the_changed_keys_builds_the_state_a_full_look_builds() -> None:
    """Random replacements, deletions and additions of pending, blocked, backoff, holding and finished Workloads:
    a builder told only the changed keys, and one that looks at every Workload each time, agree after every step
    with a new builder (nothing remembered)."""
    import random

    rng = random.Random(7)
    inputs = _inputs("5")
    inputs["cluster_queues"] = [cluster_queue("cq", {"default": {"cpu": "40"}})]
    now = 1795428030.0  # 2026-11-23T10:00:30Z

    def make(name: str, version: int) -> dict[str, Any]:
        kind = rng.choice(["pending", "pending", "missing-lq", "backoff", "holder", "finished"])
        cpu = str(rng.randint(1, 3))
        if kind == "missing-lq":
            raw = workload(name, cpu=cpu, queue="missing")
        elif kind == "backoff":
            at = rng.choice(["2026-11-23T10:01:00Z", "2026-11-23T09:59:00Z"])
            raw = workload(name, cpu=cpu, status={"requeueState": {"count": 1, "requeueAt": at}})
        elif kind in ("holder", "finished"):
            raw = workload(name, cpu=cpu, status=admitted_status("cq", "default", cpu, finished=kind == "finished"))
        else:
            raw = workload(
                name, cpu=cpu, priority=rng.randint(0, 3), created=f"2026-01-01T00:00:{rng.randint(10, 59)}Z"
            )
        raw["metadata"].update(uid=f"u-{name}-{version}", resourceVersion=str(version), generation=version)
        return raw

    store = {f"ns/w{i}": make(f"w{i}", 1) for i in range(40)}
    incremental, full = QuotaStateBuilder(), QuotaStateBuilder()
    version = 1
    for step in range(60):
        changed: set[str] = set()
        for _ in range(rng.randint(0, 4)):
            version += 1
            key = f"ns/w{rng.randint(0, 49)}"
            if key in store and rng.random() < 0.25:
                del store[key]
            else:
                store[key] = make(key.split("/")[1], version)
            changed.add(key)
        objects = list(store.values())
        told = incremental.build(**{**inputs, "workloads": objects}, now_seconds=now, changed=changed, lookup=store.get)
        looked = full.build(**{**inputs, "workloads": objects}, now_seconds=now)
        fresh = QuotaStateBuilder().build(**{**inputs, "workloads": objects}, now_seconds=now)
        assert _summary(told) == _summary(fresh), f"step {step}: told the changed keys"
        assert _summary(looked) == _summary(fresh), f"step {step}: looked at all"
        if step > 0:
            assert incremental._classified.hits >= len(store) - len(changed) - 10
