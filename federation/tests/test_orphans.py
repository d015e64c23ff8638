import datetime as dt
from typing import Any

from federation.admission.orphans import OWNER_NOT_FOUND_MESSAGE, left_behind, orphan_finish, orphaned
from federation.api.labels import JOB_UID_LABEL, MULTIKUEUE_ORIGIN_LABEL
from federation.tests.api_builders import admitted_status, workload

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": True}


def made_for_a_job(*, owned: bool, **meta: Any) -> dict[str, Any]:
    wl = workload("job-train-1a2b3", status=admitted_status("cq", "default", "1"))
    wl["metadata"]["labels"] = {JOB_UID_LABEL: "u1"}
    if owned:
        wl["metadata"]["ownerReferences"] = [JOB_OWNER]
    wl["metadata"].update(meta)
    return wl


def test_a_workload_without_the_owner_its_label_names_is_left_behind_and_only_that_one() -> None:
    assert left_behind(made_for_a_job(owned=False))
    assert not left_behind(made_for_a_job(owned=True)), "its Job still owns it"
    assert not left_behind(workload("by-hand")), "made by hand: never had a Job (the MultiKueue check rejects it)"
    deleting = made_for_a_job(owned=False, deletionTimestamp="2026-12-06T11:59:00Z")
    assert not left_behind(deleting), "being deleted: nothing to finish"
    copy = made_for_a_job(owned=False)
    copy["metadata"]["labels"][MULTIKUEUE_ORIGIN_LABEL] = "multikueue"
    assert not left_behind(copy), "a manager's copy is its manager's to end"


def test_an_orphan_is_finished_once_as_kueue_finishes_it() -> None:
    orphan = made_for_a_job(owned=False, generation=3)
    conditions = orphan_finish(orphan, now=NOW)
    (finished,) = [c for c in conditions if c["type"] == "Finished"]
    assert finished["status"] == "True"
    assert finished["reason"] == "OwnerNotFound"
    assert finished["message"] == OWNER_NOT_FOUND_MESSAGE == "The workload's owner no longer exists"
    assert finished["observedGeneration"] == 3
    assert {c["type"] for c in conditions} >= {"QuotaReserved", "Admitted", "Finished"}, "the rest stay"
    orphan["status"]["conditions"] = conditions
    assert not left_behind(orphan), "finished: nothing more to do"


def job(uid: str, *, namespace: str = "ns", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": namespace, "uid": uid, **meta}}


def test_it_is_an_orphan_only_once_its_job_is_gone_or_going() -> None:
    """Its ownerReference taken off by hand while the Job lives: not an orphan (finished, it would leave the running
    Job without a Workload); the Job being deleted (``--cascade=orphan`` takes the references off first): one."""
    left = made_for_a_job(owned=False)
    assert orphaned(left, jobs=[])
    assert orphaned(left, jobs=[job("u2"), job("u1", namespace="other")]), "another Job, or another namespace's"
    assert not orphaned(left, jobs=[job("u1")]), "its Job lives"
    assert orphaned(left, jobs=[job("u1", deletionTimestamp="2026-12-06T11:59:00Z")]), "its Job is going"
    assert not orphaned(made_for_a_job(owned=True), jobs=[]), "owned: not left behind"
