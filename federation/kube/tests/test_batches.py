"""Batches gather a key's items into one flush, never flush a key twice at once, never make keys wait for each
other, and wake for an item that comes after a quiet spell."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from federation.kube.batches import Batches

pytestmark = pytest.mark.anyio

WINDOW = 0.05


async def _until(condition: Callable[[], bool], *, within: float = 10.0) -> None:
    with anyio.fail_after(within):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)


async def test_items_of_a_key_that_come_within_the_window_go_in_one_flush() -> None:
    flushed: list[tuple[str, list[int]]] = []

    async def flush(key: str, items: list[int]) -> None:
        flushed.append((key, sorted(items)))

    batches: Batches[str, int] = Batches("t", flush, window=WINDOW)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batches.run)
        await _until(lambda: batches.running)
        for i in range(5):
            batches.add("w1", f"id{i}", i)
        batches.add("w1", "id4", 40)  # the same id again: replaced, not added
        batches.add("w2", "id0", 100)
        await _until(lambda: len(flushed) == 2)
        await anyio.sleep(3 * WINDOW)  # nothing else comes
        tg.cancel_scope.cancel()
    assert sorted(flushed) == [("w1", [0, 1, 2, 3, 40]), ("w2", [100])]
    assert batches.flushes == 2
    assert not batches.running


async def test_a_stuck_flush_holds_up_only_its_own_key() -> None:
    """w1's flush hangs (its worker stopped answering); w2's items keep going out, batch after batch. Flushes made
    one after the other would leave w2 waiting behind w1 and fail the deadline."""
    stuck = anyio.Event()
    release = anyio.Event()
    flushed: list[tuple[str, list[int]]] = []

    async def flush(key: str, items: list[int]) -> None:
        if key == "w1":
            stuck.set()
            await release.wait()
        flushed.append((key, items))

    batches: Batches[str, int] = Batches("t", flush, window=WINDOW)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batches.run)
        await _until(lambda: batches.running)
        batches.add("w1", "a", 1)
        await stuck.wait()
        for i in range(3):
            batches.add("w2", f"b{i}", i)
            await _until(lambda: len(flushed) == i + 1, within=2.0)  # noqa: B023 (awaited before the loop goes on)
        assert flushed == [("w2", [0]), ("w2", [1]), ("w2", [2])]
        batches.add("w1", "c", 2)  # waits for w1's flush under way: never two at once for one key
        await anyio.sleep(3 * WINDOW)
        assert [key for key, _ in flushed].count("w1") == 0
        assert batches.pending("w1") == 1
        release.set()
        await _until(lambda: ("w1", [2]) in flushed)
        tg.cancel_scope.cancel()
    assert [items for key, items in flushed if key == "w1"] == [[1], [2]]


async def test_an_item_after_a_quiet_spell_is_flushed_and_a_failed_flush_stops_nothing() -> None:
    flushed: list[list[str]] = []

    async def flush(key: str, items: list[str]) -> None:
        if items == ["boom"]:
            raise RuntimeError("refused")
        flushed.append(items)

    batches: Batches[str, str] = Batches("t", flush, window=WINDOW)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batches.run)
        await _until(lambda: batches.running)
        batches.add("w1", "x", "boom")
        await _until(lambda: batches.flushes == 1)
        await anyio.sleep(5 * WINDOW)  # idle: nothing pending, no task waiting
        batches.add("w1", "y", "later")
        await _until(lambda: flushed == [["later"]])
        tg.cancel_scope.cancel()


async def test_items_are_refused_outside_run() -> None:
    async def flush(key: str, items: list[int]) -> None:
        raise AssertionError("never flushed")

    batches: Batches[str, int] = Batches("t", flush, window=WINDOW)
    assert not batches.running
    with pytest.raises(RuntimeError, match="outside run"):
        batches.add("w1", "a", 1)
