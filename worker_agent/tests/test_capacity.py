from __future__ import annotations

import datetime as dt
from typing import Any

import anyio

from federation.admission.api_queue_status import pending_by_cluster_queue, queue_status_patches
from federation.admission.api_state import QuotaState
from federation.kube.overlay import RECENT_DELETIONS
from federation.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES
from federation.obs.metrics import Metrics
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, state, workload
from worker_agent.capacity_publisher import CapacityPublisher
from worker_agent.decisions.capacity import capacity_status
from worker_agent.decisions.jobs import start_decision
from worker_agent.overlay import RecentWrites
from worker_agent.world import World

NOW = dt.datetime(2026, 1, 1, 0, 3, tzinfo=dt.UTC)


def worker_state() -> QuotaState:
    return state(
        flavors=[flavor("rf")],
        queues=[
            cluster_queue("cq", {"rf": {"cpu": 4}}, cohort="co"),
            cluster_queue("other", {"rf": {"cpu": 2}}, cohort="co"),
            cluster_queue("solo", {"rf": {"cpu": 8, "memory": "16Gi"}}),
        ],
        local_queues=[local_queue("ns", "lq", "cq"), local_queue("ns", "solo", "solo")],
        workloads=[
            workload("running", cpu="3", status=admitted_status("cq", "rf", "3")),
            workload("done", cpu="4", status=admitted_status("cq", "rf", "4", finished=True)),
            workload("waiting", cpu="9", queue="solo"),
        ],
    )


def test_report_has_nominal_usage_free_and_borrowing_headroom_per_queue_and_flavor() -> None:
    local = worker_state()
    status = capacity_status(local, pending_counts=pending_by_cluster_queue(local, set()), flavors={})
    by_name = {q["name"]: q for q in status["clusterQueues"]}
    assert by_name["cq"] == {
        "name": "cq",
        "cohortName": "co",
        "active": True,
        "pendingWorkloads": 0,
        "flavors": [
            {
                "name": "rf",
                "resources": [{"name": "cpu", "nominal": "4", "usage": "3", "free": "1", "borrowingHeadroom": "2"}],
            }
        ],
    }
    assert by_name["solo"]["pendingWorkloads"] == 1
    assert "cohortName" not in by_name["solo"]
    memory = next(r for r in by_name["solo"]["flavors"][0]["resources"] if r["name"] == "memory")
    assert memory == {"name": "memory", "nominal": "16Gi", "usage": "0", "free": "16Gi"}
    assert status["localQueues"] == [
        {"namespace": "ns", "name": "lq", "clusterQueue": "cq"},
        {"namespace": "ns", "name": "solo", "clusterQueue": "solo"},
    ]


def test_cluster_queue_status_like_kueue_and_written_only_on_change() -> None:
    local = worker_state()
    queues = {name: cluster_queue(name, {"rf": {"cpu": 4}}) for name in ("cq", "other", "solo")}
    patches = queue_status_patches(local, queues, pending={"solo": 1}, now=NOW)
    cq = patches["cq"]
    assert (cq["pendingWorkloads"], cq["reservingWorkloads"], cq["admittedWorkloads"]) == (0, 1, 1)
    assert cq["flavorsUsage"] == [{"name": "rf", "resources": [{"name": "cpu", "total": "3", "borrowed": "0"}]}]
    assert cq["flavorsReservation"] == cq["flavorsUsage"]
    active = cq["conditions"][0]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Ready")
    assert patches["solo"]["pendingWorkloads"] == 1
    written = {name: {**queues[name], "status": status} for name, status in patches.items()}
    assert queue_status_patches(local, written, pending={"solo": 1}, now=NOW) == {}


def test_overlay_serves_our_write_until_the_cache_has_it() -> None:
    overlay = RecentWrites()
    cached = {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "10"}}
    written = {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "12"}, "status": {"x": 1}}
    overlay.remember(written)
    assert overlay.view(cached) is written
    overlay.observe("MODIFIED", {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "11"}})
    assert overlay.view(cached) is written
    overlay.observe("MODIFIED", {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "12"}})
    assert overlay.view(cached) is cached
    overlay.remember(written)
    overlay.observe("DELETED", cached)
    assert len(overlay) == 0


