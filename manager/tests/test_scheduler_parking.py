"""The global scheduler's passes with parking, on in-memory stores (the schedpass bench's runtime, no I/O).

A Workload that does not fit is decided once and then left alone; one whose pending verdict could not be written is
decided again on the next pass (else its QuotaReserved=False condition would never be written while it is parked).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from e2e.bench.schedpass_bench import Harness, build, capacity_report, recorded_workload_writes, run_passes
from federation.kube.errors import Conflict
from federation.kube.resources import WORKLOADS
from manager.decisions.dispatch import choose_worker
from manager.scheduler import GlobalScheduler


def _harness(pending: int) -> Harness:
    # one ClusterQueue with room for one one-cpu Workload; the others wait for quota
    return build(workers=2, nodes=1, pending=pending, queues=1, admit=1)


def _stored(harness: Harness, name: str) -> dict[str, Any]:
    workload = harness.workloads.store.get(f"team/{name}")
    assert workload is not None, name
    return workload


def _scheduler(pending: int) -> tuple[GlobalScheduler, Any]:
    harness = _harness(pending)
    return harness.scheduler, harness.api


def test_a_workload_that_does_not_fit_is_decided_once_then_parked() -> None:
    scheduler, api = _scheduler(pending=4)
    calls = recorded_workload_writes(api)
    run_passes(scheduler, 1)
    assert len(calls) == 4, "one reservation and three pending verdicts"
    assert len(scheduler.parking) == 3
    assert len(scheduler.last_inadmissible) == 3
    run_passes(scheduler, 2)
    assert len(calls) == 4, "nothing changed: nothing decided or written again"
    assert len(scheduler.last_inadmissible) == 3, "parked Workloads still count as inadmissible"


def test_a_pending_verdict_whose_write_failed_is_decided_again_on_the_next_pass() -> None:
    scheduler, api = _scheduler(pending=3)
    write = api.patch_status
    refused: list[str] = []
    calls: list[str] = []

    async def conflicting(resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if resource is not WORKLOADS:
            answer: dict[str, Any] = await write(resource, name, body, **kw)
            return answer
        calls.append(name)
        conditions = (body.get("status") or {}).get("conditions") or ()
        pending = any(c.get("type") == "QuotaReserved" and c.get("status") == "False" for c in conditions)
        if pending and not refused:
            refused.append(name)
            raise Conflict("the object has been modified", status=409, reason="Conflict")
        written: dict[str, Any] = await write(resource, name, body, **kw)
        return written

    api.patch_status = conflicting
    run_passes(scheduler, 1)
    assert len(refused) == 1
    assert refused[0] not in {p.workload.key.split("/")[1] for p in scheduler.parking.parked()}
    before = len(calls)
    run_passes(scheduler, 1)
    assert calls[before:] == refused, "the refused verdict is decided and written again, and only it"
    run_passes(scheduler, 1)
    assert len(calls) == before + 1


def _reserved(calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [
        name
        for name, body in calls
        if any(
            c.get("type") == "QuotaReserved" and c.get("status") == "True"
            for c in (body.get("status") or {}).get("conditions") or ()
        )
    ]


def _finished(raw: dict[str, Any]) -> dict[str, Any]:
    conditions = [*raw["status"]["conditions"], {"type": "Finished", "status": "True", "reason": "Succeeded"}]
    meta = {**raw["metadata"], "resourceVersion": str(int(raw["metadata"]["resourceVersion"]) + 1)}
    return {**raw, "metadata": meta, "status": {**raw["status"], "conditions": conditions}}


def test_a_finish_seen_by_the_cache_or_written_by_the_manager_frees_the_quota_for_the_next_pass() -> None:
    """Passes classify only the Workloads changed since the last one: a watch event and a write the manager laid
    over its cache (the remote sync's, before the watch shows it) both count as a change."""
    harness = _harness(pending=3)
    scheduler = harness.scheduler
    calls = recorded_workload_writes(harness.api)
    run_passes(scheduler, 2)
    first = _reserved(calls)
    assert len(first) == 1
    cache = harness.workloads  # the bench's in-memory cache: its upsert is a watch event
    cache.upsert(_finished(_stored(harness, first[0])))  # the watch event of its Finished condition
    run_passes(scheduler, 1)
    second = _reserved(calls)[1:]
    assert len(second) == 1, "the quota the finished Workload released is used"
    run_passes(scheduler, 1)
    assert len(_reserved(calls)) == 2, "nothing changed"
    before = _stored(harness, second[0])
    harness.workload_view.wrote(before, _finished(before))  # written by the manager, no watch event yet
    run_passes(scheduler, 1)
    assert len(_reserved(calls)) == 3, "a write laid over the cache is a change too"


def test_a_pass_that_failed_while_building_its_state_leaves_the_changes_to_the_next_one() -> None:
    harness = _harness(pending=2)
    scheduler = harness.scheduler
    calls = recorded_workload_writes(harness.api)
    run_passes(scheduler, 2)
    (first,) = _reserved(calls)
    harness.workloads.upsert(_finished(_stored(harness, first)))
    build_steps = scheduler._state_builder.build_steps

    def failing(**kw: Any) -> Any:
        scheduler._state_builder.build_steps = build_steps  # type: ignore[method-assign]
        raise RuntimeError("a bug in the quota state")

    scheduler._state_builder.build_steps = failing  # type: ignore[method-assign]
    with pytest.raises(BaseException, match=r"a bug in the quota state|unhandled errors"):  # a task group may wrap it
        run_passes(scheduler, 1)
    run_passes(scheduler, 1)
    assert len(_reserved(calls)) == 2, "the finish is seen by the pass after the failed one"


def test_workloads_no_worker_had_room_for_wake_on_more_room_not_on_a_report_that_repeats_its_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two workers of 16 cpu and a manager quota for all 40 one-cpu Workloads: the workers' room runs out first
    harness = build(workers=2, nodes=1, pending=40, queues=1, admit=40)
    scheduler = harness.scheduler
    run_passes(scheduler, 1)
    assert len(harness.ledger) == 32, "sixteen Workloads sent to each worker"
    assert len(scheduler.parking) == 8, "the rest refused by every worker, parked"
    choices: list[str] = []

    def counted(**kwargs: Any) -> Any:
        choices.append(kwargs["queue_name"])
        return choose_worker(**kwargs)

    monkeypatch.setattr("manager.scheduler.choose_worker", counted)
    connection = harness.connections["worker-1"]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    connection.report = connection.current = capacity_report("worker-1", nodes=1, queues=1, now=later)  # a heartbeat
    run_passes(scheduler, 1)
    assert choices == [], "a report with the same figures changes no refusal: nothing woken, nothing decided"
    assert len(scheduler.parking) == 8

    stored = harness.workloads.store.keys()
    harness.ledger.forget(next(key for key in stored if key in harness.ledger))
    run_passes(scheduler, 1)
    assert choices, "quota in flight given back: the parked Workloads are decided again"
    assert len(scheduler.parking) == 7, "and one takes the cpu given back"
    choices.clear()

    more = capacity_report("worker-1", nodes=2, queues=1, now=later + dt.timedelta(seconds=1))  # 32 cpu
    connection.report = connection.current = more
    run_passes(scheduler, 1)
    assert choices, "more room on a worker: the parked Workloads are decided again"
    assert len(scheduler.parking) == 0, "and the worker with room takes the rest"
