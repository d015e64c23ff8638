"""Events that come during a key's pass wait for its end; there only the echoes of the pass's writes are dropped."""

from __future__ import annotations

from typing import Any

import pytest

from federation.kube.echo_hold import EchoHold
from federation.kube.overlay import WriteOverlay
from federation.kube.store import Store


def obj(name: str, rv: str, state: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "status": {"state": state}}


def test_an_event_for_a_key_with_no_pass_running_is_delivered_at_once() -> None:
    hold = EchoHold("sync")
    view = WriteOverlay(Store())
    delivered: list[str] = []
    hold.deliver("ns/a", view, obj("a", "2"), lambda: delivered.append("a"))
    with hold.during("ns/b"):  # another key's pass holds nothing of this one's
        hold.deliver("ns/a", view, obj("a", "3"), lambda: delivered.append("a again"))
        assert delivered == ["a", "a again"]
        assert hold.holding("ns/a") == 0


def test_the_echo_of_the_pass_s_write_that_beat_its_answer_is_dropped_and_news_is_delivered_at_the_end() -> None:
    store = Store()
    store.upsert(obj("a", "1", "pending"))
    view = WriteOverlay(store)
    jobs = WriteOverlay(Store())
    delivered: list[str] = []
    hold = EchoHold("sync")
    with hold.during("ns/a"):
        # the watch brings the pass's own write (version 5) before the write's answer, then someone else's change
        hold.deliver("ns/a", view, obj("a", "5", "reserved"), lambda: delivered.append("echo"))
        hold.deliver("ns/a", jobs, obj("a", "6", "running"), lambda: delivered.append("job changed"))
        assert delivered == []
        assert hold.holding("ns/a") == 2
        view.wrote(obj("a", "1", "pending"), obj("a", "5", "reserved"), writer="sync")  # the answer
    assert delivered == ["job changed"]
    assert hold.holding("ns/a") == 0
    # after the pass, events are delivered at once again
    hold.deliver("ns/a", view, obj("a", "5", "reserved"), lambda: delivered.append("late"))
    assert delivered == ["job changed", "late"]


def test_another_writer_s_answer_is_news_for_this_one() -> None:
    store = Store()
    store.upsert(obj("a", "1"))
    view = WriteOverlay(store)
    delivered: list[str] = []
    hold = EchoHold("sync")
    with hold.during("ns/a"):
        hold.deliver("ns/a", view, obj("a", "5"), lambda: delivered.append("scheduler's write"))
        view.wrote(obj("a", "1"), obj("a", "5"), writer="scheduler")
    assert delivered == ["scheduler's write"]


def test_what_was_held_is_delivered_when_the_pass_fails() -> None:
    view = WriteOverlay(Store())
    delivered: list[str] = []
    hold = EchoHold("sync")

    def failing_pass() -> None:
        with hold.during("ns/a"):
            hold.deliver("ns/a", view, obj("a", "5"), lambda: delivered.append("news"))
            raise RuntimeError("the pass failed")

    with pytest.raises(RuntimeError):
        failing_pass()
    assert delivered == ["news"]
    assert hold.holding("ns/a") == 0