def test_overlay_shows_the_cache_when_the_watch_was_ahead_of_the_write_answer() -> None:
    """A Job copy suspended by the agent: its own event (12) and the Job controller's (13: no pod active) reached the
    cache before the agent remembered the answer (12). The cache is shown, with no event after to clear the entry
    (the copy's Workload was never released otherwise, CI after session 18)."""
    overlay = RecentWrites()
    written = {"metadata": {"namespace": "ns", "name": "j", "resourceVersion": "12"}, "status": {"active": 1}}
    for version in ("12", "13"):
        overlay.observe("MODIFIED", {"metadata": {"namespace": "ns", "name": "j", "resourceVersion": version}})
    overlay.remember(written)
    latest = {"metadata": {"namespace": "ns", "name": "j", "resourceVersion": "13"}, "status": {}}
    assert overlay.view(latest) is latest
    assert overlay.get("ns/j", latest) is latest
    assert len(overlay) == 0
    overlay.remember(written)
    assert overlay.get("ns/j", None) is written  # not in the cache at all (yet): ours


def test_overlay_does_not_show_an_answer_for_an_object_the_cache_saw_deleted() -> None:
    """The Workload copy was patched by the agent and deleted by kfed-manager, and the watch delivered both before
    the agent remembered the patch's answer: a read by name finds nothing, not a Workload that is gone."""
    overlay = RecentWrites()
    meta = {"namespace": "ns", "name": "w", "uid": "u-1"}
    overlay.observe("DELETED", {"metadata": {**meta, "resourceVersion": "14"}})
    overlay.remember({"metadata": {**meta, "resourceVersion": "12"}, "status": {"admission": {}}})
    overlay.show({"metadata": {**meta, "resourceVersion": "12"}, "status": {}})
    assert overlay.get("ns/w", None) is None
    assert len(overlay) == 0
    again = {"metadata": {**meta, "uid": "u-2", "resourceVersion": "20"}}  # made again under the same name
    overlay.remember(again)
    assert overlay.get("ns/w", None) is again
    for n in range(RECENT_DELETIONS):  # the overlay forgets the oldest deletions past its bound
        overlay.observe("DELETED", {"metadata": {"namespace": "ns", "name": f"o{n}", "uid": f"o{n}"}})
    first = {"metadata": {**meta, "resourceVersion": "12"}}
    overlay.remember(first)
    assert overlay.get("ns/w", None) is first


def test_overlay_shows_an_in_memory_change_until_the_cache_has_a_later_version() -> None:
    overlay = RecentWrites()
    cached = {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "10"}}
    finished = {**cached, "status": {"conditions": [{"type": "Finished", "status": "True"}]}}
    before = overlay.version
    overlay.show(finished)
    assert overlay.version != before
    assert overlay.view(cached) is finished
    assert overlay.view(cached) is finished  # the same version again: still ours
    later = {"metadata": {"namespace": "ns", "name": "w", "resourceVersion": "11"}}
    assert overlay.view(later) is later
    overlay.show(finished)
    overlay.observe("MODIFIED", cached)
    assert overlay.view(cached) is finished
    overlay.observe("MODIFIED", later)
    assert len(overlay) == 0


def test_report_carries_the_tas_summary_that_the_capacity_schema_accepts_and_the_manager_reads_back() -> None:
    from federation.api.capacity import ClusterCapacityStatus
    from federation.topology import NodeSpec, summarize
    from federation.topology.report import summary_entry, summary_from_entry
    from federation.topology.tests.helpers import grid, snapshot_of

    milli_memory = [  # the agent's units: milli-units, pods whole (federation.topology.report)
        NodeSpec(n.name, n.labels, {**n.allocatable, "memory": n.allocatable["memory"] * 1000}) for n in grid(2, 2, 4)
    ]
    summary = summarize(snapshot_of(milli_memory))
    entry = summary_entry("tas", "default", summary)
    local = worker_state()
    status = capacity_status(local, pending_counts={}, flavors={}, topologies=[entry])
    assert status["topologies"] == [entry]
    rack = next(d for d in entry["topologySummary"] if d["levelValues"] == ["b0", "b0-r1"])
    assert rack == {
        "levelValues": ["b0", "b0-r1"],
        "nodes": 4,
        "free": {"cpu": "32", "memory": "128Gi", "pods": "440"},
        "largestNodeFree": {"cpu": "8", "memory": "32Gi", "pods": "110"},
    }
    ClusterCapacityStatus.model_validate({"generation": 1, "observedTime": "2026-01-01T00:00:00Z", **status})
    assert summary_from_entry(entry) == summary


