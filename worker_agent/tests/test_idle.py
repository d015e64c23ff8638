"""The admission pass's skip: ``decisions.idle.IdleInputs`` and the stamp of what admission reads (``World``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from federation.kube.api import KubeApi
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, workload
from worker_agent.decisions.idle import IdleInputs
from worker_agent.world import World


class _NoIo:
    """A transport for a World whose caches are filled by hand: any request is a bug in the test."""

    async def send(self, request: object) -> Any:
        raise AssertionError(f"no I/O in a unit test: {request}")

    def stream(self, request: object) -> Any:
        raise AssertionError(f"no I/O in a unit test: {request}")

    async def aclose(self) -> None:
        return None


def world() -> World:
    built = World(KubeApi(_NoIo(), cluster="w"))
    built.flavors.store.upsert(flavor("rf"))
    built.cluster_queues.store.upsert(cluster_queue("cq", {"rf": {"cpu": 4}}))
    built.local_queues.store.upsert(local_queue("ns", "lq", "cq"))
    built.namespaces.store.upsert({"metadata": {"name": "ns", "resourceVersion": "1"}})
    built.workloads.store.upsert(workload("a"))
    return built


def job(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}, "spec": {"suspend": False}}


def test_a_pass_that_found_nothing_to_do_is_skipped_while_its_inputs_are_the_same() -> None:
    idle = IdleInputs()
    assert not idle.unchanged((1, 2), now=0.0)  # never ran
    idle.ran((1, 2), acted=False)
    assert idle.unchanged((1, 2), now=1.0)
    assert idle.unchanged((1, 2), now=2.0)
    assert idle.skipped == 2
    assert not idle.unchanged((1, 3), now=3.0)  # an input changed


def test_a_pass_that_wrote_or_tried_to_runs_again() -> None:
    idle = IdleInputs()
    idle.ran((1, 2), acted=True)  # e.g. a write that failed and pulled the trigger
    assert not idle.unchanged((1, 2), now=0.0)


def test_a_pass_that_did_not_record_its_end_is_not_taken_for_idle() -> None:
    idle = IdleInputs()
    idle.ran((1, 2), acted=False)
    assert not idle.unchanged((1, 3), now=0.0)  # runs ... and fails half-way, before ran()
    assert not idle.unchanged((1, 2), now=0.0)  # the stamp of before that pass is forgotten


def test_a_timed_wake_up_that_has_come_runs_the_pass() -> None:
    idle = IdleInputs()
    idle.ran((1,), acted=False)
    assert idle.unchanged((1,), now=99.0, due=100.0)
    assert not idle.unchanged((1,), now=100.0, due=100.0)  # e.g. a requeue backoff ended


def test_no_stamp_means_always_run() -> None:
    idle = IdleInputs()
    idle.ran(None, acted=False)
    assert not idle.unchanged(None, now=0.0)


ADMITTED = workload("a", status=admitted_status("cq", "rf", "1"))
CHANGES: dict[str, Callable[[World], object]] = {
    "a workload changed": lambda w: w.workloads._apply("MODIFIED", ADMITTED),  # the watch's event, handlers too
    "a workload added": lambda w: w.workloads._apply("ADDED", workload("b")),
    "a workload deleted": lambda w: w.workloads._apply("DELETED", workload("a")),
    "the agent's own write": lambda w: w.workload_writes.remember(ADMITTED),
    "a ClusterQueue": lambda w: w.cluster_queues.store.upsert(cluster_queue("cq", {"rf": {"cpu": 8}})),
    "a LocalQueue": lambda w: w.local_queues.store.upsert(local_queue("ns", "other", "cq")),
    "a ResourceFlavor": lambda w: w.flavors.store.upsert(flavor("rf", nodeLabels={"a": "b"})),
    "a Cohort": lambda w: w.cohorts.store.upsert({"metadata": {"name": "co"}, "spec": {}}),
    "a Namespace": lambda w: w.namespaces.store.upsert({"metadata": {"name": "ns", "labels": {"x": "y"}}}),
    "a LimitRange": lambda w: w.limit_ranges.store.upsert({"metadata": {"name": "lr", "namespace": "ns"}}),
    "a RuntimeClass": lambda w: w.runtime_classes.store.upsert({"metadata": {"name": "kata"}, "handler": "kata"}),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_the_admission_stamp_changes_with_everything_admission_reads(change: str) -> None:
    built = world()
    before = built.admission_stamp()
    CHANGES[change](built)
    assert built.admission_stamp() != before


def test_the_admission_stamp_ignores_the_jobs() -> None:
    built = world()
    before = built.admission_stamp()
    built.jobs.store.upsert(job("a", "5"))
    built.job_writes.remember(job("a", "6"))
    assert built.admission_stamp() == before


def test_the_echo_of_the_agents_own_write_leaves_the_stamp_and_a_later_version_changes_it() -> None:
    built = world()
    written = workload("a", status={"conditions": []})
    written["metadata"]["resourceVersion"] = "9"
    built.workload_writes.remember(written)
    before = built.admission_stamp()
    built.workloads._apply("MODIFIED", written)  # the write's own event: what is shown is the same
    assert built.admission_stamp() == before
    assert built.workload_writes.get("ns/a", None) is None, "the overlay let go: the cache's copy shows now"
    later = {**written, "metadata": {**written["metadata"], "resourceVersion": "10"}}
    built.workloads._apply("MODIFIED", later)
    assert built.admission_stamp() != before
