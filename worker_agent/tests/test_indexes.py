"""The agent's indexes (``worker_agent.indexes``): they answer what a walk over every object would, while deriving
only for the keys that changed."""

from __future__ import annotations

import datetime as dt
from typing import Any

import anyio
import pytest

from federation.kube.recorder import EventRecorder
from federation.kube.trigger import Trigger
from federation.obs.metrics import Metrics
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, workload
from worker_agent.decisions.facts import workload_facts
from worker_agent.indexes import ChangedKeys, JobIndex, KeySource, WorkloadIndex
from worker_agent.job_passes import JobPasses
from worker_agent.tests.test_facts import COPY, WORKLOADS
from worker_agent.world import World
from worker_agent.writes import Writes

Obj = dict[str, Any]
BOOLEAN_FACTS = (
    "evicted_holding_quota",
    "may_take_checks_step",
    "may_take_requeued_step",
    "needs_deactivation_eviction",
)


class Source:
    """A store and its change notes, as ``worker_agent.world.World`` wires them."""

    def __init__(self, objects: dict[str, Obj]) -> None:
        self.objects = dict(objects)
        self.changes = ChangedKeys()
        self.relists = 0

    def put(self, key: str, obj: Obj | None) -> None:
        if obj is None:
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.changes.mark(key)

    def source(self) -> KeySource:
        return KeySource(
            changes=self.changes.reader(),
            lookup=self.objects.get,
            keys=lambda: list(self.objects),
            generation=lambda: (self, self.relists),
        )

    def workload_index(self) -> WorkloadIndex:
        return WorkloadIndex(self.source())

    def job_index(self) -> JobIndex:
        return JobIndex(self.source())


def walked(objects: dict[str, Obj], fact: str) -> list[str]:
    return sorted(key for key, obj in objects.items() if getattr(workload_facts(obj), fact))


def test_the_index_answers_what_a_walk_would() -> None:
    source = Source({f"ns/{name}": obj for name, obj in WORKLOADS.items()})
    index = source.workload_index()
    assert index.refresh() is None, "the first refresh looks at everything"
    for fact in BOOLEAN_FACTS:
        assert index.holding(fact) == walked(source.objects, fact), fact
    waiting = {key: workload_facts(obj).job_copy_admitted_since for key, obj in source.objects.items()}
    assert index.job_copy_admitted_since == {key: since for key, since in waiting.items() if since is not None}
    assert index.holding("evicted_holding_quota"), "the sample has evicted copies holding quota"


def test_after_the_first_refresh_only_changed_keys_are_derived_again() -> None:
    source = Source({f"ns/w{i}": workload(f"w{i}") for i in range(200)})
    index = source.workload_index()
    index.refresh()
    assert index.derived == 200
    assert index.refresh() == set()
    assert index.derived == 200, "nothing changed: nothing derived"
    evicted = WORKLOADS["evicted copy"]
    source.put("ns/w7", evicted)
    assert index.refresh() == {"ns/w7"}
    assert index.derived == 201
    assert index.holding("evicted_holding_quota") == ["ns/w7"]
    source.put("ns/w7", WORKLOADS["evicted, released"])
    index.refresh()
    assert index.holding("evicted_holding_quota") == [], "released: no longer holding quota"
    source.put("ns/copy", COPY)
    index.refresh()
    assert list(index.job_copy_admitted_since) == ["ns/copy"]
    source.put("ns/copy", None)
    index.refresh()
    assert index.job_copy_admitted_since == {}, "a deleted Workload leaves every answer"
    assert index.derived == 203
    capped = {**COPY, "spec": {**COPY["spec"], "maximumExecutionTimeSeconds": 30}}
    source.put("ns/capped", capped)
    index.refresh()
    assert index.execution_deadlines == {"ns/capped": workload_facts(capped).execution_deadline}
    source.put("ns/capped", {**capped, "spec": {**capped["spec"], "active": False}})
    index.refresh()
    assert index.execution_deadlines == {}, "deactivated: no deadline left"


def test_a_relist_makes_the_index_look_at_everything_again() -> None:
    source = Source({"ns/a": WORKLOADS["evicted copy"]})
    index = source.workload_index()
    index.refresh()
    source.objects = {"ns/b": workload("b", status=admitted_status("cq", "rf", "1"))}  # replaced without notes
    source.relists += 1
    assert index.refresh() is None
    assert index.holding("evicted_holding_quota") == []


def test_every_reader_gets_every_change() -> None:
    source = Source({})
    first, second = source.workload_index(), source.workload_index()
    first.refresh()
    second.refresh()
    source.put("ns/e", WORKLOADS["evicted copy"])
    assert first.refresh() == {"ns/e"}
    assert first.refresh() == set(), "taken once"
    assert second.refresh() == {"ns/e"}, "the other reader still has it"


def job(name: str, target: str | None) -> Obj:
    labels = {"kueue.x-k8s.io/prebuilt-workload-name": target} if target else {}
    return {"metadata": {"namespace": "ns", "name": name, "labels": labels}}


