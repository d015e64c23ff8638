"""The work queue really runs different keys concurrently, never one key twice at once, and wakes on time."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from federation.kube.workqueue import WorkQueue

pytestmark = pytest.mark.anyio


async def _until(condition: Callable[[], bool], *, within: float = 30.0) -> None:
    """Poll a condition of in-memory state with a deadline (the reconcilers have no event to wait on)."""
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)


async def test_n_keys_are_reconciled_n_wide() -> None:
    """32 keys with 16 workers: all 16 run at once (a gate only opens when 16 are inside)."""
    queue = WorkQueue("t")
    inside = 0
    gate = anyio.Event()
    done: set[str] = set()

    async def reconcile(key: str) -> None:
        nonlocal inside
        inside += 1
        if inside >= 16:
            gate.set()
        with anyio.fail_after(5):  # one-at-a-time would never reach 16 and fail here
            await gate.wait()
        await anyio.sleep(0.01)
        inside -= 1
        done.add(key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=16))
        await anyio.sleep(0.01)  # every worker is idle before the keys arrive (the case that used to stall)
        for i in range(32):
            queue.add(f"k{i}")
        await _until(lambda: len(done) == 32)
        tg.cancel_scope.cancel()
    assert queue.peak_active == 16


async def test_keys_added_one_by_one_to_idle_workers_all_start() -> None:
    queue = WorkQueue("t")
    started: set[str] = set()
    release = anyio.Event()

    async def reconcile(key: str) -> None:
        started.add(key)
        await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=4))
        for i in range(4):
            await anyio.sleep(0.01)
            queue.add(f"k{i}")
        await _until(lambda: len(started) == 4)
        release.set()
        tg.cancel_scope.cancel()


async def test_a_slow_key_never_blocks_the_others() -> None:
    queue = WorkQueue("t")
    slow_release = anyio.Event()
    done: list[str] = []

    async def reconcile(key: str) -> None:
        if key == "slow":
            await slow_release.wait()
        done.append(key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=2))
        queue.add("slow")
        await _until(lambda: queue.active == 1)
        for i in range(50):
            queue.add(f"fast{i}")
        await _until(lambda: len(done) == 50)
        assert "slow" not in done
        slow_release.set()
        await _until(lambda: "slow" in done)
        tg.cancel_scope.cancel()


async def test_one_key_is_never_reconciled_concurrently_and_a_change_meanwhile_runs_again() -> None:
    queue = WorkQueue("t")
    running = 0
    peak = 0
    calls = 0
    release = anyio.Event()

    async def reconcile(key: str) -> None:
        nonlocal running, peak, calls
        running += 1
        peak = max(peak, running)
        calls += 1
        if calls == 1:
            await release.wait()
        running -= 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=8))
        queue.add("k")
        await _until(lambda: calls == 1)
        for _ in range(5):
            queue.add("k")  # changes while it runs: one more pass afterwards, not five, and not in parallel
        await anyio.sleep(0.02)
        assert calls == 1
        release.set()
        await _until(lambda: calls == 2)
        await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert peak == 1
    assert calls == 2


async def test_add_after_keeps_the_earliest_timer_per_key() -> None:
    queue = WorkQueue("t")
    seen: list[tuple[str, float]] = []
    start = 0.0

    async def reconcile(key: str) -> None:
        seen.append((key, anyio.current_time() - start))

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=2))
        start = anyio.current_time()
        queue.add_after("a", 10.0)
        queue.add_after("a", 0.05)  # earlier: replaces the 10 s timer
        queue.add_after("a", 5.0)  # later than the pending one: ignored
        pending = queue.pending_timer("a")
        assert pending is not None
        assert pending <= 0.05
        await _until(lambda: len(seen) == 1)
        assert queue.pending_timer("a") is None
        await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    assert [key for key, _ in seen] == ["a"]
    assert seen[0][1] < 1.0


async def test_a_failing_key_is_retried_with_backoff_while_others_proceed() -> None:
    queue = WorkQueue("t", base_delay=0.01, max_delay=0.05)
    attempts = 0
    others: list[str] = []

    async def reconcile(key: str) -> None:
        nonlocal attempts
        if key == "bad":
            attempts += 1
            if attempts < 4:
                raise RuntimeError("boom")
            return
        others.append(key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=2))
        queue.add("bad")
        for i in range(10):
            queue.add(f"ok{i}")
        await _until(lambda: attempts == 4 and len(others) == 10)
        tg.cancel_scope.cancel()


async def test_reconcile_asking_to_look_again_is_requeued_after_the_delay() -> None:
    queue = WorkQueue("t")
    calls = 0

    async def reconcile(key: str) -> float | None:
        nonlocal calls
        calls += 1
        return 0.02 if calls < 3 else None

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=1))
        queue.add("k")
        await _until(lambda: calls == 3)
        await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert calls == 3


async def test_urgent_keys_go_first_in_order() -> None:
    """With one worker busy, urgent keys (also one already queued as ordinary) are taken before the backlog."""
    queue = WorkQueue("t")
    order: list[str] = []
    release = anyio.Event()

    async def reconcile(key: str) -> None:
        if key == "busy":
            await release.wait()
        order.append(key)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=1))
        queue.add("busy")
        await _until(lambda: queue.active == 1)
        for key in ("a", "b", "c"):
            queue.add(key)
        queue.add("u1", urgent=True)
        queue.add("c", urgent=True)  # queued already: moves ahead, and runs once
        queue.add("busy", urgent=True)  # running: runs again afterwards, urgently
        assert len(queue) == 4  # "busy" is running, not queued
        release.set()
        await _until(lambda: len(order) == 6)
        tg.cancel_scope.cancel()
    assert order == ["busy", "u1", "c", "busy", "a", "b"]


async def test_the_observer_hears_each_failure_with_its_retry_delay_and_the_success_after() -> None:
    class Observer:
        def __init__(self) -> None:
            self.heard: list[tuple[str, str, float | None]] = []

        def failed(self, key: str, err: BaseException, retry_in: float | None) -> None:
            self.heard.append(("failed", key, retry_in))

        def succeeded(self, key: str) -> None:
            self.heard.append(("succeeded", key, None))

    observer = Observer()
    queue = WorkQueue("t", base_delay=0.01, observer=observer)
    attempts = 0

    async def reconcile(key: str) -> None:
        nonlocal attempts
        attempts += 1
        if attempts <= 2:
            raise RuntimeError("refused")

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=2))
        queue.add("k")
        await _until(lambda: len(observer.heard) == 3)
        tg.cancel_scope.cancel()
    assert observer.heard == [("failed", "k", 0.01), ("failed", "k", 0.02), ("succeeded", "k", None)]


async def _timers_after_two_passes(*, latest_answer_wins: bool) -> dict[str, float | None]:
    """Each key's pending timer after two passes: the first answers (a: 10 s, b: 5 s), then an event brings a second
    pass before that timer fires, which answers (a: None, b: 20 s)."""
    answers: dict[str, list[float | None]] = {"a": [10.0, None], "b": [5.0, 20.0]}
    passes: list[str] = []

    async def reconcile(key: str) -> float | None:
        passes.append(key)
        return answers[key].pop(0)

    queue = WorkQueue("t", latest_answer_wins=latest_answer_wins)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=2))
        for key, count in (("a", 1), ("a", 2), ("b", 1), ("b", 2)):
            queue.add(key)
            await _until(lambda: passes.count(key) == count and queue.active == 0)  # noqa: B023 (awaited here)
        timers = {key: queue.pending_timer(key) for key in answers}
        tg.cancel_scope.cancel()
    return timers


async def test_with_latest_answer_wins_a_pass_s_answer_replaces_the_timer_an_earlier_pass_asked_for() -> None:
    timers = await _timers_after_two_passes(latest_answer_wins=True)
    assert timers["a"] is None  # the second pass needs no look: the 10 s timer went
    later = timers["b"]
    assert later is not None
    assert 10.0 < later <= 20.0  # the second pass's 20 s replaced the 5 s one


async def test_a_default_queue_keeps_the_earliest_timer_whatever_a_later_pass_answers() -> None:
    timers = await _timers_after_two_passes(latest_answer_wins=False)
    first, earliest = timers["a"], timers["b"]
    assert first is not None
    assert 0.0 < first <= 10.0
    assert earliest is not None
    assert 0.0 < earliest <= 5.0


async def test_with_latest_answer_wins_a_replaced_timer_still_fires_once() -> None:
    """The first pass asks for 0.05 s; an event brings a second pass at once, which asks for 0.15 s: the earlier
    timer's entry is skipped when it comes up, and the replacing one wakes the queue (a third pass, then no more)."""
    answers: list[float | None] = [0.05, 0.15, None]
    passes: list[float] = []
    queue = WorkQueue("t", latest_answer_wins=True)

    async def reconcile(key: str) -> float | None:
        passes.append(anyio.current_time())
        return answers.pop(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=1))
        queue.add("k")
        await _until(lambda: len(passes) == 1 and queue.active == 0)
        queue.add("k")
        await _until(lambda: len(passes) == 2 and queue.active == 0)
        await _until(lambda: len(passes) == 3 and queue.active == 0)
        assert queue.pending_timer("k") is None
        tg.cancel_scope.cancel()
    assert passes[2] - passes[1] >= 0.14  # fired by the replacing timer, not by the replaced one
