from __future__ import annotations

import datetime as dt
from typing import Any

from federation.conditions import find_condition
from federation.protocol import MANAGER_UID_LABEL
from federation.tests.api_builders import admitted_status, workload
from worker_agent.decisions.job_copies import REASON_JOB_COPY_MISSING, job_copy_timeouts
from worker_agent.decisions.preemption import evicted_holding_quota, release_status

ADMITTED_AT = dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.UTC)  # admitted_status's transition time
Obj = dict[str, Any]


def copy(name: str, *, manager: bool = True, **status: Any) -> Obj:
    wl = workload(name, status=status or admitted_status("cq", "rf", "1"))
    if manager:
        wl["metadata"]["labels"] = {MANAGER_UID_LABEL: f"uid-{name}", "kueue.x-k8s.io/multikueue-origin": "m"}
    return wl


def after(seconds: float) -> dt.datetime:
    return ADMITTED_AT + dt.timedelta(seconds=seconds)


def test_an_admitted_manager_copy_without_a_job_is_evicted_once_the_timeout_has_passed() -> None:
    wl = copy("w")
    waiting = job_copy_timeouts([wl], named_by_jobs=set(), now=after(59), timeout=60)
    assert waiting.evictions == ()
    assert waiting.next_due == ADMITTED_AT.timestamp() + 60

    due = job_copy_timeouts([wl], named_by_jobs=set(), now=after(60), timeout=60)
    assert due.next_due is None
    (eviction,) = due.evictions
    assert eviction.key == "ns/w"
    message = "no Job copy was created for the admitted workload within 60s"
    assert eviction.message == message
    evicted = find_condition({"status": eviction.status}, "Evicted") or {}
    assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", REASON_JOB_COPY_MISSING, message)
    # the eviction's usual end follows: no Job to stop, the quota is released; the copy was deactivated first, so
    # it is not queued again (Kueue's Requeued=False, with the eviction's reason and message)
    written = {**wl, "spec": {**wl["spec"], "active": False}, "status": {**wl["status"], **eviction.status}}
    assert evicted_holding_quota(written)
    released = release_status(written, now=after(61))
    reserved = find_condition({"status": released}, "QuotaReserved") or {}
    assert reserved["status"] == "False"
    assert released["admission"] is None
    requeued = find_condition({"status": released}, "Requeued") or {}
    assert (requeued.get("status"), requeued.get("reason"), requeued.get("message")) == (
        "False",
        REASON_JOB_COPY_MISSING,
        message,
    )


def test_a_copy_a_job_names_is_left_alone() -> None:
    result = job_copy_timeouts([copy("w")], named_by_jobs={"ns/w"}, now=after(3600), timeout=60)
    assert (result.evictions, result.next_due) == ((), None)
    other_namespace = job_copy_timeouts([copy("w")], named_by_jobs={"other/w"}, now=after(3600), timeout=60)
    assert [e.key for e in other_namespace.evictions] == ["ns/w"]


def test_stock_kueue_copies_finished_evicted_and_unadmitted_copies_are_left_alone() -> None:
    stock = copy("stock", manager=False)
    finished = copy("done", **admitted_status("cq", "rf", "1", finished=True))
    evicted = copy("evicted")
    evicted["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "", "lastTransitionTime": "x"}
    )
    pending = copy("pending", conditions=[{"type": "QuotaReserved", "status": "False", "reason": "Pending"}])
    reserved_only = copy("checks")  # quota reserved, admission checks not Ready yet: the manager waits for Admitted
    reserved_only["status"]["conditions"][1]["status"] = "False"
    result = job_copy_timeouts(
        [stock, finished, evicted, pending, reserved_only], named_by_jobs=set(), now=after(3600), timeout=60
    )
    assert (result.evictions, result.next_due) == ((), None)


def test_the_timeout_counts_from_the_admission_and_the_earliest_deadline_is_next() -> None:
    early, late = copy("early"), copy("late")
    late["status"]["conditions"][1]["lastTransitionTime"] = "2026-01-01T00:00:31Z"  # checks Ready 30 s later
    result = job_copy_timeouts([late, early], named_by_jobs=set(), now=after(10), timeout=60)
    assert result.next_due == ADMITTED_AT.timestamp() + 60
    result = job_copy_timeouts([late, early], named_by_jobs=set(), now=after(61), timeout=60)
    assert [e.key for e in result.evictions] == ["ns/early"]
    assert result.next_due == ADMITTED_AT.timestamp() + 90
