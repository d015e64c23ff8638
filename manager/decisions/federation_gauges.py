"""The manager's federation gauges (pure): MultiKueue's per-ClusterQueue worker health and kfed's worker gauges.

``multikueue_cluster_status`` is Kueue's (v0.20): for each ClusterQueue, each worker cluster its MultiKueue check
reaches, with the MultiKueueCluster's ``Active`` condition (``Unknown`` until one is written). A worker named by a
MultiKueueConfig without a MultiKueueCluster object is not reported, as in Kueue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.queue_metrics import Sample
from federation.conditions import find_condition
from manager.decisions.reservation import multikueue_workers

_STATUSES = ("True", "False", "Unknown")


def multikueue_cluster_samples(
    cluster_queues: Iterable[Mapping[str, Any]],
    *,
    admission_checks: Mapping[str, Mapping[str, Any]],
    configs: Mapping[str, Mapping[str, Any]],
    clusters: Mapping[str, Mapping[str, Any]],
) -> list[Sample]:
    samples: list[Sample] = []
    for queue in cluster_queues:
        targets = multikueue_workers(queue, admission_checks=admission_checks, configs=configs)
        if isinstance(targets, str):
            continue
        name = str(queue["metadata"]["name"])
        for worker in targets[1]:
            cluster = clusters.get(worker)
            if cluster is None:
                continue
            condition = find_condition(cluster, "Active")
            active = str(condition.get("status")) if condition is not None else "Unknown"
            active = active if active in _STATUSES else "Unknown"
            for value in _STATUSES:
                samples.append(("multikueue_cluster_status", (name, worker, value), 1.0 if value == active else 0.0))
    return samples


@dataclass(frozen=True, slots=True)
class WorkerView:
    name: str
    connected: bool
    report_observed_at: dt.datetime | None


def worker_samples(workers: Iterable[WorkerView], *, in_flight: int, now: dt.datetime) -> list[Sample]:
    samples: list[Sample] = [("kfed_in_flight_workloads", (), float(in_flight))]
    for worker in workers:
        samples.append(("kfed_worker_connected", (worker.name,), 1.0 if worker.connected else 0.0))
        if worker.report_observed_at is not None:
            age = max(0.0, (now - worker.report_observed_at).total_seconds())
            samples.append(("kfed_capacity_report_age_seconds", (worker.name,), age))
    return samples
