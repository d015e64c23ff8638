"""Kueue's metrics as kfed sets them: names, labels and values, from the pure parts of federation.obs.metrics."""

from __future__ import annotations

import platform
import sys

from prometheus_client.parser import text_string_to_metric_families

from federation.obs.metrics import Metrics, build_info_labels
from federation.version import package_version


def _samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }


def test_build_info_labels_hold_only_what_is_true_of_a_python_process() -> None:
    assert build_info_labels(version="0.3.0", implementation="cpython", system="linux", machine="x86_64") == {
        "git_version": "0.3.0",
        "git_commit": "",
        "build_date": "",
        "go_version": "",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }
    assert build_info_labels(version="1", implementation="pypy", system="linux", machine="aarch64")["platform"] == (
        "linux/arm64"
    )


def test_build_info_is_exported_with_kueues_label_names_and_the_python_version_in_python_info() -> None:
    samples = _samples(Metrics())
    [(labels, value)] = [(dict(ls), v) for (n, ls), v in samples.items() if n == "kueue_build_info"]
    assert value == 1
    assert set(labels) == {"git_version", "git_commit", "build_date", "go_version", "compiler", "platform"}
    assert labels["go_version"] == ""
    assert labels["git_version"] == package_version()
    assert labels["compiler"] == sys.implementation.name
    [python] = [dict(ls) for (n, ls) in samples if n == "python_info"]
    assert python["version"] == platform.python_version()


def test_a_recovery_observes_kueues_two_recovery_histograms_only() -> None:
    metrics = Metrics(role="follower")
    metrics.pods_ready(cluster_queue="cq", namespace="ns", local_queue="lq", priority_class="p", recovered=12)
    got = _samples(metrics)
    cq = frozenset({"cluster_queue": "cq", "priority_class": "p", "replica_role": "follower"}.items())
    lq = frozenset({"name": "lq", "namespace": "ns", "priority_class": "p", "replica_role": "follower"}.items())
    assert got[("kueue_workload_recovery_wait_time_seconds_sum", cq)] == 12
    assert got[("kueue_workload_recovery_wait_time_seconds_count", cq)] == 1
    assert got[("kueue_local_queue_workload_recovery_wait_time_seconds_sum", lq)] == 12
    assert ("kueue_ready_wait_time_seconds_count", cq) not in got, "a recovery is no ready wait (Kueue v0.20)"


def test_pods_ready_observes_kueues_four_ready_histograms() -> None:
    metrics = Metrics(role="leader")
    metrics.pods_ready(cluster_queue="cq", namespace="ns", local_queue="lq", priority_class="", waits=(7, 3))
    got = _samples(metrics)
    cq = frozenset({"cluster_queue": "cq", "priority_class": "", "replica_role": "leader"}.items())
    lq = frozenset({"name": "lq", "namespace": "ns", "priority_class": "", "replica_role": "leader"}.items())
    assert got[("kueue_ready_wait_time_seconds_sum", cq)] == 7
    assert got[("kueue_admitted_until_ready_wait_time_seconds_sum", cq)] == 3
    assert got[("kueue_local_queue_ready_wait_time_seconds_sum", lq)] == 7
    assert got[("kueue_local_queue_admitted_until_ready_wait_time_seconds_sum", lq)] == 3
    # Kueue's buckets: generateExponentialBuckets(14) = 1, 2.5, 5, ... ; 3 s falls in le=5, not le=2.5
    bucket = "kueue_admitted_until_ready_wait_time_seconds_bucket"
    assert got[(bucket, cq | {("le", "2.5")})] == 0
    assert got[(bucket, cq | {("le", "5.0")})] == 1


def test_eviction_of_ready_pods_observes_pods_ready_to_evicted_time() -> None:
    metrics = Metrics(role="leader")
    for reason, ready_for in (("Preempted", 12.0), ("PodsReadyTimeout", None)):  # never ready: no sample (Kueue)
        metrics.evicted(
            cluster_queue="cq",
            namespace="ns",
            local_queue="lq",
            priority_class="",
            reason=reason,
            pods_ready_for=ready_for,
        )
    got = _samples(metrics)
    labels = {"cluster_queue": "cq", "underlying_cause": "", "replica_role": "leader"}
    preempted = frozenset({**labels, "reason": "Preempted"}.items())
    assert got[("kueue_pods_ready_to_evicted_time_seconds_count", preempted)] == 1
    assert got[("kueue_pods_ready_to_evicted_time_seconds_sum", preempted)] == 12
    assert (
        "kueue_pods_ready_to_evicted_time_seconds_count",
        frozenset({**labels, "reason": "PodsReadyTimeout"}.items()),
    ) not in got
    evicted = {**labels, "priority_class": ""}
    assert got[("kueue_evicted_workloads_total", frozenset({**evicted, "reason": "PodsReadyTimeout"}.items()))] == 1


