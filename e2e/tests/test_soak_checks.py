import json
from typing import Any

from e2e.bench.soak_checks import (
    Freeze,
    PodLife,
    QuotaSamples,
    clip_to_partitions,
    deletes,
    overlaps,
    pod_lives,
    recovered_jobs,
)


def audit(verb: str, pod: str, at: int, *, agent: str = "kwok", sub: str | None = "status", code: int = 200) -> str:
    ref: dict[str, Any] = {"resource": "pods", "namespace": "ns", "name": pod}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": verb,
            "objectRef": ref,
            "userAgent": f"{agent}/v1",
            "responseStatus": {"code": code},
            "stageTimestamp": f"2026-11-23T10:00:{at:02d}Z",
        }
    )


def test_a_pod_lives_from_its_first_kwok_status_write_to_the_last_write_touching_it() -> None:
    lines = [
        audit("create", "a-x1", 1, agent="kube-controller-manager", sub=None),  # created, not running yet
        audit("patch", "a-x1", 3),
        audit("patch", "a-x1", 9),
        audit("delete", "a-x1", 12, agent="kube-controller-manager", sub=None),
        audit("patch", "b-y2", 5, code=409),  # refused writes do not count
    ]
    [life] = pod_lives(lines, worker="w1")
    assert (life.job, life.start, life.end) == ("ns/a", life.start, life.start + 9)


def test_pods_of_one_job_alive_at_once_on_two_workers_are_reported_and_sequential_ones_are_not() -> None:
    lives = [
        PodLife("w1", "ns/a", "ns/a-1", 0, 10),
        PodLife("w2", "ns/a", "ns/a-2", 10, 20),  # starts as the first ends: fine
        PodLife("w1", "ns/a", "ns/a-3", 15, 16),  # same worker, parallel pods: fine... but overlaps a-2 on w2
        PodLife("w1", "ns/b", "ns/b-1", 0, 10),
        PodLife("w1", "ns/b", "ns/b-2", 0, 10),
    ]
    found = overlaps(lives)
    assert [(a.pod, b.pod) for a, b in found] == [("ns/a-2", "ns/a-3")]


def test_a_partition_cuts_pod_lives_and_reports_how_long_stale_pods_lived_after_the_return() -> None:
    lives = [PodLife("w1", "ns/a", "ns/a-1", 0, 50), PodLife("w2", "ns/a", "ns/a-2", 30, 40)]
    partition = Freeze("w1", start=5, end=45, past_timeout=True)
    clipped, stale = clip_to_partitions(lives, [partition])
    assert overlaps(lives)
    assert overlaps(clipped) == []
    assert stale == [5]
    blip = Freeze("w1", start=5, end=10, past_timeout=False)
    assert clip_to_partitions(lives, [blip])[0] == lives


def test_quota_samples_flag_reservations_beyond_nominal_plus_borrowing() -> None:
    queue = {
        "spec": {
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "2"}]}]}
            ]
        }
    }

    def wl(cpu: str, *conditions: str) -> dict[str, Any]:
        return {
            "status": {
                "conditions": [{"type": c, "status": "True"} for c in conditions],
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [{"flavors": {"cpu": "f"}, "resourceUsage": {"cpu": cpu}}],
                },
            }
        }

    samples = QuotaSamples()
    samples.add(
        [wl("4", "QuotaReserved"), wl("2", "QuotaReserved"), wl("8", "QuotaReserved", "Finished")], {"cq": queue}
    )
    assert samples.violations == []
    assert samples.peak_share == 1.0
    samples.add([wl("4", "QuotaReserved"), wl("3", "QuotaReserved"), wl("8")], {"cq": queue})
    assert len(samples.violations) == 1
    assert samples.samples == 2


def test_recovery_counts_only_unfinished_jobs_alive_on_the_worker_at_the_fault() -> None:
    lives = [
        PodLife("w1", "ns/a", "ns/a-1", 0, 30),
        PodLife("w2", "ns/a", "ns/a-2", 25, 40),
        PodLife("w1", "ns/b", "ns/b-1", 0, 30),  # finished before the fault
        PodLife("w2", "ns/c", "ns/c-1", 0, 30),  # another worker
    ]
    assert recovered_jobs(lives, worker="w1", at=10, finished={"ns/b": 8}) == {"ns/a": 15}


def test_recovery_can_be_limited_to_named_jobs_and_to_pods_on_other_workers() -> None:
    lives = [
        PodLife("w1", "ns/a", "ns/a-1", 0, 30),
        PodLife("w1", "ns/a", "ns/a-2", 12, 40),  # a late pod on the same worker
        PodLife("w1", "ns/d", "ns/d-1", 0, 30),
        PodLife("w1", "ns/d", "ns/d-2", 14, 40),
    ]
    assert sorted(recovered_jobs(lives, worker="w1", at=10, finished={}).values()) == [2, 4]
    assert recovered_jobs(lives, worker="w1", at=10, finished={}, jobs={"ns/d"}) == {"ns/d": 4}
    assert recovered_jobs(lives, worker="w1", at=10, finished={}, elsewhere=True) == {}


def test_deletes_are_the_accepted_deletes_of_one_client_and_resource_in_order() -> None:
    def delete(resource: str, name: str, at: int, *, agent: str = "kfed-manager", code: int = 200) -> str:
        return json.dumps(
            {
                "stage": "ResponseComplete",
                "verb": "delete",
                "objectRef": {"resource": resource, "namespace": "ns", "name": name},
                "userAgent": f"{agent}/0.1.0 (linux)",
                "responseStatus": {"code": code},
                "stageTimestamp": f"2026-11-23T10:00:{at:02d}Z",
            }
        )

    lines = [
        delete("workloads", "job-a-1", 9),
        delete("workloads", "job-a-1", 4),
        delete("workloads", "job-b-2", 5, code=404),  # gone already: not a delete kfed made
        delete("workloads", "job-c-3", 6, agent="kube-controller-manager"),
        delete("jobs", "a", 7),
    ]
    found = deletes(lines, resources={"workloads"}, client="kfed-manager")
    assert list(found) == ["ns/job-a-1"]
    assert found["ns/job-a-1"][1] - found["ns/job-a-1"][0] == 5
