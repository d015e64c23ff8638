"""The compare bench's pure parts: its reading of ``kubectl get -w -o json`` and how it counts writes."""

from __future__ import annotations

from typing import Any

from e2e.bench.compare_bench import record_true_conditions, write_kind


def _job(name: str, *conditions: str) -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": name},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


def test_the_list_a_restarted_watch_prints_first_counts_its_items() -> None:
    seen: dict[str, dict[str, float]] = {}
    record_true_conditions(seen, _job("a"), 1.0)
    # kubectl 1.36 prints the state at the (re)start of a watch as one List document
    record_true_conditions(seen, {"kind": "List", "items": [_job("a", "Complete"), _job("b", "Complete")]}, 2.0)
    assert seen == {"a": {"Complete": 2.0}, "b": {"Complete": 2.0}}


def test_only_the_first_sighting_counts_and_other_documents_are_skipped() -> None:
    seen: dict[str, dict[str, float]] = {}
    record_true_conditions(seen, _job("a", "Complete"), 1.0)
    record_true_conditions(seen, _job("a", "Complete"), 5.0)
    record_true_conditions(seen, {"kind": "Status", "status": "Failure"}, 6.0)
    assert seen == {"a": {"Complete": 1.0}}


def test_writes_by_the_clock_are_told_apart_from_writes_for_a_job() -> None:
    # leases, capacity reports and queue counts are written by time, so they count against a slow run more
    assert [write_kind(r) for r in ("leases", "clustercapacities/status", "localqueues/status")] == ["by time"] * 3
    assert [write_kind(r) for r in ("workloads", "workloads/status", "jobs", "jobs/status")] == ["per job"] * 4
    assert write_kind("events") == "events"
