from __future__ import annotations

from typing import Any

import anyio
import pytest

from federation.kube.overlay import RECENT_DELETIONS, WriteOverlay, WriteTally, look_again_after_writes
from federation.kube.store import ADDED, DELETED, MODIFIED, Store


def obj(name: str, rv: str, state: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "status": {"state": state}}


def with_uid(o: dict[str, Any], uid: str) -> dict[str, Any]:
    return {**o, "metadata": {**o["metadata"], "uid": uid}}


def test_a_write_shows_until_the_cache_has_it() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    store.upsert(obj("b", "2", "pending"))
    view = WriteOverlay(store)
    view.wrote(obj("a", "1", "pending"), obj("a", "5", "reserved"))
    assert view.get("ns/a") == obj("a", "5", "reserved")
    assert sorted(o["status"]["state"] for o in view) == ["pending", "reserved"]
    assert view.pending == 1
    store.upsert(obj("a", "5", "reserved"))  # the watch event arrives
    view.observe(MODIFIED, obj("a", "5", "reserved"))
    assert view.pending == 0
    assert view.get("ns/a") == obj("a", "5", "reserved")


def test_chained_writes_supersede_every_earlier_version() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    first = obj("a", "5", "reserved")
    view.wrote(obj("a", "1", "pending"), first)
    view.wrote(first, obj("a", "7", "admitted"))
    assert view.get("ns/a") == obj("a", "7", "admitted")  # the cache still holds 1
    store.upsert(first)
    view.observe(MODIFIED, first)  # the first write arrives: the second one is still newer
    assert view.get("ns/a") == obj("a", "7", "admitted")
    store.upsert(obj("a", "7", "admitted"))
    view.observe(MODIFIED, obj("a", "7", "admitted"))
    assert view.pending == 0


def test_a_version_the_write_did_not_supersede_wins() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    view.wrote(obj("a", "1", "pending"), obj("a", "5", "reserved"))
    store.upsert(obj("a", "9", "evicted"))  # overtaken (e.g. a relist skipped our version)
    assert view.get("ns/a") == obj("a", "9", "evicted")
    assert view.pending == 0


def test_a_deleted_object_is_gone_from_the_view() -> None:
    store = Store()
    store.upsert(obj("a", "1"))
    view = WriteOverlay(store)
    view.wrote(obj("a", "1"), obj("a", "5"))
    store.delete("ns/a")
    view.observe(DELETED, obj("a", "1"))
    assert view.get("ns/a") is None
    assert list(view) == []
    assert view.pending == 0


def test_a_created_object_shows_until_the_cache_lists_it() -> None:
    store = Store()
    view = WriteOverlay(store)
    view.created(obj("c", "3"))
    assert view.get("ns/c") == obj("c", "3")
    assert list(view) == []  # iteration is the cache's
    store.upsert(obj("c", "3"))
    view.observe(ADDED, obj("c", "3"))
    assert view.pending == 0
    view.created(obj("d", "4"))
    store.upsert(obj("d", "6"))  # listed at a later version without an event seen here (a relist)
    assert view.get("ns/d") == obj("d", "6")
    assert view.pending == 0


def test_a_create_answered_after_the_cache_saw_it_deleted_is_not_shown() -> None:
    # the watch delivered the create and the deletion before the creator resumed with the create's answer
    store = Store()
    view = WriteOverlay(store)
    made = with_uid(obj("c", "3"), "u-1")
    gone = with_uid(obj("c", "5"), "u-1")
    store.upsert(made)
    view.observe(ADDED, made)
    store.delete(gone)
    view.observe(DELETED, gone)
    view.created(made)
    assert view.get("ns/c") is None
    assert view.pending == 0
    again = with_uid(obj("c", "8"), "u-2")
    view.created(again)  # a new object under the same name is another uid: shown until the cache lists it
    assert view.get("ns/c") == again


def test_the_overlay_remembers_a_bounded_number_of_deletions() -> None:
    view = WriteOverlay(Store())
    for n in range(RECENT_DELETIONS + 1):
        view.observe(DELETED, with_uid(obj(f"o{n}", "2"), f"u{n}"))
    first = with_uid(obj("o0", "1"), "u0")
    view.created(first)  # forgotten: the oldest deletion went when the bound was passed
    assert view.get("ns/o0") == first
    last = with_uid(obj(f"o{RECENT_DELETIONS}", "1"), f"u{RECENT_DELETIONS}")
    view.created(last)
    assert view.get(f"ns/o{RECENT_DELETIONS}") is None


def test_a_shown_write_is_seen_until_its_answer_replaces_it() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    laid: list[str] = []
    view.add_listener(laid.append)
    shown = obj("a", "1", "reserved")  # decided, not sent: still at the cached version
    view.show(obj("a", "1", "pending"), shown)
    assert laid == ["ns/a"]
    assert view.get("ns/a") == shown
    assert [o["status"]["state"] for o in view] == ["reserved"]
    view.wrote(shown, obj("a", "4", "admitted"))  # the write that carried it was answered
    assert view.get("ns/a") == obj("a", "4", "admitted")
    store.upsert(obj("a", "4", "admitted"))
    view.observe(MODIFIED, obj("a", "4", "admitted"))
    assert view.pending == 0


