"""The manager Job's status stays within the Job API's rules when a Job is stopped and runs again."""

from __future__ import annotations

from typing import Any

from manager.decisions.job_status import (
    lawful_status,
    mirrored_job_status,
    status_mirrored,
    stopped_job_status,
)


def cond(kind: str, status: str = "True", at: str = "2026-11-25T10:00:00Z") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": at}


def job(status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"spec": {"parallelism": 1, "completions": 1, **spec}, "status": status}


def test_a_finished_status_without_start_time_gets_one_so_the_mirror_is_accepted() -> None:
    remote = {
        "status": {
            "completionTime": "2026-11-22T12:00:05Z",
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-22T12:00:05Z"}],
        }
    }
    manager = job({})
    mirrored = mirrored_job_status(remote, manager_job=manager)
    assert mirrored["startTime"] == "2026-11-22T12:00:05Z"
    assert mirrored["completionTime"] == remote["status"]["completionTime"]
    assert status_mirrored({**manager, "status": mirrored}, remote)
    assert mirrored_job_status({"status": {"active": 1}}, manager_job=manager) == {"active": 1}
    started = {"status": {"startTime": "t0", "completionTime": "t1", "conditions": [cond("Complete")]}}
    assert mirrored_job_status(started, manager_job=manager)["startTime"] == "t0"


def test_a_stopped_job_keeps_the_counters_the_apiserver_never_lets_go_down_and_nothing_of_its_run() -> None:
    ran = job(
        {
            "startTime": "2026-11-25T10:00:00Z",
            "active": 1,
            "ready": 1,
            "terminating": 0,
            "succeeded": 2,
            "failed": 1,
            "uncountedTerminatedPods": {},
            "conditions": [cond("Suspended", "False")],
        },
        suspend=True,
        parallelism=1,
        completions=4,
    )
    assert stopped_job_status(ran) == {"succeeded": 2, "failed": 1}
    assert stopped_job_status(job({}, suspend=True)) == {}
    assert stopped_job_status(job({"startTime": "t0", "active": 1}, suspend=True)) == {}


def test_an_indexed_job_that_can_scale_down_may_lose_its_succeeded_count_but_never_its_failed_one() -> None:
    elastic = job({"succeeded": 2, "failed": 1, "completedIndexes": "0-1"}, suspend=True, completionMode="Indexed")
    elastic["spec"].update(parallelism=4, completions=4)
    assert stopped_job_status(elastic) == {"failed": 1}
    fixed = job({"succeeded": 2}, suspend=True, completionMode="Indexed", parallelism=1, completions=4)
    assert stopped_job_status(fixed) == {"succeeded": 2}


def test_the_next_runs_mirror_shows_at_least_the_earlier_counts_then_the_copys_final_ones() -> None:
    # stopped after one pod succeeded and one failed, dispatched again: the new copy counts from zero
    manager = job({"succeeded": 1, "failed": 1}, suspend=False, completions=3)
    running = {"status": {"startTime": "t1", "active": 1}}
    mirrored = mirrored_job_status(running, manager_job=manager)
    assert mirrored == {"startTime": "t1", "active": 1, "succeeded": 1, "failed": 1}
    assert status_mirrored({**manager, "status": mirrored}, running)  # written once, not every interval
    done = {
        "status": {
            "startTime": "t1",
            "completionTime": "t2",
            "succeeded": 3,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        }
    }
    final = mirrored_job_status(done, manager_job={**manager, "status": mirrored})
    assert (final["succeeded"], final["failed"], final["startTime"]) == (3, 1, "t1")
    assert [c["type"] for c in final["conditions"]] == ["SuccessCriteriaMet", "Complete"]


def test_a_running_job_keeps_its_start_time_and_permanent_conditions() -> None:
    # a Job stopped by an older kfed-manager kept its startTime; unsuspended again, it may not change
    manager = job({"startTime": "t0", "conditions": [cond("FailureTarget")]}, suspend=False)
    mirrored = mirrored_job_status({"status": {"startTime": "t1", "active": 1}}, manager_job=manager)
    assert mirrored["startTime"] == "t0"
    assert [c["type"] for c in mirrored["conditions"]] == ["FailureTarget"]
    # suspended, it may: a stop clears it
    assert "startTime" not in stopped_job_status({**manager, "spec": {"suspend": True}})


def test_a_status_within_the_rules_is_written_as_wanted() -> None:
    current = {"startTime": "t0", "active": 1, "succeeded": 1, "completionTime": None}
    wanted = {"startTime": "t0", "active": 0, "succeeded": 2, "completionTime": "t5", "conditions": [cond("Complete")]}
    assert lawful_status(current, wanted, spec={"suspend": False}) == wanted
    assert lawful_status({"completionTime": "t4"}, {"completionTime": "t5"}, spec={})["completionTime"] == "t4"
