"""How long a worker that refused a Workload's copy is avoided, and what is written to say so."""

from __future__ import annotations

import datetime as dt
from typing import Any

from manager.decisions.refusals import (
    MAX_REFUSAL_BACKOFF,
    REFUSED_BY_ANNOTATION,
    REFUSED_UNTIL_ANNOTATION,
    RefusalEnds,
    refusal_annotations,
    refusal_backoff,
    refusal_end,
    refused_until,
    refused_workers,
)

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


def workload(*, refused: str | None = None, until: str | None = None, evictions: int = 0) -> dict[str, Any]:
    annotations = {}
    if refused is not None:
        annotations[REFUSED_BY_ANNOTATION] = refused
    if until is not None:
        annotations[REFUSED_UNTIL_ANNOTATION] = until
    stats = [{"reason": "AdmissionCheck", "underlyingCause": "", "count": evictions}] if evictions else []
    stats.append({"reason": "Preempted", "underlyingCause": "", "count": 7})
    return {
        "metadata": {"name": "a", "namespace": "team-a", "annotations": annotations},
        "status": {"schedulingStats": {"evictions": stats}},
    }


def test_a_refusal_holds_until_its_time_and_not_after() -> None:
    wl = workload(refused="worker-2, worker-1", until="2026-11-25T12:00:30Z")
    assert refused_workers(wl, now=NOW) == {"worker-1", "worker-2"}
    assert refused_workers(wl, now=NOW + dt.timedelta(seconds=29)) == {"worker-1", "worker-2"}
    assert refused_workers(wl, now=NOW + dt.timedelta(seconds=30)) == frozenset()
    assert refusal_end(wl, now=NOW) == NOW + dt.timedelta(seconds=30)
    assert refusal_end(wl, now=NOW + dt.timedelta(seconds=30)) is None


def test_a_refusal_without_a_readable_time_does_not_hold() -> None:
    """Written by an older kfed-manager (no time) or by hand: the worker may be tried, and refuses again if it must."""
    assert refused_workers(workload(refused="worker-1"), now=NOW) == frozenset()
    assert refused_workers(workload(refused="worker-1", until="soon"), now=NOW) == frozenset()
    assert refused_until(workload(refused="worker-1", until="soon")) is None
    assert refused_workers(workload(until="2026-11-25T13:00:00Z"), now=NOW) == frozenset()


def test_the_backoff_doubles_with_each_eviction_by_the_check_up_to_the_cap() -> None:
    assert refusal_backoff(workload(), base=30) == 30
    assert refusal_backoff(workload(evictions=1), base=30) == 60
    assert refusal_backoff(workload(evictions=3), base=30) == 240
    assert refusal_backoff(workload(evictions=5), base=30) == MAX_REFUSAL_BACKOFF
    assert refusal_backoff(workload(evictions=10_000), base=30) == MAX_REFUSAL_BACKOFF


def test_a_new_refusal_keeps_the_refusals_that_hold_and_drops_those_that_ended() -> None:
    holding = workload(refused="worker-1", until="2026-11-25T12:00:10Z", evictions=1)
    assert refusal_annotations(holding, "worker-3", now=NOW, base=30) == {
        REFUSED_BY_ANNOTATION: "worker-1,worker-3",
        REFUSED_UNTIL_ANNOTATION: "2026-11-25T12:01:00Z",
    }
    ended = workload(refused="worker-1", until="2026-11-25T11:59:00Z", evictions=2)
    assert refusal_annotations(ended, "worker-3", now=NOW, base=30) == {
        REFUSED_BY_ANNOTATION: "worker-3",
        REFUSED_UNTIL_ANNOTATION: "2026-11-25T12:02:00Z",
    }


def test_the_cap_can_be_set() -> None:
    assert refusal_backoff(workload(evictions=4), base=1, cap=4) == 4
    assert refusal_annotations(workload(evictions=9), "worker-1", now=NOW, base=1, cap=4) == {
        REFUSED_BY_ANNOTATION: "worker-1",
        REFUSED_UNTIL_ANNOTATION: "2026-11-25T12:00:04Z",
    }


def test_refusal_ends_say_when_to_look_again_and_change_the_stamp_once_they_pass() -> None:
    ends = RefusalEnds()
    assert ends.next_end() is None
    assert ends.passed(NOW.timestamp()) == 0
    ends.note(None)
    ends.note(NOW + dt.timedelta(seconds=30))
    ends.note(NOW + dt.timedelta(seconds=10))
    assert ends.next_end() == (NOW + dt.timedelta(seconds=10)).timestamp()
    assert ends.passed(NOW.timestamp() + 9) == 0, "nothing ended yet: the parked Workload stays parked"
    assert ends.passed(NOW.timestamp() + 10) == 1, "an end passed: the stamp differs, the Workload wakes"
    assert ends.passed(NOW.timestamp() + 11) == 1, "and only once"
    assert ends.next_end() == (NOW + dt.timedelta(seconds=30)).timestamp()
    assert ends.passed(NOW.timestamp() + 60) == 2
    assert ends.next_end() is None
