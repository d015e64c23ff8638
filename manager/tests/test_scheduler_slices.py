"""A scheduling pass that runs out of its deciding time stops between two admission cycles and asks for the next
pass, which goes on from there (on in-memory stores, the schedpass bench's runtime, no I/O)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel

from e2e.bench.schedpass_bench import Harness, build, recorded_workload_writes, run_passes


def _harness(*, decide_seconds: float) -> Harness:
    # two ClusterQueues with room for two one-cpu Workloads each, three Workloads each: two reserved, one pending
    return build(workers=2, nodes=1, pending=6, queues=2, admit=2, decide_seconds=decide_seconds)


class _Turns:
    """How many turns of the event loop a task that only yields got so far: other work a pass let in."""

    count = 0


def _pass_beside_a_ticker(harness: Harness, turns: _Turns) -> None:
    """One scheduling pass, with a task beside it that counts each turn the event loop gives it in ``turns``."""

    async def run() -> None:
        async def ticker() -> None:
            while True:
                await anyio.lowlevel.checkpoint()
                turns.count += 1

        async with anyio.create_task_group() as tg:
            harness.scheduler._task_group = tg
            tg.start_soon(ticker)
            await harness.scheduler.schedule_once()
            tg.cancel_scope.cancel()

    anyio.run(run)


def _verdicts(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Job name -> the QuotaReserved status its Workload's recorded status writes left."""
    return {
        name.removeprefix("job-").rsplit("-", 1)[0]: condition["status"]
        for name, body in calls
        for condition in (body.get("status") or {}).get("conditions") or ()
        if condition.get("type") == "QuotaReserved"
    }


def test_a_pass_out_of_time_decides_one_cycle_asks_for_the_next_and_the_passes_reach_the_same_verdicts() -> None:
    sliced = _harness(decide_seconds=0.0)
    calls = recorded_workload_writes(sliced.api)
    scheduler = sliced.scheduler
    run_passes(scheduler, 1)
    assert sorted(_verdicts(calls).items()) == [("j-0", "True"), ("j-1", "True")], "one cycle: each queue's head"
    assert scheduler.cut_passes == 1
    assert scheduler._wakeup.pulled, "the rest is the next pass's: it must be asked for, not left to a later event"
    passes = 1
    while scheduler._wakeup.pulled and passes < 10:
        scheduler._wakeup = type(scheduler._wakeup)()  # taken, as the scheduler's loop takes it
        run_passes(scheduler, 1)
        passes += 1
    assert passes == 3, "three Workloads per queue: three cycles, one per pass"
    assert not scheduler._wakeup.pulled, "the last pass reached every Workload and asks for no other"

    whole = _harness(decide_seconds=60.0)
    whole_calls = recorded_workload_writes(whole.api)
    run_passes(whole.scheduler, 1)
    assert whole.scheduler.cut_passes == 0
    assert not whole.scheduler._wakeup.pulled
    assert _verdicts(calls) == _verdicts(whole_calls)
    expected = {"j-0": "True", "j-1": "True", "j-2": "True", "j-3": "True", "j-4": "False", "j-5": "False"}
    assert _verdicts(whole_calls) == expected


def test_a_look_at_every_workload_lets_the_event_loop_run_between_batches(monkeypatch: Any) -> None:
    from federation.admission import api_state
    from federation.admission.api_drain import drain

    monkeypatch.setattr(api_state, "LOOKS_PER_STEP", 2)
    harness = _harness(decide_seconds=60.0)  # six Workloads: three batches of two in the first pass's full look
    turns = _Turns()
    ticks_when_deciding: list[int] = []

    def recording_drain(*args: Any, **kwargs: Any) -> Any:
        ticks_when_deciding.append(turns.count)
        return drain(*args, **kwargs)

    monkeypatch.setattr("manager.scheduler.drain", recording_drain)

    _pass_beside_a_ticker(harness, turns)
    assert ticks_when_deciding, "the pass decided"
    assert ticks_when_deciding[0] >= 2, "other tasks ran while the pass looked at the Workloads, before it decided"


def test_a_pass_lets_the_event_loop_run_between_batches_of_the_writes_it_makes_of_its_decisions(
    monkeypatch: Any,
) -> None:
    from federation.admission.api_drain import drain

    monkeypatch.setattr("manager.scheduler.VERDICTS_PER_STEP", 2)
    harness = _harness(decide_seconds=60.0)  # six decisions: four reservations, two pending verdicts
    turns = _Turns()
    ticks_when_decided: list[int] = []
    ticks_when_sent: list[int] = []

    def recording_drain(*args: Any, **kwargs: Any) -> Any:
        decisions = drain(*args, **kwargs)
        ticks_when_decided.append(turns.count)
        return decisions

    monkeypatch.setattr("manager.scheduler.drain", recording_drain)
    writes = harness.scheduler._writes
    send = writes.send

    def recording_send(*args: Any, **kwargs: Any) -> None:
        ticks_when_sent.append(turns.count)
        send(*args, **kwargs)

    monkeypatch.setattr(writes, "send", recording_send)

    _pass_beside_a_ticker(harness, turns)
    assert len(ticks_when_decided) == 1
    assert len(ticks_when_sent) == 6, "every decision is written"
    assert ticks_when_sent[0] > ticks_when_decided[0], "other tasks ran while the decisions became writes"
    assert ticks_when_sent[-1] > ticks_when_sent[0], "and between batches of the writes sent"
