"""Which copies in a worker kfed-manager's garbage collection looks at: all of them in a sweep, only one deleted
Workload's after its deletion."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from federation.kube.resources import JOBS, WORKLOADS
from federation.kube.store import Store
from manager.copy_cleanup import garbage_candidates


def _obj(kind: str, namespace: str, name: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"namespace": namespace, "name": name}}


def _conn() -> Any:
    jobs, workloads = Store(), Store()
    for namespace in ("a", "b"):
        for i in range(3):
            jobs.upsert(_obj("Job", namespace, f"job-{i}"))
            workloads.upsert(_obj("Workload", namespace, f"wl-{i}"))
    return SimpleNamespace(jobs=SimpleNamespace(store=jobs), workloads=SimpleNamespace(store=workloads))


def _names(found: list[tuple[Any, dict[str, Any]]]) -> list[tuple[str, str]]:
    kinds = {id(JOBS): "Job", id(WORKLOADS): "Workload"}
    return sorted((kinds[id(r)], f"{o['metadata']['namespace']}/{o['metadata']['name']}") for r, o in found)


def test_a_sweep_looks_at_every_copy() -> None:
    assert len(garbage_candidates(_conn(), only_key=None, job_name=None)) == 12


def test_a_deleted_workload_with_a_known_job_name_looks_at_its_two_copies_only() -> None:
    found = garbage_candidates(_conn(), only_key="a/wl-1", job_name="job-1")
    assert _names(found) == [("Job", "a/job-1"), ("Workload", "a/wl-1")]


def test_without_the_job_name_the_jobs_of_its_namespace_are_looked_at() -> None:
    found = garbage_candidates(_conn(), only_key="b/wl-2", job_name=None)
    assert _names(found) == [("Job", "b/job-0"), ("Job", "b/job-1"), ("Job", "b/job-2"), ("Workload", "b/wl-2")]


def test_copies_already_gone_are_not_listed() -> None:
    assert garbage_candidates(_conn(), only_key="a/wl-9", job_name="job-9") == []