def test_report_lists_the_node_labels_and_tolerations_of_each_flavor_a_reported_queue_uses() -> None:
    from federation.admission.api_quotas import flavor_info
    from federation.api.capacity import ClusterCapacityStatus

    toleration = {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    raw = [
        flavor("rf", nodeLabels={"pool": "a", "zone": "z1"}, tolerations=[toleration]),
        flavor("plain"),
        flavor("unused", nodeLabels={"pool": "u"}),
    ]
    infos = {f["metadata"]["name"]: flavor_info(f) for f in raw}
    local = state(
        flavors=raw,
        queues=[
            cluster_queue("cq", {"rf": {"cpu": 4}, "plain": {"cpu": 2}}),
            cluster_queue("ghost", {"missing": {"cpu": 1}, "rf": {"cpu": 1}}),
        ],
        local_queues=[],
        workloads=[],
    )
    status = capacity_status(local, pending_counts={}, flavors=infos)
    # the tolerations are what the agent injects at Job start: the ResourceFlavor's, as Kubernetes writes them
    assert status["flavors"] == [
        {"name": "plain", "topologyName": ""},
        {"name": "rf", "topologyName": "", "nodeLabels": {"pool": "a", "zone": "z1"}, "tolerations": [toleration]},
    ]
    parsed = ClusterCapacityStatus.model_validate({"generation": 1, "observedTime": "2026-01-01T00:00:00Z", **status})
    assert parsed.flavor("rf") is not None
    assert parsed.flavor("missing") is None
    # exactly what the agent injects when it starts a Job admitted to that flavor
    job = {"metadata": {"name": "j"}, "spec": {"suspend": True, "template": {"spec": {}}}}
    admitted = workload("j", cpu="1", status=admitted_status("cq", "rf", "1"))
    start = start_decision(job, admitted, flavors=infos)
    assert start is not None
    injected = start.patch["spec"]["template"]["spec"]
    assert (injected["nodeSelector"], injected["tolerations"]) == (
        status["flavors"][1]["nodeLabels"],
        status["flavors"][1]["tolerations"],
    )


def test_report_flavors_follow_the_resource_flavor_objects() -> None:
    from federation.admission.api_quotas import flavor_info

    queues = [cluster_queue("cq", {"rf": {"cpu": 4}})]
    before = capacity_status(
        state(flavors=[flavor("rf")], queues=queues, local_queues=[], workloads=[]),
        pending_counts={},
        flavors={"rf": flavor_info(flavor("rf"))},
    )
    edited = flavor("rf", nodeLabels={"pool": "b"}, tolerations=[{"key": "spot", "operator": "Exists"}])
    after = capacity_status(
        state(flavors=[edited], queues=queues, local_queues=[], workloads=[]),
        pending_counts={},
        flavors={"rf": flavor_info(edited)},
    )
    assert before["flavors"] == [{"name": "rf", "topologyName": ""}]
    assert after["flavors"] == [
        {
            "name": "rf",
            "topologyName": "",
            "nodeLabels": {"pool": "b"},
            "tolerations": [{"key": "spot", "operator": "Exists"}],
        }
    ]
    gone = capacity_status(
        state(flavors=[], queues=queues, local_queues=[], workloads=[]), pending_counts={}, flavors={}
    )
    assert gone["flavors"] == []


class _QueueApi:
    """Answers each patch with the object at the next resourceVersion; records (kind, name, version sent)."""

    cluster = "w"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self._version = 100

    async def _answer(self, resource: Any, name: str, body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        self.sent.append((resource.label, name, str(body["metadata"]["resourceVersion"])))
        self._version += 1
        meta = {**body["metadata"], "name": name, "resourceVersion": str(self._version)}
        if namespace:
            meta["namespace"] = namespace
        return {"metadata": meta, "status": body.get("status") or {}}

    async def patch(self, resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return await self._answer(resource, name, body, kw.get("namespace"))

    async def patch_status(self, resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return await self._answer(resource, name, body, kw.get("namespace"))


def test_queue_status_written_again_before_the_watch_shows_the_last_write_goes_at_the_written_version() -> None:
    """The watch lags more than the status interval: the next ClusterQueue and LocalQueue status writes start
    from the resourceVersions the agent's own writes returned, not from the cache's older ones (a 409 Conflict)."""
    api = _QueueApi()
    world = World(api)  # type: ignore[arg-type]
    world.flavors.store.upsert(flavor("rf"))
    cq = cluster_queue("cq", {"rf": {"cpu": 4}})
    cq["metadata"].update(resourceVersion="3")
    world.cluster_queues.store.upsert(cq)
    lq = local_queue("ns", "lq", "cq")
    lq["metadata"].update(resourceVersion="4")
    world.local_queues.store.upsert(lq)
    publisher = CapacityPublisher(world, cluster="w", metrics=Metrics(), lock=anyio.Lock(), queue_status_interval=0.0)

    async def twice() -> None:
        await publisher._write_queue_status(world.local_state(), {"cq": 0})
        world.workloads._apply("ADDED", workload("w1", queue="lq"))  # one more pending: both statuses change
        await publisher._write_queue_status(world.local_state(), {"cq": 1})

    anyio.run(twice)
    by_kind: dict[str, list[str]] = {}
    for kind, _name, version in api.sent:
        by_kind.setdefault(kind, []).append(version)
    cq_sent, lq_sent = by_kind[CLUSTER_QUEUES.label], by_kind[LOCAL_QUEUES.label]
    assert cq_sent[0] == "3"
    assert len(cq_sent) >= 2
    assert "3" not in cq_sent[1:]  # each later write at the version the one before returned
    assert lq_sent[0] == "4"
    assert len(lq_sent) == 2
    assert lq_sent[1] != "4"


def test_a_stopped_or_broken_cluster_queue_is_reported_inactive_with_why() -> None:
    local = state(
        flavors=[flavor("rf")],
        queues=[
            cluster_queue("held", {"rf": {"cpu": 4}}, stopPolicy="Hold"),
            cluster_queue("broken", {"missing": {"cpu": 4}}),
            cluster_queue("fine", {"rf": {"cpu": 4}}),
        ],
        local_queues=[],
        workloads=[],
    )
    status = capacity_status(local, pending_counts={}, flavors={})
    by_name = {q["name"]: q for q in status["clusterQueues"]}
    assert (by_name["held"]["active"], by_name["held"]["inactiveReason"]) == (False, "ClusterQueue is stopped")
    assert by_name["broken"]["active"] is False
    assert "missing" in by_name["broken"]["inactiveReason"]
    assert by_name["fine"]["active"] is True
    assert "inactiveReason" not in by_name["fine"]


def test_a_stopped_local_queue_is_reported_stopped() -> None:
    local = state(
        flavors=[flavor("rf")],
        queues=[cluster_queue("cq", {"rf": {"cpu": 4}})],
        local_queues=[local_queue("ns", "held", "cq", stopPolicy="Hold"), local_queue("ns", "open", "cq")],
        workloads=[],
    )
    routes = capacity_status(local, pending_counts={}, flavors={})["localQueues"]
    assert routes == [
        {"namespace": "ns", "name": "held", "clusterQueue": "cq", "stopped": True},
        {"namespace": "ns", "name": "open", "clusterQueue": "cq"},
    ]


def test_a_local_queue_whose_cluster_queue_does_not_select_its_namespace_is_reported_so() -> None:
    team = {"matchLabels": {"team": "a"}}
    local = state(
        flavors=[flavor("rf")],
        queues=[
            cluster_queue("team-a", {"rf": {"cpu": 4}}, selector=team),
        ],
        local_queues=[local_queue("ns", "mine", "team-a"), local_queue("other", "theirs", "team-a")],
        workloads=[],
        namespaces={"ns": {"team": "a"}, "other": {"team": "b"}},
    )
    routes = {r["name"]: r for r in capacity_status(local, pending_counts={}, flavors={})["localQueues"]}
    assert "namespaceNotSelected" not in routes["mine"]
    assert routes["theirs"]["namespaceNotSelected"] is True


def test_a_cluster_queue_without_a_namespace_selector_selects_no_local_queue() -> None:
    queue = cluster_queue("cq", {"rf": {"cpu": 4}})
    del queue["spec"]["namespaceSelector"]  # Kueue's default: null selects no namespace
    local = state(flavors=[flavor("rf")], queues=[queue], local_queues=[local_queue("ns", "lq", "cq")], workloads=[])
    assert capacity_status(local, pending_counts={}, flavors={})["localQueues"] == [
        {"namespace": "ns", "name": "lq", "clusterQueue": "cq", "namespaceNotSelected": True}
    ]


def test_report_lists_each_flavors_node_taints() -> None:
    from federation.admission.api_quotas import flavor_info
    from federation.api.capacity import ClusterCapacityStatus

    taints = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, {"key": "spot", "effect": "NoExecute"}]
    raw = [flavor("rf", nodeTaints=taints)]
    local = state(flavors=raw, queues=[cluster_queue("cq", {"rf": {"cpu": 4}})], local_queues=[], workloads=[])
    status = capacity_status(local, pending_counts={}, flavors={"rf": flavor_info(raw[0])})
    assert status["flavors"] == [{"name": "rf", "topologyName": "", "nodeTaints": taints}]
    ClusterCapacityStatus.model_validate({"generation": 1, "observedTime": "2026-01-01T00:00:00Z", **status})


def test_a_local_queue_whose_namespace_has_limit_ranges_carries_their_summary() -> None:
    from federation.limit_ranges import limit_range_from_entry, summarize

    limit_range = {
        "metadata": {"name": "lr", "namespace": "ns"},
        "spec": {"limits": [{"type": "Pod", "max": {"cpu": "2", "memory": "1Gi"}}]},
    }
    local = state(
        flavors=[flavor("rf")],
        queues=[cluster_queue("cq", {"rf": {"cpu": 4}})],
        local_queues=[local_queue("ns", "lq", "cq"), local_queue("other", "lq", "cq")],
        workloads=[],
        namespaces={"ns": {}, "other": {}},
        limit_ranges=[limit_range],
    )
    routes = {r["namespace"]: r for r in capacity_status(local, pending_counts={}, flavors={})["localQueues"]}
    assert routes["ns"]["limitRange"] == {"podMax": {"cpu": "2", "memory": "1073741824"}}
    assert "limitRange" not in routes["other"]
    assert limit_range_from_entry(routes["ns"]["limitRange"]) == summarize([limit_range])


def test_report_lists_the_runtime_class_overheads_in_the_shape_the_schema_accepts() -> None:
    import dataclasses

    from federation.api.capacity import ClusterCapacityStatus
    from federation.podspec import runtime_overheads

    classes = [
        {"metadata": {"name": "sandboxed"}, "handler": "h", "overhead": {"podFixed": {"cpu": "250m", "memory": "1Gi"}}},
        {"metadata": {"name": "plain"}, "handler": "h"},
    ]
    local = dataclasses.replace(worker_state(), runtime_overheads=runtime_overheads(classes))
    status = capacity_status(local, pending_counts={}, flavors={})
    assert status["runtimeClasses"] == [{"name": "sandboxed", "overhead": {"cpu": "250m", "memory": "1Gi"}}]
    report = {"generation": 1, "observedTime": "2026-01-01T00:00:00Z", **status}
    ClusterCapacityStatus.model_validate(report)
    none = capacity_status(worker_state(), pending_counts={}, flavors={})
    assert none["runtimeClasses"] == [], "said even when none has an overhead (absent: an agent that does not say)"
