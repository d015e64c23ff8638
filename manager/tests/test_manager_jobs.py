from manager.manager_jobs import start_manager_job_spec
from manager.tests.builders import make_job

PARTIAL = "kueue.x-k8s.io/job-min-parallelism"


def _workload(admitted: int | None) -> dict[str, object]:
    status = {"admission": {"podSetAssignments": [{"name": "main", "count": admitted}]}} if admitted else {}
    return {"spec": {"podSets": [{"name": "main", "count": 6, "minCount": 2}]}, "status": status}


def test_a_manager_job_starts_with_the_count_its_workload_was_admitted_with() -> None:
    job = make_job("train").parallelism(6).annotation(PARTIAL, "2").suspended(True).obj()
    assert start_manager_job_spec(job, _workload(4)) == {"suspend": False, "parallelism": 4}
    assert start_manager_job_spec(job, _workload(6)) == {"suspend": False}
    plain = make_job("train").parallelism(6).suspended(True).obj()
    assert start_manager_job_spec(plain, _workload(4)) == {"suspend": False}, "only a Job open to partial admission"
