"""Kueue's reclaimable pods of a batch/v1 Job, and the quota a Workload holds once some are reclaimable."""

from __future__ import annotations

from typing import Any

import pytest

from federation.admission.api_workloads import reserved_usage
from federation.reclaimable_pods import reclaimable_pods, recorded, terminal_indexes, usable_count


def _job(parallelism: int | None, completions: int | None, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if status.pop("indexed", False):
        spec["completionMode"] = "Indexed"
    return {"spec": spec, "status": status}


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (_job(1, 5, succeeded=4), []),  # one pod at a time: nothing to give back
        (_job(3, 10, succeeded=0), []),  # nothing terminal yet
        (_job(3, 10, succeeded=7), []),  # 3 left: still a full round
        (_job(3, 10, succeeded=8), [{"name": "main", "count": 1}]),
        (_job(3, 10, succeeded=12), [{"name": "main", "count": 3}]),  # more than needed: all of them
        (_job(4, None, succeeded=1), [{"name": "main", "count": 1}]),  # completions default to parallelism
        (_job(None, None, succeeded=1), []),  # parallelism defaults to 1
        # at most 3 pods run at once: one succeeded, two still run and keep their quota (Kueue v0.20)
        (_job(5, 3, succeeded=1), [{"name": "main", "count": 1}]),
        # Indexed: completed and failed indexes together, each once (Kueue v0.20 counts failed indexes too)
        (
            _job(4, 6, indexed=True, succeeded=9, completedIndexes="0-2", failedIndexes="2,3"),
            [{"name": "main", "count": 2}],
        ),
        (_job(4, 6, indexed=True, succeeded=3, completedIndexes="3-5,7-9"), [{"name": "main", "count": 1}]),
    ],
)
def test_reclaimable_pods_of_a_job(job: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert reclaimable_pods(job) == expected


def test_terminal_indexes_count_the_union_below_completions_and_skip_what_is_not_a_range() -> None:
    assert terminal_indexes("0-3,7", "2-4,x,9", 8) == 6  # 0,1,2,3,4,7 (9 is past completions)
    assert terminal_indexes("", "", 5) == 0
    assert terminal_indexes("0-10", "", 0) == 0


def _admitted(count: int, cpu: str, reclaimable: int | None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "count": count, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}}
            ],
        }
    }
    if reclaimable is not None:
        status["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    return {"status": status}


def test_a_workload_holds_quota_only_for_the_pods_it_may_still_run() -> None:
    assert reserved_usage(_admitted(4, "4", None)) == {("default", "cpu"): 4000}
    assert reserved_usage(_admitted(4, "4", 1)) == {("default", "cpu"): 3000}
    assert reserved_usage(_admitted(4, "2", 3)) == {("default", "cpu"): 500}
    assert reserved_usage(_admitted(4, "4", 9)) == {("default", "cpu"): 0}
    assert usable_count(_admitted(4, "4", 1), "other", 4) == 4
    assert recorded(_admitted(4, "4", 0)) == []
    assert recorded(_admitted(4, "4", 2)) == [{"name": "main", "count": 2}]
