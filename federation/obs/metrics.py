"""Prometheus metrics, with Kueue's names where the meaning is the same and ``kfed_`` names for what is ours.

One :class:`Metrics` object per process holds its own registry, so tests can create several without clashing.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_WAIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.pending_workloads = Gauge(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue and status",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads_total", "Workloads that got quota reserved", ["cluster_queue"], registry=r
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads_total", "Workloads admitted", ["cluster_queue"], registry=r
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Seconds from creation to admission",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads_total", "Workloads evicted", ["cluster_queue", "reason"], registry=r
        )
        self.finished_workloads = Counter(
            "kueue_finished_workloads_total", "Workloads finished", ["cluster_queue"], registry=r
        )
        self.admission_attempts = Counter(
            "kueue_admission_attempts_total", "Scheduling attempts by result", ["result"], registry=r
        )
        self.cluster_queue_resource_usage = Gauge(
            "kueue_cluster_queue_resource_usage", "Quota in use", ["cluster_queue", "flavor", "resource"], registry=r
        )
        self.cluster_queue_nominal_quota = Gauge(
            "kueue_cluster_queue_nominal_quota", "Nominal quota", ["cluster_queue", "flavor", "resource"], registry=r
        )
        self.multikueue_dispatched = Counter(
            "multikueue_workloads_dispatched_total", "Workloads dispatched to a worker", ["cluster"], registry=r
        )
        self.dispatch_latency = Histogram(
            "kfed_dispatch_latency_seconds",
            "Seconds from quota reservation to the remote copy existing",
            ["cluster"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.capacity_report_age = Gauge(
            "kfed_capacity_report_age_seconds",
            "Age of the newest capacity report per worker",
            ["cluster"],
            registry=r,
        )
        self.remote_api_errors = Counter(
            "kfed_remote_api_errors_total", "Failed API calls to worker clusters", ["cluster", "reason"], registry=r
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
