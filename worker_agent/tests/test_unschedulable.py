from __future__ import annotations

import datetime as dt
from typing import Any

from federation.conditions import find_condition
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION
from worker_agent.decisions.unschedulable import (
    MESSAGE_LIMIT,
    SCHEDULED_MESSAGE,
    UNMARKED_RECHECK_SECONDS,
    copy_conditions,
    job_candidates,
    stuck_message,
    stuck_pods,
)

NOW = dt.datetime(2026, 1, 1, 0, 2, tzinfo=dt.UTC)
SELECTOR_MESSAGE = "0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector."


def pod(
    name: str,
    *,
    reason: str = "Unschedulable",
    seconds_ago: float = 30,
    node: str | None = None,
    phase: str = "Pending",
    deleting: bool = False,
) -> dict[str, Any]:
    since = (NOW - dt.timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = since
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": phase,
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": reason,
                    "message": SELECTOR_MESSAGE,
                    "lastTransitionTime": since,
                }
            ],
        },
    }


def copy(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "job-a", "namespace": "ns"}, "status": {"conditions": list(conditions)}}


def test_job_candidates_are_the_jobs_whose_pods_can_carry_the_name_longest_first() -> None:
    assert job_candidates("a-1-x7k2p", ["a", "a-1", "b", "a-12"]) == ["a-1", "a"]
    assert job_candidates("b-x7k2p", ["a", "bb"]) == []


def test_only_pods_unschedulable_past_the_grace_are_stuck_and_the_rest_set_the_next_look() -> None:
    found = stuck_pods(
        [
            pod("a-2", seconds_ago=30),
            pod("a-1", seconds_ago=12),
            pod("a-3", seconds_ago=4),  # inside the grace: looked at again in 6 s
            pod("a-4", reason="SchedulingGated"),  # TAS places it: not the scheduler's refusal
            pod("a-5", node="n1"),
            pod("a-6", phase="Failed"),
            pod("a-7", deleting=True),
        ],
        now=NOW,
        grace=10,
    )
    assert found.pods == (("a-1", SELECTOR_MESSAGE), ("a-2", SELECTOR_MESSAGE))
    assert found.recheck_in == 6


def test_an_unbound_pod_not_marked_yet_is_looked_at_again_soon() -> None:
    unmarked = pod("a-1")
    unmarked["status"]["conditions"] = []
    found = stuck_pods([unmarked, pod("a-2", seconds_ago=5)], now=NOW, grace=10)
    assert found.pods == ()
    assert found.recheck_in == UNMARKED_RECHECK_SECONDS


def test_nothing_stuck_and_nothing_to_wait_for() -> None:
    found = stuck_pods([pod("a-1", node="n1"), pod("a-2", reason="SchedulingGated")], now=NOW)
    assert found.pods == ()
    assert found.recheck_in is None


def test_the_message_names_the_first_pod_and_the_schedulers_reason_without_counting() -> None:
    one = stuck_message([("a-1", SELECTOR_MESSAGE)])
    many = stuck_message([("a-1", SELECTOR_MESSAGE), ("a-2", SELECTOR_MESSAGE), ("a-3", SELECTOR_MESSAGE)])
    assert one == f"pod a-1 cannot be scheduled: {SELECTOR_MESSAGE}"
    assert many == f"pod a-1 and others cannot be scheduled: {SELECTOR_MESSAGE}"
    assert len(stuck_message([("a-1", "x" * 5000)])) == MESSAGE_LIMIT


def test_a_stuck_pod_sets_the_condition_once_and_keeps_the_others() -> None:
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}
    conditions = copy_conditions(copy(admitted), [("a-1", SELECTOR_MESSAGE)], now=NOW)
    assert conditions is not None
    written = copy(*conditions)
    condition = find_condition(written, PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "Unschedulable")
    assert SELECTOR_MESSAGE in condition["message"]
    assert find_condition(written, "Admitted") == admitted
    assert copy_conditions(written, [("a-1", SELECTOR_MESSAGE)], now=NOW) is None  # nothing new: no write


def test_no_stuck_pod_clears_a_true_condition_and_writes_nothing_otherwise() -> None:
    assert copy_conditions(copy(), [], now=NOW) is None
    stuck = copy(*(copy_conditions(copy(), [("a-1", SELECTOR_MESSAGE)], now=NOW) or []))
    cleared = copy_conditions(stuck, [], now=NOW)
    assert cleared is not None
    condition = find_condition(copy(*cleared), PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Scheduled", SCHEDULED_MESSAGE)
    assert copy_conditions(copy(*cleared), [], now=NOW) is None
