from __future__ import annotations

import datetime as dt
from typing import Any

from federation.conditions import find_condition
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION
from worker_agent.decisions.unschedulable import (
    MESSAGE_LIMIT,
    SCHEDULED_MESSAGE,
    UNMARKED_RECHECK_SECONDS,
    CreationFailure,
    copy_conditions,
    creation_failure,
    foreign_gates,
    job_candidates,
    missing_pods,
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


FORBIDDEN = 'Error creating: pods "a-x1" is forbidden: error looking up service account ns/trainer: not found'


def job(*, parallelism: int | None = 1, completions: int | None = None, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"metadata": {"name": "a", "namespace": "ns"}, "spec": spec, "status": status}


def test_missing_pods_follow_parallelism_and_the_completions_still_owed() -> None:
    assert missing_pods(job()) == 1
    assert missing_pods(job(parallelism=None)) == 1  # the API's default
    assert missing_pods(job(parallelism=4, active=1)) == 3
    assert missing_pods(job(parallelism=4, completions=5, succeeded=3, active=1)) == 1
    assert missing_pods(job(parallelism=4, active=4)) == 0
    assert missing_pods(job(parallelism=2, succeeded=1)) == 0, "a work-queue Job ends once a pod succeeded"
    ended = job(conditions=[{"type": "Failed", "status": "True"}])
    assert missing_pods(ended) == 0
    suspended = job()
    suspended["spec"]["suspend"] = True
    assert missing_pods(suspended) == 0


def test_pods_that_cannot_be_created_are_told_after_the_grace_while_some_are_missing() -> None:
    recent = CreationFailure(message=FORBIDDEN, since=NOW - dt.timedelta(seconds=4))
    assert creation_failure(job(), recent, now=NOW) == (None, 6.0)
    old = CreationFailure(message=FORBIDDEN, since=NOW - dt.timedelta(seconds=30))
    assert creation_failure(job(), old, now=NOW) == (FORBIDDEN, None)
    assert creation_failure(job(active=1), old, now=NOW) == (None, None), "the pods came"
    assert creation_failure(job(), None, now=NOW) == (None, None)
    earlier_job = CreationFailure(message=FORBIDDEN, since=NOW - dt.timedelta(seconds=30), job_uid="uid-1")
    later = job()
    later["metadata"]["uid"] = "uid-2"
    assert creation_failure(later, earlier_job, now=NOW) == (None, None), "Events about an earlier Job of that name"


def test_a_creation_failure_sets_the_condition_before_unschedulable_pods_and_clears_like_them() -> None:
    conditions = copy_conditions(copy(), [("a-1", SELECTOR_MESSAGE)], now=NOW, not_created=FORBIDDEN)
    assert conditions is not None
    condition = find_condition(copy(*conditions), PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "FailedCreate")
    assert condition["message"] == f"the Job copy cannot create its pods: {FORBIDDEN}"
    cleared = copy_conditions(copy(*conditions), [], now=NOW)
    assert cleared is not None
    assert find_condition(copy(*cleared), PODS_UNSCHEDULABLE_CONDITION)["status"] == "False"  # type: ignore[index]


def gated(name: str, *gates: str, seconds_ago: float = 30) -> dict[str, Any]:
    held = pod(name, reason="SchedulingGated", seconds_ago=seconds_ago)
    held["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return held


def test_pods_held_by_someone_elses_scheduling_gate_are_stuck_after_the_grace() -> None:
    found = stuck_pods(
        [
            gated("a-1", "kueue.x-k8s.io/topology"),  # TAS's own gate: its ungater places the pod
            gated("a-2", "example.com/approval", "kueue.x-k8s.io/topology"),
            gated("a-3", "example.com/approval", seconds_ago=3),
        ],
        now=NOW,
    )
    assert found.pods == (
        (
            "a-2",
            "held by scheduling gate example.com/approval from the Job's pod template, which nothing in this worker "
            "cluster has removed",
        ),
    )
    assert found.recheck_in == 7.0
    assert stuck_message(found.pods).startswith("pod a-2 cannot be scheduled: held by scheduling gate ")
    assert foreign_gates({"schedulingGates": [{"name": "a.io/x"}, {"name": "kueue.x-k8s.io/topology"}]}) == ("a.io/x",)
    assert foreign_gates({}) == ()
