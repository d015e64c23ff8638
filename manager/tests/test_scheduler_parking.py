"""The global scheduler's passes with parking, on in-memory stores (the schedpass bench's runtime, no I/O).

A Workload that does not fit is decided once and then left alone; one whose pending verdict could not be written is
decided again on the next pass (else its QuotaReserved=False condition would never be written while it is parked).
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from e2e.bench.schedpass_bench import Harness, build, capacity_report, recorded_workload_writes, run_passes
from federation.kube.errors import Conflict, Invalid
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


def _with_cpu(raw: dict[str, Any], cpu: str) -> dict[str, Any]:
    """``raw`` with its one container asking for ``cpu``."""
    [pod_set] = raw["spec"]["podSets"]
    [container] = pod_set["template"]["spec"]["containers"]
    requests = {**container["resources"]["requests"], "cpu": cpu}
    template_spec = {**pod_set["template"]["spec"], "containers": [{**container, "resources": {"requests": requests}}]}
    pod_sets = [{**pod_set, "template": {**pod_set["template"], "spec": template_spec}}]
    meta = {**raw["metadata"], "resourceVersion": str(int(raw["metadata"]["resourceVersion"]) + 1)}
    return {**raw, "metadata": meta, "spec": {**raw["spec"], "podSets": pod_sets}}


def _mixed_backlog(monkeypatch: pytest.MonkeyPatch) -> tuple[Harness, list[int]]:
    """Two workers of 16 cpu, 100 Workloads of one cpu and, first in line, one of 17 cpu that no worker can hold;
    and the cpu of each Workload the pass offers to the workers (each call of ``choose_worker``)."""
    harness = build(workers=2, nodes=1, pending=100, queues=1, admit=200)
    first = next(raw for raw in harness.workloads.store if raw["metadata"]["ownerReferences"][0]["name"] == "j-0")
    harness.workloads.upsert(_with_cpu(first, "17"))
    offered: list[int] = []

    def counted(**kwargs: Any) -> Any:
        offered.append(kwargs["requests"]["cpu"])
        return choose_worker(**kwargs)

    monkeypatch.setattr("manager.scheduler.choose_worker", counted)
    return harness, offered


def _outcome(harness: Harness) -> tuple[dict[str, str], list[str]]:
    """Where each dispatched Workload went, and the parked ones."""
    dispatched = {key: harness.ledger._entries[key].worker for key in harness.ledger._entries}
    return dispatched, sorted(parked.workload.key for parked in harness.scheduler.parking.parked())


def test_a_pass_offers_a_shape_no_worker_has_room_for_to_the_workers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers' room only shrinks while a pass decides, so once no worker has room for a one-cpu Workload of a queue,
    the later ones of that queue are refused without asking the workers again; a Workload of another shape is still
    offered. A report of more room wakes them all, and again only the dispatches and one refusal per shape ask."""
    harness, offered = _mixed_backlog(monkeypatch)
    run_passes(harness.scheduler, 1)
    assert len(harness.ledger) == 32, "sixteen one-cpu Workloads sent to each worker"
    assert len(harness.scheduler.parking) == 68, "the 17-cpu one and the other 67 parked"
    assert sorted(offered) == [1000] * 33 + [17000], "32 dispatches and one refusal per shape"
    parked = [_stored(harness, key.split("/")[1]) for key in _outcome(harness)[1]]
    messages = {c["message"] for raw in parked for c in raw["status"]["conditions"] if c["type"] == "QuotaReserved"}
    assert len(messages) == 2, messages  # one per shape, each naming what every worker lacks
    assert all("no worker can take it" in message and "insufficient cpu" in message for message in messages), messages

    offered.clear()
    connection = harness.connections["worker-1"]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    connection.report = connection.current = capacity_report("worker-1", nodes=2, queues=1, now=later)  # 32 cpu
    sent_before = len(harness.ledger)
    run_passes(harness.scheduler, 1)
    sent = len(harness.ledger) - sent_before
    assert sent >= 15, "worker-1's new room taken"
    assert len(offered) <= sent + 2, f"{len(offered)} offers for {sent} dispatches: one refusal per shape at most"


def test_refusing_a_shape_once_per_pass_decides_what_asking_for_every_workload_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcomes = []
    for remember in (True, False):
        with monkeypatch.context() as patched:
            harness, offered = _mixed_backlog(patched)
            if not remember:  # every Workload its own shape: each is offered to the workers
                patched.setattr("manager.scheduler.refusal_key", lambda **_: object())
            run_passes(harness.scheduler, 1)
            connection = harness.connections["worker-2"]
            later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
            connection.report = connection.current = capacity_report("worker-2", nodes=3, queues=1, now=later)
            run_passes(harness.scheduler, 1)
            outcomes.append((_outcome(harness), len(offered)))
    (remembered, offers), (asked, every_offer) = outcomes
    assert remembered == asked
    assert every_offer == 100 + 68, "without remembering, every parked Workload is offered again after the report"
    assert offers < every_offer


def test_a_status_the_apiserver_refuses_as_invalid_is_named_once_and_starts_no_pass_at_once() -> None:
    """Deciding again at once would send the same status: the refusal is logged and put in a Warning Event on the
    Workload once (not per pass), no pass is started for it at once (one is due within a pause), and once a write
    goes through the refusal is forgotten."""
    scheduler, api = _scheduler(pending=2)
    write = api.patch_status
    refusing = True
    events: list[tuple[str, dict[str, Any]]] = []
    wakes: list[float] = []

    async def validating(resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if resource is WORKLOADS and refusing:
            raise Invalid('Workload.kueue.x-k8s.io "x" is invalid: status.conditions[0].message: Too long', status=422)
        written: dict[str, Any] = await write(resource, name, body, **kw)
        return written

    api.patch_status = validating
    scheduler._writes._events = SimpleNamespace(emit=lambda raw, **kw: events.append((raw["metadata"]["name"], kw)))
    scheduler._writes._wake_by = wakes.append
    scheduler._writes._trigger = lambda: pytest.fail("an invalid status must not be decided again at once")
    run_passes(scheduler, 3)
    names = [name for name, _ in events]
    assert len(names) == 2, "one Event per Workload, not one per pass"
    assert len(set(names)) == 2, names
    assert all(kw["reason"] == "InvalidStatusUpdate" and kw["event_type"] == "Warning" for _, kw in events)
    assert all("Too long" in kw["note"] for _, kw in events)
    assert wakes, "a pass is due within the pause"
    refusing = False
    run_passes(scheduler, 1)
    assert not scheduler._writes._invalid, "written: nothing is reported any more"
