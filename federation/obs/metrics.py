"""Prometheus metrics, with Kueue's names, labels and meanings where Kueue has the metric, ``kfed_`` names for ours.

Two kinds, kept apart so that no hot path pays for a gauge:

* Events (admissions, evictions, dispatches, API calls) are counters and histograms updated where they happen,
  through the small methods below (one ``labels()`` lookup each; no formatting, no allocation beyond the key).
* State (pending counts, queue usage and quotas, worker connections, report ages) is computed when Prometheus
  scrapes, from the plain samples that *sources* return (``add_source``): each process registers functions that
  read its caches, so a gauge can never be stale or forgotten the way a ``set()`` in some code path can.

Every Kueue metric carries ``replica_role`` (``leader``, ``follower`` or ``standalone``) as Kueue's do. One
:class:`Metrics` object per process holds its own registry, so tests can create several without clashing.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from federation.version import package_version

ROLE_LEADER: Final = "leader"
ROLE_FOLLOWER: Final = "follower"
ROLE_STANDALONE: Final = "standalone"


def _exponential(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets(count)``: 1, then 2.5 doubling ``count - 1`` times."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


_ATTEMPT_BUCKETS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

_GOARCH: Final = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm", "ppc64le": "ppc64le"}

BUILD_INFO_HELP: Final = (
    "Kueue build information. 1 labeled by git version, git commit, build date, go version, compiler, platform. "
    "kfed: 'git_version' is kfed's package version; 'git_commit' and 'build_date' are empty (kfed's package is not "
    "stamped with them); 'go_version' is empty (kfed is a Python program: its Python version is in python_info); "
    "'compiler' is the Python implementation running kfed (sys.implementation.name, e.g. 'cpython') where Kueue "
    "has Go's compiler ('gc'); 'platform' is GOOS/GOARCH spelled as Go does (e.g. 'linux/amd64')."
)


def build_info_labels(*, version: str, implementation: str, system: str, machine: str) -> dict[str, str]:
    """``kueue_build_info``'s labels (Kueue's names, in Kueue's order), each holding only what is true of kfed.

    Kueue fills them from its Go linker flags and ``runtime``; a Python process has no Go version, and kfed's
    package carries no commit or build date, so those stay empty rather than holding something else."""
    arch = machine.lower()
    return {
        "git_version": version,
        "git_commit": "",
        "build_date": "",
        "go_version": "",
        "compiler": implementation,
        "platform": f"{system}/{_GOARCH.get(arch, arch)}",
    }


Sample = tuple[str, tuple[str, ...], float]
"""A gauge value from a source: metric name, label values (in the order of ``GAUGES[name]``'s labels), value."""

GAUGES: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    # name: (help, label names without replica_role)
    "kueue_pending_workloads": (
        "The number of pending workloads, per 'cluster_queue' and 'status'. 'status' can be 'active' (waiting for "
        "a scheduling attempt) or 'inadmissible' (tried, and parked until something changes).",
        ("cluster_queue", "status"),
    ),
    "kueue_reserving_active_workloads": (
        "The number of Workloads that are reserving quota, per 'cluster_queue'",
        ("cluster_queue",),
    ),
    "kueue_admitted_active_workloads": (
        "The number of admitted Workloads that are active, per 'cluster_queue'",
        ("cluster_queue",),
    ),
    "kueue_finished_workloads": (
        "The number of finished workloads per 'cluster_queue'.",
        ("cluster_queue",),
    ),
    "kueue_local_queue_finished_workloads": (
        "The number of finished workloads, per 'local_queue'.",
        ("name", "namespace"),
    ),
    "kueue_cluster_queue_status": (
        "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or 'terminated'). "
        "For a ClusterQueue, the metric only reports a value of 1 for one of the statuses.",
        ("cluster_queue", "status"),
    ),
    "kueue_cluster_queue_resource_reservation": (
        "Reports the cluster_queue's total resource reservation within all the flavors",
        ("cohort", "cluster_queue", "flavor", "resource"),
    ),
    "kueue_cluster_queue_resource_usage": (
        "Reports the cluster_queue's total resource usage within all the flavors",
        ("cohort", "cluster_queue", "flavor", "resource"),
    ),
    "kueue_cluster_queue_nominal_quota": (
        "Reports the cluster_queue's resource nominal quota within all the flavors",
        ("cohort", "cluster_queue", "flavor", "resource"),
    ),
    "kueue_cluster_queue_borrowing_limit": (
        "Reports the cluster_queue's resource borrowing limit within all the flavors. If borrowingLimit is unset, "
        "this metric reports +Inf.",
        ("cohort", "cluster_queue", "flavor", "resource"),
    ),
    "kueue_cluster_queue_lending_limit": (
        "Reports the cluster_queue's resource lending limit within all the flavors. If lendingLimit is unset, this "
        "metric reports +Inf.",
        ("cohort", "cluster_queue", "flavor", "resource"),
    ),
    "kueue_cluster_queue_resource_pending": (
        "Reports the cluster_queue's total pending resource requests. Unlike resource_reservation, pending workloads "
        "have not yet been assigned to flavors.",
        ("cluster_queue", "resource"),
    ),
    "kueue_cluster_queue_weighted_share": (
        "Reports a value that representing the maximum of the ratios of usage above nominal quota to the lendable "
        "resources in the cohort, among all the resources provided by the ClusterQueue, and divided by the weight. "
        "If zero, it means that the usage of the ClusterQueue is below the nominal quota. If the ClusterQueue has a "
        "weight of zero and is borrowing, this will return NaN. (kfed: the integer share its fair sharing orders by; "
        "only with fair sharing on.)",
        ("cluster_queue", "cohort"),
    ),
    "kueue_cohort_weighted_share": (
        "Reports a value that representing the maximum of the ratios of usage above nominal quota to the lendable "
        "resources in the Cohort, among all the resources provided by the Cohort, and divided by the weight. If "
        "zero, it means that the usage of the Cohort is below the nominal quota. If the Cohort has a weight of zero "
        "and is borrowing, this will return NaN. (kfed: the integer share its fair sharing orders by, +Inf for a "
        "weight of zero as Kueue's cohort gauge; only with fair sharing on.)",
        ("cohort",),
    ),
    "kueue_cohort_subtree_quota": (
        "Reports the cohort's nominal quota aggregated within the cohort's subtree. The values are reported per "
        "resource and flavor",
        ("cohort", "flavor", "resource"),
    ),
    "kueue_cohort_subtree_resource_reservations": (
        "Reports the cohort's resource reservations aggregated within the cohort's subtree. The values are reported "
        "per resource and flavor",
        ("cohort", "flavor", "resource"),
    ),
    "kueue_cohort_subtree_admitted_active_workloads": (
        "The number of admitted Workloads that are active, per cohort's subtree",
        ("cohort",),
    ),
    "kueue_cluster_queue_info": (
        "Reports ClusterQueue hierarchy information. The metric has value 1 and can be joined using labels.",
        ("cluster_queue", "parent_cohort", "root_cohort"),
    ),
    "kueue_cohort_info": (
        "Reports Cohort hierarchy information. The metric has value 1 and can be joined using labels.",
        ("cohort", "parent_cohort", "root_cohort"),
    ),
    "kueue_local_queue_pending_workloads": (
        "The number of pending workloads, per 'local_queue' and 'status'.",
        ("name", "namespace", "status"),
    ),
    "kueue_unadmitted_workloads": (
        "The number of unadmitted workloads, per 'cluster_queue', 'reason', and 'underlying_cause' (Kueue v0.20, "
        "with UnadmittedWorkloadsObservability: 'reason' is the Admitted=False reason, 'underlying_cause' the "
        "QuotaReserved=False one).",
        ("cluster_queue", "reason", "underlying_cause"),
    ),
    "kueue_local_queue_unadmitted_workloads": (
        "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', 'reason', and "
        "'underlying_cause'.",
        ("name", "namespace", "cluster_queue", "reason", "underlying_cause"),
    ),
    "kueue_local_queue_reserving_active_workloads": (
        "The number of Workloads that are reserving quota, per 'localQueue'",
        ("name", "namespace"),
    ),
    "kueue_local_queue_admitted_active_workloads": (
        "The number of admitted Workloads that are active, per 'localQueue'",
        ("name", "namespace"),
    ),
    "kueue_local_queue_status": (
        "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or 'Unknown'). "
        "For a LocalQueue, the metric only reports a value of 1 for one of the statuses.",
        ("name", "namespace", "active"),
    ),
    "kueue_local_queue_resource_reservation": (
        "Reports the localQueue's total resource reservation within all the flavors",
        ("name", "namespace", "flavor", "resource"),
    ),
    "kueue_local_queue_resource_usage": (
        "Reports the localQueue's total resource usage within all the flavors",
        ("name", "namespace", "flavor", "resource"),
    ),
    "multikueue_cluster_status": (
        "Reports each MultiKueue worker cluster's 'Active' condition ('True', 'False' or 'Unknown'), per "
        "'cluster_queue' that reaches it; only one of the statuses has the value 1.",
        ("cluster_queue", "cluster", "active"),
    ),
    "kfed_capacity_report_age_seconds": (
        "Seconds since the newest capacity report (ClusterCapacity) of each connected worker was observed",
        ("cluster",),
    ),
    "kfed_worker_connected": (
        "1 while the manager's connection to the worker is healthy (caches synced, apiserver answering), else 0",
        ("cluster",),
    ),
    "kfed_in_flight_workloads": (
        "Workloads dispatched to a worker whose capacity report does not show them yet (the in-flight ledger)",
        (),
    ),
}
"""Every gauge a source may report, with Kueue's help text where it is Kueue's metric."""

