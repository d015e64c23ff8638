import datetime as dt
from typing import Any

from federation.admission.orphans import OWNER_NOT_FOUND_MESSAGE, is_orphaned, orphan_finish
from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.tests.api_builders import admitted_status, workload
from federation.workload_from_job import JOB_UID_LABEL

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": True}


def made_for_a_job(*, owned: bool, **meta: Any) -> dict[str, Any]:
    wl = workload("job-train-1a2b3", status=admitted_status("cq", "default", "1"))
    wl["metadata"]["labels"] = {JOB_UID_LABEL: "u1"}
    if owned:
        wl["metadata"]["ownerReferences"] = [JOB_OWNER]
    wl["metadata"].update(meta)
    return wl


def test_a_workload_its_job_left_behind_is_orphaned_and_only_that_one() -> None:
    assert is_orphaned(made_for_a_job(owned=False))
    assert not is_orphaned(made_for_a_job(owned=True)), "its Job still owns it"
    assert not is_orphaned(workload("by-hand")), "made by hand: never had a Job (the MultiKueue check rejects it)"
    deleting = made_for_a_job(owned=False, deletionTimestamp="2026-12-06T11:59:00Z")
    assert not is_orphaned(deleting), "being deleted: nothing to finish"
    copy = made_for_a_job(owned=False)
    copy["metadata"]["labels"][MULTIKUEUE_ORIGIN_LABEL] = "multikueue"
    assert not is_orphaned(copy), "a manager's copy is its manager's to end"


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
    assert not is_orphaned(orphan), "finished: nothing more to do"
