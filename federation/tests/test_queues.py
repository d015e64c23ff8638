from __future__ import annotations

import pytest

from federation.admission.queues import QueueManager, RequeueBackoff, RequeueState
from federation.tests.builders import make_workload


def _manager(strategy: str) -> QueueManager:
    manager = QueueManager()
    manager.add_cluster_queue("cq", strategy)  # type: ignore[arg-type]
    return manager


def test_order_is_priority_then_queue_time() -> None:
    manager = _manager("BestEffortFIFO")
    for key, priority, at in [("old-low", 0, 1), ("new-high", 10, 5), ("old-high", 10, 2), ("new-low", 0, 9)]:
        manager.push(make_workload(key).queue("cq").priority(priority).created(at).obj())
    order = []
    for _ in range(4):
        [head] = manager.heads(now=0)
        order.append(head.key)
    assert order == ["old-high", "new-high", "old-low", "new-low"]
    assert manager.heads(now=0) == []


def test_strict_fifo_keeps_an_inadmissible_head_in_front() -> None:
    manager = _manager("StrictFIFO")
    manager.push(make_workload("big").queue("cq").created(1).obj())
    manager.push(make_workload("small").queue("cq").created(2).obj())
    for _ in range(3):
        [head] = manager.heads(now=0)
        assert head.key == "big"
        manager.requeue(head, inadmissible=True)


def test_best_effort_fifo_parks_an_inadmissible_head_until_capacity_changes() -> None:
    manager = _manager("BestEffortFIFO")
    manager.push(make_workload("big").queue("cq").created(1).obj())
    manager.push(make_workload("small").queue("cq").created(2).obj())
    [head] = manager.heads(now=0)
    manager.requeue(head, inadmissible=True)
    assert [w.key for w in manager.parked("cq")] == ["big"]
    [head] = manager.heads(now=0)
    assert head.key == "small"
    manager.forget_head(head.key)
    assert manager.heads(now=0) == []
    manager.capacity_changed(["cq"])
    assert [w.key for w in manager.heads(now=0)] == ["big"]


def test_a_release_during_the_cycle_is_not_missed() -> None:
    manager = _manager("BestEffortFIFO")
    manager.push(make_workload("big").queue("cq").obj())
    [head] = manager.heads(now=0)
    manager.capacity_changed(["cq"])  # a workload finished while "big" was being scheduled
    manager.requeue(head, inadmissible=True)
    assert manager.parked("cq") == ()
    assert [w.key for w in manager.heads(now=0)] == ["big"]


def test_retry_immediately_is_never_parked() -> None:
    manager = _manager("BestEffortFIFO")
    manager.push(make_workload("w").queue("cq").obj())
    [head] = manager.heads(now=0)
    manager.requeue(head, inadmissible=False)
    assert [w.key for w in manager.heads(now=0)] == ["w"]


def test_delayed_workloads_wait_for_their_requeue_time() -> None:
    manager = _manager("BestEffortFIFO")
    manager.push(make_workload("w").queue("cq").obj(), requeue_at=60.0)
    assert manager.heads(now=59.9) == []
    assert [w.key for w in manager.heads(now=60.0)] == ["w"]
    manager.push(make_workload("x").queue("cq").obj())
    manager.delete("x")
    assert manager.pending_count("cq") == 0


@pytest.mark.parametrize(
    ("count", "jitter", "expected"),
    [
        (1, 0.0, 60.0),
        (2, 0.0, 120.0),
        (3, 0.0, 240.0),
        (6, 0.0, 1920.0),
        (7, 0.0, 3600.0),
        (50, 0.0, 3600.0),
        (1, 0.5, 60.003),
        (3, 0.999, 240.023976),
    ],
)
def test_requeue_backoff(count: int, jitter: float, expected: float) -> None:
    backoff = RequeueBackoff(jitter=lambda: jitter)
    assert backoff.delay(count) == pytest.approx(expected)


def test_requeue_state_counts_up_from_now() -> None:
    backoff = RequeueBackoff()
    first = backoff.next_state(None, now=100.0)
    assert first == RequeueState(1, 160.0)
    assert backoff.next_state(first, now=200.0) == RequeueState(2, 320.0)
    with pytest.raises(ValueError, match="at least 1"):
        backoff.delay(0)
