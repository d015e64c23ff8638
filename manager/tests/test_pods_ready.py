import datetime as dt
from typing import Any

from federation.admission.pods_ready import (
    WaitForPodsReady,
    deactivation_target,
    pods_ready_step,
    requeue_state_after,
    waiting_for_start,
)
from federation.conditions import format_time

T0 = dt.datetime(2026, 11, 23, 10, 0, tzinfo=dt.UTC)
POLICY = WaitForPodsReady(timeout=60, backoff_limit_count=2, backoff_base_seconds=10, backoff_max_seconds=25)


def cond(kind: str, status: bool, reason: str, at: dt.datetime) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "lastTransitionTime": format_time(at),
    }


def admitted(*extra: dict[str, Any], count: int = 2, requeues: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [cond("QuotaReserved", True, "x", T0), cond("Admitted", True, "x", T0), *extra]
    }
    if requeues is not None:
        status["requeueState"] = {"count": requeues}
    return {"metadata": {"namespace": "ns", "name": "wl"}, "spec": {"podSets": [{"count": count}]}, "status": status}


def job(ready: int = 0, succeeded: int = 0) -> dict[str, Any]:
    return {"status": {"ready": ready, "succeeded": succeeded}}


def test_pods_not_ready_before_the_timeout_only_ask_to_look_again_when_it_ends() -> None:
    step = pods_ready_step(admitted(), remote_job=job(ready=1), now=T0 + dt.timedelta(seconds=20), policy=POLICY)
    assert step.evict_message is None
    assert not step.deactivate
    assert step.recheck_after == 40


def test_past_the_timeout_the_workload_is_evicted_with_kueues_message_and_the_first_backoff() -> None:
    now = T0 + dt.timedelta(seconds=61)
    step = pods_ready_step(admitted(), remote_job=job(ready=1), now=now, policy=POLICY)
    assert step.evict_message == "Exceeded the PodsReady timeout ns/wl"
    assert step.evict_underlying == "WaitForStart"
    assert step.requeue_state == {"count": 1, "requeueAt": format_time(now + dt.timedelta(seconds=10))}


def test_backoff_doubles_and_is_capped() -> None:
    wl = admitted(requeues=1)
    assert requeue_state_after(wl, now=T0, policy=POLICY)["requeueAt"] == format_time(T0 + dt.timedelta(seconds=20))
    wl = admitted(requeues=5)
    assert requeue_state_after(wl, now=T0, policy=POLICY) == {
        "count": 6,
        "requeueAt": format_time(T0 + dt.timedelta(seconds=25)),
    }


def test_one_requeue_past_the_limit_deactivates_instead() -> None:
    step = pods_ready_step(admitted(requeues=2), remote_job=None, now=T0 + dt.timedelta(seconds=61), policy=POLICY)
    assert step.deactivate
    assert step.evict_message is None
    unlimited = WaitForPodsReady(timeout=60)
    step = pods_ready_step(admitted(requeues=50), remote_job=None, now=T0 + dt.timedelta(seconds=61), policy=unlimited)
    assert step.evict_message is not None


def test_ready_pods_are_recorded_once_and_succeeded_pods_count_as_ready() -> None:
    step = pods_ready_step(admitted(), remote_job=job(ready=1, succeeded=1), now=T0, policy=POLICY)
    assert step.condition is not None
    assert (step.condition["status"], step.condition["reason"]) == ("True", "Started")
    again = admitted(step.condition)
    later = pods_ready_step(again, remote_job=job(ready=2), now=T0 + dt.timedelta(hours=1), policy=POLICY)
    assert later.condition is None
    assert later.evict_message is None


def test_losing_readiness_waits_for_recovery_and_only_a_recovery_timeout_evicts() -> None:
    was_ready = admitted(cond("PodsReady", True, "Started", T0))
    step = pods_ready_step(was_ready, remote_job=job(ready=1), now=T0 + dt.timedelta(seconds=5), policy=POLICY)
    assert step.condition is not None
    assert step.condition["reason"] == "WaitForRecovery"
    recovering = admitted(cond("PodsReady", False, "WaitForRecovery", T0))
    hour = T0 + dt.timedelta(hours=1)
    assert pods_ready_step(recovering, remote_job=job(ready=1), now=hour, policy=POLICY).evict_message is None
    strict = WaitForPodsReady(timeout=60, recovery_timeout=30)
    timed_out = pods_ready_step(recovering, remote_job=job(ready=1), now=hour, policy=strict)
    assert timed_out.evict_message is not None
    assert timed_out.evict_underlying == "WaitForRecovery"
    back = pods_ready_step(recovering, remote_job=job(ready=2), now=hour, policy=strict)
    assert back.condition is not None
    assert back.condition["reason"] == "Recovered"


