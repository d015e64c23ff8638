from __future__ import annotations

from typing import Any

from manager.decisions.dispatch import FlavorRoom, WorkerCapacity
from manager.decisions.quota_automation import (
    MESSAGE_AUTOMATED,
    MESSAGE_NO_CONFIG,
    MESSAGE_NOT_REQUESTED,
    MESSAGE_ONE_FLAVOR,
    Condition,
    QuotaDecision,
    decide_quota,
)

CHECKS: dict[str, dict[str, Any]] = {
    "mk": {
        "metadata": {"name": "mk"},
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"},
        },
    },
    "other": {"metadata": {"name": "other"}, "spec": {"controllerName": "example.com/other"}},
}
LOCAL = {("team-a", "user-queue")}
G = 1024**3 * 1000


def _config(mode: str | None, clusters: tuple[str, ...] = ("w1", "w2")) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusters": list(clusters)}
    if mode is not None:
        spec["quotaManagement"] = mode
    return {"cfg": {"metadata": {"name": "cfg"}, "spec": spec}}


def _cq(
    *,
    checks: tuple[str, ...] = ("mk",),
    flavors: int = 1,
    covered: tuple[str, ...] = ("cpu", "memory"),
    resources: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq", "generation": 3},
        "spec": {
            "admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]},
            "resourceGroups": [
                {
                    "coveredResources": list(covered),
                    "flavors": [
                        {
                            "name": f"f{i}",
                            "resources": resources
                            if resources is not None
                            else [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1Gi"}],
                        }
                        for i in range(flavors)
                    ],
                }
            ],
        },
    }


def _worker(cpu: int, memory: int, *, queue: str = "user-queue", extra: dict[str, int] | None = None) -> WorkerCapacity:
    nominal = {"cpu": cpu * 1000, "memory": memory * G, **(extra or {})}
    return WorkerCapacity(
        local_queues={("team-a", queue): "worker-cq", ("team-b", "x"): "unrelated"},
        cluster_queues={
            "worker-cq": [FlavorRoom(name="default", nominal=nominal, free=nominal)],
            "unrelated": [FlavorRoom(name="default", nominal={"cpu": 1000_000}, free={})],
        },
    )


def test_the_quota_is_the_sum_of_the_connected_workers_cluster_queues() -> None:
    decision = decide_quota(
        _cq(),
        admission_checks=CHECKS,
        configs=_config("Automated"),
        local_queues=LOCAL,
        connected={"w1": _worker(32, 512), "w2": _worker(64, 512), "not-in-config": _worker(1000, 1)},
    )
    assert decision == QuotaDecision(
        Condition(True, "QuotaAutomated", MESSAGE_AUTOMATED),
        resources=[{"name": "cpu", "nominalQuota": "96"}, {"name": "memory", "nominalQuota": "1Ti"}],
    )


def test_the_quota_drops_with_a_worker_gone_or_its_local_queue_deleted_or_shrunk() -> None:
    args: dict[str, Any] = {"admission_checks": CHECKS, "configs": _config("Automated"), "local_queues": LOCAL}
    one = decide_quota(_cq(), connected={"w1": _worker(32, 512)}, **args)
    assert one.resources == [{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "512Gi"}]
    no_queue = decide_quota(_cq(), connected={"w1": _worker(32, 512), "w2": _worker(64, 512, queue="gone")}, **args)
    assert no_queue.resources == one.resources
    shrunk = decide_quota(_cq(), connected={"w1": _worker(8, 512), "w2": _worker(64, 512)}, **args)
    assert shrunk.resources == [{"name": "cpu", "nominalQuota": "72"}, {"name": "memory", "nominalQuota": "1Ti"}]
    none = decide_quota(_cq(), connected={}, **args)
    assert none.resources == [{"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "0"}]


def test_an_unchanged_quota_is_not_written_again() -> None:
    current = [{"name": "cpu", "nominalQuota": "96000m"}, {"name": "memory", "nominalQuota": "1024Gi"}]
    decision = decide_quota(
        _cq(resources=current),
        admission_checks=CHECKS,
        configs=_config("Automated"),
        local_queues=LOCAL,
        connected={"w1": _worker(32, 512), "w2": _worker(64, 512)},
    )
    assert decision == QuotaDecision(Condition(True, "QuotaAutomated", MESSAGE_AUTOMATED), resources=None)


def test_other_limits_of_the_flavor_are_dropped_as_kueue_does() -> None:
    current = [{"name": "cpu", "nominalQuota": "96", "borrowingLimit": "4"}, {"name": "memory", "nominalQuota": "1Ti"}]
    decision = decide_quota(
        _cq(resources=current),
        admission_checks=CHECKS,
        configs=_config("Automated"),
        local_queues=LOCAL,
        connected={"w1": _worker(32, 512), "w2": _worker(64, 512)},
    )
    assert decision.resources == [{"name": "cpu", "nominalQuota": "96"}, {"name": "memory", "nominalQuota": "1Ti"}]


def test_conditions_of_kueue_when_automation_is_off_or_unsupported() -> None:
    def decide(cq: dict[str, Any], configs: dict[str, Any], **workers: WorkerCapacity) -> QuotaDecision:
        return decide_quota(cq, admission_checks=CHECKS, configs=configs, local_queues=LOCAL, connected=workers)

    assert decide(_cq(checks=("other",)), _config("Automated")) == QuotaDecision(None)
    assert decide(_cq(), {}) == QuotaDecision(Condition(False, "UnsupportedConfiguration", MESSAGE_NO_CONFIG))
    for mode in (None, "Manual"):
        assert decide(_cq(), _config(mode)) == QuotaDecision(Condition(False, "NotRequested", MESSAGE_NOT_REQUESTED))
    assert decide(_cq(flavors=2), _config("Automated")) == QuotaDecision(
        Condition(False, "UnsupportedConfiguration", MESSAGE_ONE_FLAVOR)
    )
    missing = decide(_cq(covered=("cpu",)), _config("Automated"), w1=_worker(1, 1, extra={"nvidia.com/gpu": 8000}))
    assert missing == QuotaDecision(
        Condition(
            False,
            "UnsupportedConfiguration",
            "manager-side coveredResources is missing resources configured on workers: [memory nvidia.com/gpu]",
        )
    )
