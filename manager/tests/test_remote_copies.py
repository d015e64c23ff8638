from manager.decisions.remote_copies import remote_job
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