def test_a_finishing_job_whose_last_pods_are_not_counted_yet_stays_ready() -> None:
    """The Job controller first moves a succeeded pod out of ``ready`` into ``uncountedTerminatedPods``, then counts
    it in ``succeeded``: in between the workload must not lose ``PodsReady``."""
    was_ready = admitted(cond("PodsReady", True, "Started", T0))
    now = T0 + dt.timedelta(seconds=5)
    finishing = {"status": {"ready": 1, "succeeded": 0, "uncountedTerminatedPods": {"succeeded": ["uid-2"]}}}
    assert pods_ready_step(was_ready, remote_job=finishing, now=now, policy=POLICY).condition is None
    done = {"status": {"ready": 0, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}}
    assert pods_ready_step(was_ready, remote_job=done, now=now, policy=POLICY).condition is None
    failing = {"status": {"ready": 1, "uncountedTerminatedPods": {"failed": ["uid-2"]}}}
    step = pods_ready_step(was_ready, remote_job=failing, now=now, policy=POLICY)
    assert step.condition is not None
    assert step.condition["reason"] == "WaitForRecovery", "a failed pod is not ready"


def test_nothing_happens_to_workloads_not_admitted_finished_evicted_or_inactive() -> None:
    late = T0 + dt.timedelta(hours=1)
    for wl in (
        {"metadata": {}, "spec": {}, "status": {"conditions": [cond("QuotaReserved", True, "x", T0)]}},
        admitted(cond("Finished", True, "Succeeded", T0)),
        admitted(cond("Evicted", True, "Preempted", T0)),
        {**admitted(), "spec": {"active": False, "podSets": [{"count": 1}]}},
    ):
        step = pods_ready_step(wl, remote_job=None, now=late, policy=POLICY)
        assert step.evict_message is None
        assert not step.deactivate
        assert step.condition is None


def test_block_admission_waits_while_any_workload_holding_quota_is_not_ready() -> None:
    from federation.admission.pods_ready import BLOCK_ADMISSION_MESSAGE, admission_blocked

    ready = admitted(cond("PodsReady", True, "Started", T0))
    starting = admitted(cond("PodsReady", False, "WaitForStart", T0))
    reserved_only = {"status": {"conditions": [cond("QuotaReserved", True, "x", T0)]}}
    assert admission_blocked([ready], admitted_in_pass=0) is None
    assert admission_blocked([], admitted_in_pass=0) is None
    assert admission_blocked([ready, starting], admitted_in_pass=0) == BLOCK_ADMISSION_MESSAGE
    assert admission_blocked([reserved_only], admitted_in_pass=0) == BLOCK_ADMISSION_MESSAGE
    assert admission_blocked([ready], admitted_in_pass=1) == BLOCK_ADMISSION_MESSAGE, "this pass's admission"


def test_block_admission_admits_one_workload_per_pass_across_cluster_queues() -> None:
    """The scheduler's veto (manager.scheduler) over a drain: the first admission goes, every other waits with
    Kueue's message, whatever its ClusterQueue."""
    from federation.admission.api_drain import drain
    from federation.admission.decisions import Admit, Wait
    from federation.admission.pods_ready import BLOCK_ADMISSION_MESSAGE, admission_blocked
    from federation.tests.api_builders import cluster_queue, flavor, local_queue, state, workload

    quota = state(
        flavors=[flavor("default")],
        queues=[cluster_queue(name, {"default": {"cpu": "4"}}) for name in ("a", "b")],
        local_queues=[local_queue("ns", "lq-a", "a"), local_queue("ns", "lq-b", "b")],
        workloads=[workload("first", queue="lq-a"), workload("second", queue="lq-b", created="2026-01-01T00:00:09Z")],
    )
    admitted_keys: list[str] = []

    def veto(admit: Admit) -> str | None:
        blocked = admission_blocked([], admitted_in_pass=len(admitted_keys))
        if blocked is None:
            admitted_keys.append(admit.workload.key)
        return blocked

    decisions = {d.workload.key: d for d in drain(quota, now_seconds=0, veto=veto)}
    assert isinstance(decisions["ns/first"], Admit)
    second = decisions["ns/second"]
    assert isinstance(second, Wait)
    assert second.message == BLOCK_ADMISSION_MESSAGE


def test_every_pods_ready_condition_observes_the_workloads_generation_as_kueue_writes_it() -> None:
    wl = admitted()
    wl["metadata"]["generation"] = 3
    started = pods_ready_step(wl, remote_job=job(ready=2), now=T0, policy=POLICY).condition
    assert started is not None
    assert started["observedGeneration"] == 3
    assert waiting_for_start(wl, now=T0)["observedGeneration"] == 3
    assert deactivation_target(wl, now=T0)["observedGeneration"] == 3
    del wl["metadata"]["generation"]
    assert "observedGeneration" not in waiting_for_start(wl, now=T0)