def test_a_shown_write_goes_when_refused_or_when_the_cache_moves_on() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    shown = obj("a", "1", "reserved")
    view.show(obj("a", "1", "pending"), shown)
    view.unshow(obj("a", "1", "reserved"))  # an equal object that is not the one shown: nothing happens
    assert view.get("ns/a") == shown
    view.unshow(shown)
    assert view.get("ns/a") == obj("a", "1", "pending")
    view.show(obj("a", "1", "pending"), shown)
    store.upsert(obj("a", "3", "pending"))  # someone else changed it: the held write will be refused
    view.observe(MODIFIED, obj("a", "3", "pending"))
    assert view.get("ns/a") == obj("a", "3", "pending")


def test_an_echo_names_its_writer_and_anything_else_is_news() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    store.upsert(obj("b", "1", "pending"))
    view = WriteOverlay(store)
    first = obj("a", "5", "reserved")
    view.wrote(obj("a", "1", "pending"), first, writer="scheduler")
    view.wrote(first, obj("a", "7", "admitted"), writer="sync")
    view.created(obj("c", "8"), writer="sync")
    # an earlier write of the chain and the latest one: the view showed them already; the latest writer is named
    assert view.observe_echo(MODIFIED, first) == "sync"
    assert view.observe_echo(MODIFIED, obj("a", "7", "admitted")) == "sync"
    assert view.observe_echo(ADDED, obj("c", "8")) == "sync"
    assert view.pending == 0
    # no write of ours under the key, someone else's version, a deletion: news
    assert view.observe_echo(MODIFIED, obj("b", "3", "reserved")) is None
    view.wrote(obj("a", "7", "admitted"), obj("a", "9", "finished"), writer="sync")
    assert view.observe_echo(MODIFIED, obj("a", "10", "evicted")) is None
    view.wrote(obj("a", "10", "evicted"), obj("a", "11", "requeued"))
    assert view.observe_echo(DELETED, obj("a", "11", "requeued")) is None
    view.wrote(obj("b", "3", "reserved"), obj("b", "4", "admitted"))
    assert view.observe_echo(MODIFIED, obj("b", "4", "admitted")) == ""  # an unnamed writer's echo


@pytest.mark.anyio
async def test_a_tally_counts_the_writes_of_its_pass_and_of_the_tasks_it_starts() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    view.wrote(obj("a", "1", "pending"), obj("a", "2", "reserved"))  # outside any pass
    counts: list[int] = []
    tallies: list[WriteTally] = []

    async def inner_pass(tally: WriteTally) -> float | None:
        view.forget("ns/b")
        counts.append(tally.count)
        return None

    async def outer_pass(tally: WriteTally) -> float | None:
        tallies.append(tally)
        assert not tally.unsettled

        async def write_in_a_task() -> None:
            view.wrote(obj("a", "2", "reserved"), obj("a", "3", "admitted"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(write_in_a_task)
        assert tally.count == 1
        assert tally.unsettled
        tally.settle()
        assert not tally.unsettled
        view.created(obj("b", "4"))
        assert tally.count == 2
        assert tally.unsettled
        assert await look_again_after_writes(inner_pass) == 0.0
        assert counts == [1]  # the inner pass has its own tally
        assert tally.count == 2
        tally.settle()
        return None

    assert await look_again_after_writes(outer_pass) is None
    view.wrote(obj("a", "3", "admitted"), obj("a", "5", "finished"))  # after the pass: counted nowhere
    assert tallies[0].count == 2


@pytest.mark.anyio
async def test_a_pass_that_wrote_and_did_not_settle_is_looked_at_again_at_once() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)

    async def wrote_in_a_task(tally: WriteTally) -> float | None:
        async def write() -> None:
            view.wrote(obj("a", "1", "pending"), obj("a", "2", "evicted"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
        return None  # an eviction: what it made is to be looked at, and no watch event will say so

    async def wrote_and_settled(tally: WriteTally) -> float | None:
        view.wrote(obj("a", "2", "evicted"), obj("a", "3", "withdrawn"))
        tally.settle()  # the pass planned again on what it wrote: nothing left to do
        return 5.0

    async def settled_then_wrote(tally: WriteTally) -> float | None:
        tally.settle()
        view.created(obj("b", "4"))
        return 5.0

    async def wrote_nothing(_tally: WriteTally) -> float | None:
        return 7.0

    assert await look_again_after_writes(wrote_in_a_task) == 0.0
    assert await look_again_after_writes(wrote_and_settled) == 5.0
    assert await look_again_after_writes(settled_then_wrote) == 0.0
    assert await look_again_after_writes(wrote_nothing) == 7.0
