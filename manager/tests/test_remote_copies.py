from manager.decisions.remote_copies import owned_by, remote_job, remote_workload
from manager.tests.builders import make_job

MANAGER_WORKLOAD = {"metadata": {"name": "job-train-abc12", "namespace": "team-a", "uid": "wl-uid"}}


def test_the_job_copy_drops_ttl_so_the_worker_keeps_it_until_its_final_status_is_mirrored() -> None:
    job = make_job("train").obj()
    job["spec"]["ttlSecondsAfterFinished"] = 0
    copy = remote_job(job, manager_workload=MANAGER_WORKLOAD, origin="multikueue")
    assert "ttlSecondsAfterFinished" not in copy["spec"]
    assert job["spec"]["ttlSecondsAfterFinished"] == 0, "the manager Job itself is left as it is"


def test_the_job_copy_is_suspended_unmanaged_and_labelled_ours() -> None:
    copy = remote_job(make_job("train").obj(), manager_workload=MANAGER_WORKLOAD, origin="multikueue")
    assert copy["spec"]["suspend"] is True
    assert "managedBy" not in copy["spec"]
    assert "selector" not in copy["spec"]
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    assert copy["metadata"]["labels"]["kfed.io/manager-workload-uid"] == "wl-uid"
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == "job-train-abc12"


def test_the_workload_copy_is_owned_by_the_job_copy_so_deleting_the_job_takes_it_along() -> None:
    wl = {**MANAGER_WORKLOAD, "spec": {"queueName": "lq", "podSets": []}}
    job_copy = {"kind": "Job", "metadata": {"name": "train", "namespace": "team-a", "uid": "worker-job-uid"}}
    copy = remote_workload(wl, origin="multikueue", job_copy=job_copy)
    assert copy["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "worker-job-uid", "controller": True}
    ]
    assert owned_by(copy, job_copy)
    other_job = {"metadata": {"name": "train", "uid": "a-later-job"}}
    assert not owned_by(copy, other_job), "a same-named Job created since does not own it"
    assert not owned_by(remote_workload(wl, origin="multikueue"), job_copy)
    assert not owned_by(copy, None)