_ROLELESS = frozenset({"kfed_capacity_report_age_seconds", "kfed_worker_connected", "kfed_in_flight_workloads"})


class _SourceCollector(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterator[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        role = self._metrics.role
        for source in self._metrics.sources:
            for name, values, value in source():
                family = families.get(name)
                if family is None:
                    help_text, labels = GAUGES[name]
                    names = list(labels) if name in _ROLELESS else [*labels, "replica_role"]
                    family = families[name] = GaugeMetricFamily(name, help_text, labels=names)
                family.add_metric(list(values) if name in _ROLELESS else [*values, role], value)
        yield from families.values()


class Metrics:
    def __init__(self, *, role: str = ROLE_STANDALONE) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.role = role
        """``replica_role`` of every Kueue metric: the manager sets leader/follower as its Lease changes hands."""
        self.sources: list[Callable[[], Iterable[Sample]]] = []
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        r.register(_SourceCollector(self))
        role_label = "replica_role"
        labels = build_info_labels(
            version=package_version(),
            implementation=sys.implementation.name,
            system=sys.platform,
            machine=platform.machine(),
        )
        Gauge("kueue_build_info", BUILD_INFO_HELP, list(labels), registry=r).labels(**labels).set(1)
        cq = ["cluster_queue", "priority_class", role_label]
        lq = ["name", "namespace", "priority_class", role_label]
        self.admission_attempts = Counter(
            "kueue_admission_attempts_total",
            "The total number of attempts to admit workloads. Each admission attempt might try to admit more than one "
            "workload. The label 'result' can have the following values: 'success' means that at least one workload "
            "was admitted, 'inadmissible' means that no workload was admitted.",
            ["result", role_label],
            registry=r,
        )
        self.admission_attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt. The label 'result' can have the following values: 'success' means "
            "that at least one workload was admitted, 'inadmissible' means that no workload was admitted.",
            ["result", role_label],
            buckets=_ATTEMPT_BUCKETS,
            registry=r,
        )
        self.quota_reserved_workloads = Counter(
            "kueue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'cluster_queue'",
            cq,
            registry=r,
        )
        self.quota_reserved_wait_time = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation, per 'cluster_queue'",
            cq,
            buckets=_exponential(14),
            registry=r,
        )
        self.local_queue_quota_reserved_workloads = Counter(
            "kueue_local_queue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'local_queue'",
            lq,
            registry=r,
        )
        self.local_queue_quota_reserved_wait_time = Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.admitted_workloads = Counter(
            "kueue_admitted_workloads_total",
            "The total number of admitted workloads per 'cluster_queue'",
            cq,
            registry=r,
        )
        self.admission_wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per 'cluster_queue'",
            cq,
            buckets=_exponential(16),
            registry=r,
        )
        self.admission_checks_wait_time = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per 'cluster_queue'",
            cq,
            buckets=_exponential(14),
            registry=r,
        )
        self.local_queue_admission_checks_wait_time = Histogram(
            "kueue_local_queue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.ready_wait_time = Histogram(
            "kueue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'cluster_queue'",
            cq,
            buckets=_exponential(14),
            registry=r,
        )
        self.admitted_until_ready_wait_time = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            cq,
            buckets=_exponential(14),
            registry=r,
        )
        self.local_queue_ready_wait_time = Histogram(
            "kueue_local_queue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.local_queue_admitted_until_ready_wait_time = Histogram(
            "kueue_local_queue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.recovery_wait_time = Histogram(
            "kueue_workload_recovery_wait_time_seconds",
            "The time a workload's pods took to be ready again after one stopped being so, per 'cluster_queue'",
            cq,
            buckets=_exponential(14),
            registry=r,
        )
        self.local_queue_recovery_wait_time = Histogram(
            "kueue_local_queue_workload_recovery_wait_time_seconds",
            "The time a workload's pods took to be ready again after one stopped being so, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.cohort_subtree_admitted_workloads = Counter(
            "kueue_cohort_subtree_admitted_workloads_total",
            "The total number of admitted workloads per cohort's subtree",
            ["cohort", "priority_class", role_label],
            registry=r,
        )
        self.local_queue_admitted_workloads = Counter(
            "kueue_local_queue_admitted_workloads_total",
            "The total number of admitted workloads per 'local_queue'",
            lq,
            registry=r,
        )
        self.local_queue_admission_wait_time = Histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per 'local_queue'",
            lq,
            buckets=_exponential(14),
            registry=r,
        )
        self.workload_creation_latency = Histogram(
            "kueue_workload_creation_latency_seconds",
            "The time between a job was created until its workload was created, per 'job_kind'. Entries are only "
            "recorded for objects with generation 1.",
            ["job_kind", role_label],
            buckets=tuple(0.01 * 2**i for i in range(11)),
            registry=r,
        )
        self.pod_scheduling_gate_removal = Histogram(
            "kueue_pod_scheduling_gate_removal_seconds",
            "Duration from Workload admission to removal of a Pod scheduling gate.",
            ["name", "cluster_queue", "is_group", role_label],  # replica_role since Kueue v0.20 (#14488)
            registry=r,
        )
        self.evicted_workloads = Counter(
            "kueue_evicted_workloads_total",
            "The number of evicted workloads per 'cluster_queue'. 'reason' is Kueue's eviction reason (Preempted, "
            "PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped, LocalQueueStopped, NodeFailures, Deactivated); "
            "'underlying_cause' is empty when 'reason' is the root cause.",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", role_label],
            registry=r,
        )
        self.local_queue_evicted_workloads = Counter(
            "kueue_local_queue_evicted_workloads_total",
            "The number of evicted workloads per 'local_queue'",
            ["name", "namespace", "reason", "underlying_cause", "priority_class", role_label],
            registry=r,
        )
        self.pods_ready_to_evicted_time = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "The number of seconds between a workload's pods being ready and eviction workloads per 'cluster_queue'. "
            "'reason' and 'underlying_cause' as in kueue_evicted_workloads_total. Only workloads whose pods were "
            "ready when evicted are recorded.",
            ["cluster_queue", "reason", "underlying_cause", role_label],
            buckets=_exponential(14),
            registry=r,
        )
        self.workload_eviction_latency = Histogram(
            "kueue_workload_eviction_latency_seconds",
            "The time from workload eviction (WorkloadEvicted condition becomes True) until the workload returns to "
            "Pending (quota released), per 'cluster_queue' and the eviction 'reason'. (kfed: observed by the manager "
            "when it releases the reservation, after the copies are withdrawn from the worker.)",
            ["cluster_queue", "reason", role_label],
            buckets=_exponential(14),
            registry=r,
        )
        self.preempted_workloads = Counter(
            "kueue_preempted_workloads_total",
            "The number of preempted workloads per 'preempting_cluster_queue'. 'reason': InClusterQueue, "
            "InCohortReclamation, InCohortFairSharing or InCohortReclaimWhileBorrowing.",
            ["preempting_cluster_queue", "reason", role_label],
            registry=r,
        )
        self.finished_workloads = Counter(
            "kueue_finished_workloads_total",
            "The total number of finished workloads per 'cluster_queue'",
            cq,
            registry=r,
        )
        self.local_queue_finished_workloads = Counter(
            "kueue_local_queue_finished_workloads_total",
            "The total number of finished workloads per 'local_queue'",
            lq,
            registry=r,
        )
        self.execution_time = Histogram(
            "kueue_execution_time_seconds",
            "The total execution time of a finished admitted workload (from first admission to completion, including "
            "time across evict/readmit cycles), per 'cluster_queue'",
            cq,
            buckets=_exponential(16),
            registry=r,
        )
        self.local_queue_execution_time = Histogram(
            "kueue_local_queue_execution_time_seconds",
            "The total execution time of a finished admitted workload (from first admission to completion, including "
            "time across evict/readmit cycles), per 'local_queue'",
            lq,
            buckets=_exponential(16),
            registry=r,
        )
        mk = ["cluster_queue", "cluster", role_label]
        self.multikueue_dispatched = Counter(
            "multikueue_workloads_dispatched_total",
            "The total number of remote workloads created by the MultiKueue manager on a worker cluster, per "
            "'cluster_queue' and 'cluster'.",
            mk,
            registry=r,
        )
        self.multikueue_admitted = Counter(
            "multikueue_workloads_admitted_total",
            "The total number of remote workload admissions on a worker cluster, per 'cluster_queue' and 'cluster'. "
            "A workload may be counted more than once if it is evicted and re-admitted.",
            mk,
            registry=r,
        )
        self.multikueue_evicted = Counter(
            "multikueue_workloads_evicted_total",
            "The total number of workloads evicted from a worker cluster, per 'cluster_queue', 'cluster' and 'reason'.",
            ["cluster_queue", "cluster", "reason", role_label],
            registry=r,
        )
        self.dispatch_latency = Histogram(
            "kfed_dispatch_latency_seconds",
            "Seconds from quota reservation on the manager to the remote Workload being created on the worker",
            ["cluster"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.remote_api_errors = Counter(
            "kfed_remote_api_errors_total",
            "Failed API calls to worker clusters (each HTTP attempt), per 'cluster' and 'reason' (the HTTP status "
            "reason, or the error's type when no answer came)",
            ["cluster", "reason"],
            registry=r,
        )
        self.remote_api_latency = Histogram(
            "kfed_remote_api_request_duration_seconds",
            "Latency of API calls to worker clusters (each HTTP attempt), per 'cluster' and 'verb'",
            ["cluster", "verb"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    # -- sources --------------------------------------------------------------------------------------------------

    def add_source(self, source: Callable[[], Iterable[Sample]]) -> None:
        """Register a function read at every scrape; it returns gauge samples (names from :data:`GAUGES`)."""
        self.sources.append(source)

    def remove_source(self, source: Callable[[], Iterable[Sample]]) -> None:
        if source in self.sources:
            self.sources.remove(source)

    # -- events ---------------------------------------------------------------------------------------------------

    def admission_attempt(self, *, admitted: bool, seconds: float) -> None:
        result = "success" if admitted else "inadmissible"
        self.admission_attempts.labels(result, self.role).inc()
        self.admission_attempt_duration.labels(result, self.role).observe(seconds)

    def quota_reserved(
        self, *, cluster_queue: str, namespace: str, local_queue: str, priority_class: str, waited: float
    ) -> None:
        role = self.role
        self.quota_reserved_workloads.labels(cluster_queue, priority_class, role).inc()
        self.quota_reserved_wait_time.labels(cluster_queue, priority_class, role).observe(max(0.0, waited))
        self.local_queue_quota_reserved_workloads.labels(local_queue, namespace, priority_class, role).inc()
        self.local_queue_quota_reserved_wait_time.labels(local_queue, namespace, priority_class, role).observe(
            max(0.0, waited)
        )

    def workload_created(self, *, job_kind: str, seconds: float) -> None:
        """The job controller created a Workload for a Job (of ``job_kind``) ``seconds`` after the Job was created."""
        self.workload_creation_latency.labels(job_kind, self.role).observe(max(0.0, seconds))

    def gate_removed(self, *, gate: str, cluster_queue: str, is_group: bool, seconds: float) -> None:
        """A pod's scheduling gate ``gate`` was removed ``seconds`` after its workload was admitted."""
        self.pod_scheduling_gate_removal.labels(
            gate, cluster_queue, "true" if is_group else "false", self.role
        ).observe(max(0.0, seconds))

    def admitted(
        self,
        *,
        cluster_queue: str,
        namespace: str,
        local_queue: str,
        priority_class: str,
        waited: float,
        checks_waited: float | None,
    ) -> None:
        role = self.role
        self.admitted_workloads.labels(cluster_queue, priority_class, role).inc()
        self.admission_wait_time.labels(cluster_queue, priority_class, role).observe(max(0.0, waited))
        self.local_queue_admitted_workloads.labels(local_queue, namespace, priority_class, role).inc()
        self.local_queue_admission_wait_time.labels(local_queue, namespace, priority_class, role).observe(
            max(0.0, waited)
        )
        if checks_waited is not None:
            self.admission_checks_wait_time.labels(cluster_queue, priority_class, role).observe(max(0.0, checks_waited))
            self.local_queue_admission_checks_wait_time.labels(local_queue, namespace, priority_class, role).observe(
                max(0.0, checks_waited)
            )

    def cohort_admitted(self, *, cohorts: Iterable[str], priority_class: str) -> None:
        """A workload was admitted in a ClusterQueue under ``cohorts`` (every ancestor, as Kueue counts it)."""
        for cohort in cohorts:
            self.cohort_subtree_admitted_workloads.labels(cohort, priority_class, self.role).inc()

    def pods_ready(
        self,
        *,
        cluster_queue: str,
        namespace: str,
        local_queue: str,
        priority_class: str,
        waits: tuple[float, float] | None = None,
        recovered: float | None = None,
    ) -> None:
        """A workload's ``PodsReady`` turned True. ``waits``: seconds since it was created or requeued and since it
        was admitted, the first time its pods are ready. ``recovered``: seconds since it turned False with
        ``WaitForRecovery``, when they are ready again (Kueue v0.20). Kueue records these only with
        waitForPodsReady, which keeps that condition."""
        role = self.role
        if waits is not None:
            queued, admitted = max(0.0, waits[0]), max(0.0, waits[1])
            self.ready_wait_time.labels(cluster_queue, priority_class, role).observe(queued)
            self.admitted_until_ready_wait_time.labels(cluster_queue, priority_class, role).observe(admitted)
            self.local_queue_ready_wait_time.labels(local_queue, namespace, priority_class, role).observe(queued)
            self.local_queue_admitted_until_ready_wait_time.labels(
                local_queue, namespace, priority_class, role
            ).observe(admitted)
        if recovered is not None:
            self.recovery_wait_time.labels(cluster_queue, priority_class, role).observe(max(0.0, recovered))
            self.local_queue_recovery_wait_time.labels(local_queue, namespace, priority_class, role).observe(
                max(0.0, recovered)
            )

    def evicted(
        self,
        *,
        cluster_queue: str,
        namespace: str,
        local_queue: str,
        priority_class: str,
        reason: str,
        underlying_cause: str = "",
        pods_ready_for: float | None = None,
    ) -> None:
        """One eviction; ``pods_ready_for``: seconds the workload's pods had been ready (None: they were not)."""
        role = self.role
        self.evicted_workloads.labels(cluster_queue, reason, underlying_cause, priority_class, role).inc()
        if pods_ready_for is not None:
            self.pods_ready_to_evicted_time.labels(cluster_queue, reason, underlying_cause, role).observe(
                max(0.0, pods_ready_for)
            )
        self.local_queue_evicted_workloads.labels(
            local_queue, namespace, reason, underlying_cause, priority_class, role
        ).inc()

    def quota_released(self, *, cluster_queue: str, reason: str, seconds: float) -> None:
        """An evicted workload's reservation was released ``seconds`` after its ``Evicted`` turned True."""
        self.workload_eviction_latency.labels(cluster_queue, reason, self.role).observe(max(0.0, seconds))

    def preempted(self, *, preempting_cluster_queue: str, reason: str) -> None:
        self.preempted_workloads.labels(preempting_cluster_queue, reason, self.role).inc()

    def finished(
        self,
        *,
        cluster_queue: str,
        namespace: str,
        local_queue: str,
        priority_class: str,
        execution_seconds: float | None,
    ) -> None:
        """A Workload finished; ``execution_seconds`` (``total_execution_time``) when it finished admitted."""
        role = self.role
        self.finished_workloads.labels(cluster_queue, priority_class, role).inc()
        self.local_queue_finished_workloads.labels(local_queue, namespace, priority_class, role).inc()
        if execution_seconds is not None:
            self.execution_time.labels(cluster_queue, priority_class, role).observe(execution_seconds)
            self.local_queue_execution_time.labels(local_queue, namespace, priority_class, role).observe(
                execution_seconds
            )

    def remote_call_observer(self, cluster: str) -> Callable[[str, float, str | None], None]:
        """A callback for one worker's API client: ``(verb, seconds, error reason or None)`` per HTTP attempt."""
        latency = self.remote_api_latency
        errors = self.remote_api_errors

        def observe(verb: str, seconds: float, error: str | None) -> None:
            latency.labels(cluster, verb).observe(seconds)
            if error is not None:
                errors.labels(cluster, error).inc()

        return observe

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
