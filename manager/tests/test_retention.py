import datetime as dt
from typing import Any

from federation.conditions import format_time
from manager.decisions.retention import RetentionPolicy, retention_step

T0 = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)
POLICY = RetentionPolicy(after_finished=60, after_deactivated_by_kueue=120)


def wl(*conditions: tuple[str, str], active: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "w"},
        "spec": {"active": active},
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": format_time(T0)}
                for kind, reason in conditions
            ]
        },
    }


def test_a_finished_workload_is_deleted_once_its_retention_is_over() -> None:
    done = wl(("Finished", "Succeeded"))
    assert retention_step(done, now=T0 + dt.timedelta(seconds=20), policy=POLICY).wait == 40
    assert retention_step(done, now=T0 + dt.timedelta(seconds=60), policy=POLICY).delete_workload
    assert retention_step(done, now=T0 + dt.timedelta(days=9), policy=RetentionPolicy()).wait is None


def test_only_workloads_kfed_deactivated_have_their_job_deleted() -> None:
    by_kfed = wl(("Evicted", "DeactivatedDueToRequeuingLimitExceeded"), active=False)
    assert retention_step(by_kfed, now=T0 + dt.timedelta(seconds=100), policy=POLICY).wait == 20
    step = retention_step(by_kfed, now=T0 + dt.timedelta(seconds=121), policy=POLICY)
    assert step.delete_job
    assert not step.delete_workload
    by_user = wl(("Evicted", "Deactivated"), active=False)
    assert retention_step(by_user, now=T0 + dt.timedelta(days=1), policy=POLICY) == retention_step(
        wl(), now=T0, policy=POLICY
    )
    reactivated = wl(("Evicted", "DeactivatedDueToRequeuingLimitExceeded"), active=True)
    assert not retention_step(reactivated, now=T0 + dt.timedelta(days=1), policy=POLICY).delete_job