def test_the_job_index_follows_which_workload_each_job_names() -> None:
    source = Source({"ns/j1": job("j1", "w"), "ns/j2": job("j2", "w"), "ns/plain": job("plain", None)})
    index = source.job_index()
    index.refresh()
    assert index.target == {"ns/j1": ("ns", "w"), "ns/j2": ("ns", "w")}
    assert dict(index.named) == {"ns/w": {"ns/j1", "ns/j2"}}
    source.put("ns/j1", job("j1", "other"))
    source.put("ns/j2", None)
    assert index.refresh() == {"ns/j1", "ns/j2"}
    assert dict(index.named) == {"ns/other": {"ns/j1"}}, "a Workload no Job names any more is forgotten"


class NoApi:
    """Nothing here talks to an apiserver: the caches are filled by hand."""

    cluster = "w"


def test_the_local_state_classifies_again_what_changed_and_everything_after_a_relist() -> None:
    world = World(NoApi())  # type: ignore[arg-type]
    world.flavors.store.upsert(flavor("rf"))
    world.cluster_queues.store.upsert(cluster_queue("cq", {"rf": {"cpu": 4}}))
    world.local_queues.store.upsert(local_queue("ns", "lq", "cq"))
    for name in ("a", "b"):
        world.workloads.store.upsert(workload(name, queue="lq"))
    assert sum(len(items) for items in world.local_state().pending.values()) == 2
    world.workloads._apply("ADDED", workload("c", queue="lq"))  # the watch's event, handlers too
    assert sum(len(items) for items in world.local_state().pending.values()) == 3
    world.workloads.store.replace_all([workload("d", queue="lq")])  # a relist: its notes come after the content
    assert [raw["metadata"]["name"] for items in world.local_state().pending.values() for _, raw in items] == ["d"]


def test_the_echo_of_the_agents_own_write_is_not_a_change_and_its_write_is() -> None:
    world = World(NoApi())  # type: ignore[arg-type]
    index = world.workload_index()
    world.workloads._apply("ADDED", workload("a"))
    index.refresh()
    written = WORKLOADS["evicted copy"]
    written = {**written, "metadata": {**written["metadata"], "name": "a", "resourceVersion": "9"}}
    world.workload_writes.remember(written)
    assert index.refresh() == {"ns/a"}, "the agent's write shows at once"
    assert index.holding("evicted_holding_quota") == ["ns/a"]
    world.workloads._apply("MODIFIED", written)
    assert index.refresh() == set(), "its echo changes nothing shown"
    assert index.holding("evicted_holding_quota") == ["ns/a"]


def job_passes(world: World) -> JobPasses:
    api = world.api
    events = EventRecorder(api, controller="kfed.io/kfed-agent", instance="test")
    trigger = Trigger()
    return JobPasses(
        world=world,
        writes=Writes(api=api, trigger=trigger, events=events),
        trigger=trigger,
        workload_index=world.workload_index(),
        job_index=world.job_index(),
        cluster="w",
        events=events,
        metrics=Metrics(),
        clock=lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        on_released=lambda: None,
        job_copy_timeout=60.0,
    )


def suspended_job(name: str, target: str) -> Obj:
    meta = {"namespace": "ns", "name": name, "uid": f"u-{name}", "resourceVersion": "1"}
    labels = {"kueue.x-k8s.io/prebuilt-workload-name": target}
    return {"metadata": {**meta, "labels": labels}, "spec": {"suspend": True}, "status": {}}


def test_the_job_pass_looks_again_only_at_what_changed_and_at_what_a_failed_pass_did_not_settle() -> None:
    world = World(NoApi())  # type: ignore[arg-type]
    for name in ("j1", "j2"):
        world.workloads._apply("ADDED", workload(f"w{name[1]}"))  # pending: its Job has nothing to do
        world.jobs._apply("ADDED", suspended_job(name, f"w{name[1]}"))
    world.jobs._apply("ADDED", suspended_job("other", "x"))  # its Workload has not come
    passes = job_passes(world)
    anyio.run(passes.job_pass)
    assert passes._candidates() == set(), "nothing changed and nothing was left unsettled"
    for name in ("w1", "w2"):
        admitted = workload(name, status=admitted_status("cq", "rf", "1"))
        world.workloads._apply("MODIFIED", {**admitted, "metadata": {**admitted["metadata"], "resourceVersion": "2"}})

    def broken() -> dict[str, Any]:
        raise RuntimeError("a bug in the pass")

    world.flavor_infos = broken  # type: ignore[method-assign]  # read to start an admitted Workload's Job
    with pytest.raises(ExceptionGroup) as failed:
        anyio.run(passes.job_pass)
    assert [str(exc) for exc in failed.value.exceptions] == ["a bug in the pass"]
    assert passes._candidates() == {"ns/j1", "ns/j2"}, "the pass failed at j1: j2, not reached, is looked at again"
    world.workloads._apply("ADDED", workload("x"))
    assert "ns/other" in passes._candidates(), "a Workload that comes brings the Job naming it"