def test_admission_checks_wait_is_observed_per_local_queue_too() -> None:
    metrics = Metrics(role="leader")
    metrics.admitted(cluster_queue="cq", namespace="ns", local_queue="lq", priority_class="", waited=9, checks_waited=4)
    lq = frozenset({"name": "lq", "namespace": "ns", "priority_class": "", "replica_role": "leader"}.items())
    assert _samples(metrics)[("kueue_local_queue_admission_checks_wait_time_seconds_sum", lq)] == 4


def test_workload_creation_latency_in_kueues_buckets() -> None:
    metrics = Metrics(role="leader")
    metrics.workload_created(job_kind="Job", seconds=0.03)
    got = _samples(metrics)
    labels = frozenset({"job_kind": "Job", "replica_role": "leader"}.items())
    bucket = "kueue_workload_creation_latency_seconds_bucket"
    assert got[(bucket, labels | {("le", "0.02")})] == 0  # prometheus.ExponentialBuckets(0.01, 2, 11)
    assert got[(bucket, labels | {("le", "0.04")})] == 1
    assert got[(bucket, labels | {("le", "10.24")})] == 1


def test_quota_released_observes_the_eviction_latency() -> None:
    metrics = Metrics(role="leader")
    metrics.quota_released(cluster_queue="cq", reason="Preempted", seconds=4.0)
    labels = frozenset({"cluster_queue": "cq", "reason": "Preempted", "replica_role": "leader"}.items())
    got = _samples(metrics)
    assert got[("kueue_workload_eviction_latency_seconds_count", labels)] == 1
    assert got[("kueue_workload_eviction_latency_seconds_sum", labels)] == 4


def test_cohort_admitted_counts_every_ancestor_once() -> None:
    metrics = Metrics(role="leader")
    metrics.cohort_admitted(cohorts=["team", "org"], priority_class="high")
    got = _samples(metrics)
    for cohort in ("team", "org"):
        labels = frozenset({"cohort": cohort, "priority_class": "high", "replica_role": "leader"}.items())
        assert got[("kueue_cohort_subtree_admitted_workloads_total", labels)] == 1


def test_gate_removed_has_kueue_v0_20s_labels_with_replica_role() -> None:
    metrics = Metrics(role="leader")
    metrics.gate_removed(gate="kueue.x-k8s.io/topology", cluster_queue="cq", is_group=False, seconds=2.0)
    labels = frozenset(
        {
            "name": "kueue.x-k8s.io/topology",
            "cluster_queue": "cq",
            "is_group": "false",
            "replica_role": "leader",
        }.items()
    )
    got = _samples(metrics)
    assert got[("kueue_pod_scheduling_gate_removal_seconds_count", labels)] == 1
    assert got[("kueue_pod_scheduling_gate_removal_seconds_sum", labels)] == 2


def test_a_finished_workload_observes_its_execution_time_per_cluster_and_local_queue() -> None:
    metrics = Metrics(role="leader")
    metrics.finished(cluster_queue="cq", namespace="ns", local_queue="lq", priority_class="", execution_seconds=19.5)
    metrics.finished(cluster_queue="cq", namespace="ns", local_queue="lq", priority_class="", execution_seconds=None)
    got = _samples(metrics)
    cq = frozenset({"cluster_queue": "cq", "priority_class": "", "replica_role": "leader"}.items())
    lq = frozenset({"name": "lq", "namespace": "ns", "priority_class": "", "replica_role": "leader"}.items())
    assert got[("kueue_finished_workloads_total", cq)] == 2
    assert got[("kueue_execution_time_seconds_count", cq)] == 1
    assert got[("kueue_execution_time_seconds_sum", cq)] == 19.5
    assert got[("kueue_execution_time_seconds_bucket", cq | {("le", "20.0")})] == 1
    assert got[("kueue_execution_time_seconds_bucket", cq | {("le", "10.0")})] == 0
    assert got[("kueue_local_queue_execution_time_seconds_count", lq)] == 1
