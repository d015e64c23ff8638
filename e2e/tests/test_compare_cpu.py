"""The comparison's CPU per Job by cluster: every process is charged to the cluster it serves."""

from __future__ import annotations

import pytest

from e2e.bench.compare_bench import cluster_of, cpu_per_job_by_cluster


@pytest.mark.parametrize(
    ("process", "cluster"),
    [
        ("worker-1/kube-apiserver", "worker-1"),
        ("manager/etcd", "manager"),
        ("kfed-manager", "manager"),
        ("kfed-agent-worker-10", "worker-10"),
        ("kueue-manager", "manager"),
        ("kueue-worker-2", "worker-2"),
    ],
)
def test_each_process_is_charged_to_the_cluster_it_serves(process: str, cluster: str) -> None:
    assert cluster_of(process) == cluster


def test_the_manager_is_charged_per_job_submitted_and_a_worker_per_job_it_ran() -> None:
    cpu = {
        "manager/kube-apiserver": 9.0,
        "kfed-manager": 3.0,
        "worker-1/kube-apiserver": 8.0,
        "kfed-agent-worker-1": 1.0,
        "worker-2/kube-apiserver": 2.0,
        "worker-3/kube-apiserver": 0.5,
    }
    by_cluster = cpu_per_job_by_cluster(cpu, jobs=300, ran={"worker-1": 200, "worker-2": 100})
    assert by_cluster == {"manager": 40.0, "worker-1": 45.0, "worker-2": 20.0}
