from __future__ import annotations

import datetime as dt

import pytest

from federation.kube.events import build_event, event_name, micro_time, object_reference

NOW = dt.datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "team-a", "uid": "u-1", "resourceVersion": "42"},
}


def test_micro_time() -> None:
    assert micro_time(NOW) == "2025-01-02T03:04:05.678901Z"


def test_event_shape() -> None:
    event = build_event(
        JOB,
        reason="Dispatched",
        note="sent to worker-1",
        action="Dispatch",
        reporting_controller="kfed.io/manager",
        reporting_instance="kfed-manager-0",
        now=NOW,
    )
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["metadata"]["namespace"] == "team-a"
    assert event["metadata"]["name"].startswith("train.")
    assert event["eventTime"] == "2025-01-02T03:04:05.678901Z"
    assert event["type"] == "Normal"
    assert event["regarding"] == object_reference(JOB)
    assert event["regarding"]["uid"] == "u-1"


def test_cluster_scoped_object_events_go_to_default_and_note_is_truncated() -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}}
    event = build_event(
        cq,
        reason="R" * 300,
        note="é" * 2000,
        action="A",
        reporting_controller="c",
        reporting_instance="i",
        event_type="Warning",
        now=NOW,
    )
    assert event["metadata"]["namespace"] == "default"
    assert len(event["reason"]) == 128
    assert len(event["note"].encode()) <= 1024
    assert "namespace" not in event["regarding"]


def test_bad_type() -> None:
    with pytest.raises(ValueError):
        build_event(JOB, reason="r", note="n", action="a", reporting_controller="c", reporting_instance="i",
                    event_type="Info", now=NOW)  # fmt: skip


def test_event_name_stays_a_valid_name_for_the_longest_object_names() -> None:
    # Found against the real apiserver: "<253-char name>.<hex>" was refused ("must be no more than 253 characters").
    assert event_name("train", NOW) == f"train.{int(NOW.timestamp() * 1e9):x}"
    for name in ("w" * 253, "a" * 235 + "-" + "b" * 17, "a" * 235 + "." + "b" * 17):
        generated = event_name(name, NOW)
        assert len(generated) <= 253
        prefix, _, suffix = generated.rpartition(".")
        assert suffix == f"{int(NOW.timestamp() * 1e9):x}"
        assert name.startswith(prefix)
        assert not prefix.endswith(("-", "."))
    event = build_event({"kind": "Workload", "metadata": {"name": "w" * 253, "namespace": "ns"}}, reason="r",
                        note="n", action="a", reporting_controller="c", reporting_instance="i", now=NOW)  # fmt: skip
    assert len(event["metadata"]["name"]) <= 253
