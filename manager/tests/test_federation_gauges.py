from __future__ import annotations

import datetime as dt
from typing import Any

from manager.decisions.federation_gauges import WorkerView, multikueue_cluster_samples, worker_samples


def _cq(name: str, check: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}}


def test_multikueue_cluster_status_per_cluster_queue_and_worker() -> None:
    checks = {
        "mk": {
            "metadata": {"name": "mk"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"kind": "MultiKueueConfig", "name": "c"},
            },
        }
    }
    configs = {"c": {"metadata": {"name": "c"}, "spec": {"clusters": ["w1", "w2", "w3"]}}}
    clusters: dict[str, dict[str, Any]] = {
        "w1": {"metadata": {"name": "w1"}, "status": {"conditions": [{"type": "Active", "status": "True"}]}},
        "w2": {"metadata": {"name": "w2"}, "status": {"conditions": [{"type": "Active", "status": "False"}]}},
        "w3": {"metadata": {"name": "w3"}},
    }  # a fourth worker named nowhere, and w3 without a condition yet
    samples = multikueue_cluster_samples([_cq("cq", "mk")], admission_checks=checks, configs=configs, clusters=clusters)
    ones = {labels for name, labels, value in samples if value == 1}
    assert ones == {("cq", "w1", "True"), ("cq", "w2", "False"), ("cq", "w3", "Unknown")}
    assert len(samples) == 9
    assert {name for name, _, _ in samples} == {"multikueue_cluster_status"}


def test_worker_samples() -> None:
    now = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)
    samples = worker_samples(
        [WorkerView("w1", True, now - dt.timedelta(seconds=12)), WorkerView("w2", False, None)], in_flight=3, now=now
    )
    assert ("kfed_in_flight_workloads", (), 3.0) in samples
    assert ("kfed_capacity_report_age_seconds", ("w1",), 12.0) in samples
    assert ("kfed_worker_connected", ("w2",), 0.0) in samples
    assert not any(name == "kfed_capacity_report_age_seconds" and labels == ("w2",) for name, labels, _ in samples)
