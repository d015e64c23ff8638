from __future__ import annotations

import datetime as dt
import json
from typing import Any

from federation.conditions import find_condition
from federation.pod_injection import INJECTED_ANNOTATION, FlavorInjection
from federation.protocol import MANAGER_UID_LABEL
from federation.tests.api_builders import admitted_status, workload
from worker_agent.decisions.job_copies import (
    OUT_OF_SYNC_MESSAGE,
    REASON_JOB_COPY_MISSING,
    REASON_OUT_OF_SYNC,
    count_out_of_sync,
    job_copy_timeouts,
    out_of_sync,
    placement_mismatch,
    pod_count_mismatch,
    running_out_of_sync,
    stock_copy_out_of_sync,
)
from worker_agent.decisions.preemption import evicted_holding_quota, release_status

ADMITTED_AT = dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.UTC)  # admitted_status's transition time
Obj = dict[str, Any]


def copy(name: str, *, manager: bool = True, pod_spec: Obj | None = None, **status: Any) -> Obj:
    wl = workload(name, status=status or admitted_status("cq", "rf", "1"), **(pod_spec or {}))
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
    counted = {"reason": REASON_JOB_COPY_MISSING, "underlyingCause": "", "count": 1}
    assert eviction.status["schedulingStats"] == {"evictions": [counted]}
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


FLAVORS = {
    "rf": FlavorInjection({"pool": "b", "zone": "z1"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},))
}


def started_job(*, node_selector: dict[str, str], tolerations: list[Obj], suspend: bool = False) -> Obj:
    pod_spec = {"nodeSelector": node_selector, "tolerations": tolerations, "containers": [{"name": "c"}]}
    return {"metadata": {"uid": "j1"}, "spec": {"suspend": suspend, "template": {"spec": pod_spec}}}


def test_a_started_job_copy_with_stale_flavor_placement_evicts_its_copy_out_of_sync() -> None:
    wl = copy("w", pod_spec={"nodeSelector": {"user": "x"}})
    # created from a report that still listed pool=a and no toleration
    stale = started_job(node_selector={"pool": "a", "zone": "z1", "user": "x"}, tolerations=[])
    eviction = out_of_sync(stale, wl, flavors=FLAVORS, now=after(2))
    assert eviction is not None
    assert (eviction.key, eviction.reason) == ("ns/w", REASON_OUT_OF_SYNC)
    assert "nodeSelector pool=b (it has pool=a)" in eviction.message
    assert "toleration" in eviction.message
    assert "gpu" in eviction.message
    assert "zone" not in eviction.message
    assert "user" not in eviction.message
    evicted = find_condition({"status": eviction.status}, "Evicted") or {}
    assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", REASON_OUT_OF_SYNC, eviction.message)
    # a label the flavor added since is missing too
    missing = started_job(node_selector={"zone": "z1"}, tolerations=[dict(FLAVORS["rf"].tolerations[0])])
    found = placement_mismatch(missing, copy("w"), flavors=FLAVORS)
    assert found is not None
    assert found.endswith("lacks nodeSelector pool=b")


def test_a_job_copy_that_carries_its_flavors_placement_or_is_not_ours_to_check_is_left_alone() -> None:
    wl = copy("w", pod_spec={"nodeSelector": {"user": "x"}})
    toleration = dict(FLAVORS["rf"].tolerations[0])
    good = started_job(node_selector={"pool": "b", "zone": "z1", "user": "x"}, tolerations=[toleration])
    assert placement_mismatch(good, wl, flavors=FLAVORS) is None
    assert out_of_sync(good, wl, flavors=FLAVORS, now=after(2)) is None
    stale = started_job(node_selector={"pool": "a"}, tolerations=[])
    suspended = started_job(node_selector={"pool": "a"}, tolerations=[], suspend=True)  # the agent starts it itself
    finished_job = {**stale, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    evicted = copy("w")
    evicted["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    pending = copy("w", conditions=[{"type": "QuotaReserved", "status": "False", "reason": "Pending"}])
    for job, workload_ in (
        (suspended, wl),
        (finished_job, wl),
        (stale, copy("w", manager=False)),  # a stock Kueue manager's copy: the agent started its Job
        (stale, evicted),
        (stale, pending),
    ):
        assert out_of_sync(job, workload_, flavors=FLAVORS, now=after(2)) is None


def built_with(job: Obj, *, node_selector: dict[str, str], tolerations: list[Obj]) -> Obj:
    """``job`` as kfed-manager creates it: the annotation says what its start patch added."""
    injected = {"nodeSelector": node_selector, "tolerations": tolerations}
    job["metadata"]["annotations"] = {INJECTED_ANNOTATION: json.dumps(injected)}
    return job


def test_a_label_or_a_toleration_removed_from_the_flavor_since_counts_as_out_of_sync() -> None:
    """The copy was built from a report whose flavor still had ``old=1`` and a second toleration: the template carries
    them as the manager added them, the flavor no longer gives them, so it is out of sync."""
    own_toleration = {"key": "mine", "operator": "Exists"}
    wl = copy("w", pod_spec={"nodeSelector": {"user": "x"}, "tolerations": [own_toleration]})
    gpu = dict(FLAVORS["rf"].tolerations[0])
    gone = {"key": "old", "operator": "Exists", "effect": "NoSchedule"}
    label_removed = built_with(
        started_job(
            node_selector={"pool": "b", "zone": "z1", "user": "x", "old": "1"}, tolerations=[own_toleration, gpu]
        ),
        node_selector={"pool": "b", "zone": "z1", "old": "1"},
        tolerations=[gpu],
    )
    found = placement_mismatch(label_removed, wl, flavors=FLAVORS)
    assert found is not None
    assert "carries nodeSelector old=1" in found
    assert "lacks" not in found
    assert "user" not in found
    eviction = out_of_sync(label_removed, wl, flavors=FLAVORS, now=after(2))
    assert eviction is not None
    assert eviction.reason == REASON_OUT_OF_SYNC
    toleration_removed = built_with(
        started_job(node_selector={"pool": "b", "zone": "z1", "user": "x"}, tolerations=[own_toleration, gpu, gone]),
        node_selector={"pool": "b", "zone": "z1"},
        tolerations=[gpu, gone],
    )
    found = placement_mismatch(toleration_removed, wl, flavors=FLAVORS)
    assert found is not None
    assert '"key": "old"' in found
    assert "mine" not in found
    assert "gpu" not in found
    # the Job's own nodeSelector and toleration are not judged, nor anything without the manager's annotation
    good = built_with(
        started_job(node_selector={"pool": "b", "zone": "z1", "user": "x"}, tolerations=[own_toleration, gpu]),
        node_selector={"pool": "b", "zone": "z1"},
        tolerations=[gpu],
    )
    assert placement_mismatch(good, wl, flavors=FLAVORS) is None
    unannotated = started_job(node_selector={"pool": "b", "zone": "z1", "old": "1"}, tolerations=[gpu, gone])
    assert placement_mismatch(unannotated, wl, flavors=FLAVORS) is None


def test_a_nodeselector_or_toleration_the_user_edited_on_the_manager_job_is_not_out_of_sync() -> None:
    """kfed-manager keeps a queued Job's Workload when the user edits the suspended Job's pod template, so the Job
    copy may carry a nodeSelector or toleration the Workload's template lacks, or lack one it has: not OutOfSync
    (else every new dispatch would be evicted again)."""
    wl = copy("w", pod_spec={"nodeSelector": {"user": "x"}})
    gpu = dict(FLAVORS["rf"].tolerations[0])
    mine = {"key": "edited", "operator": "Exists"}
    edited = built_with(
        started_job(node_selector={"pool": "b", "zone": "z1", "team": "y"}, tolerations=[gpu, mine]),
        node_selector={"pool": "b", "zone": "z1"},
        tolerations=[gpu],
    )
    assert placement_mismatch(edited, wl, flavors=FLAVORS) is None


def test_a_job_copy_created_before_the_agents_term_is_not_checked_again() -> None:
    """After an agent restart, a running Job copy whose ResourceFlavor was edited since it started is not stopped
    (Kueue does not stop it either); one created in the term, or just before it began, still is."""
    wl = copy("w")
    stale = started_job(node_selector={"pool": "a"}, tolerations=[])
    term_started = after(600)
    old = {**stale, "metadata": {**stale["metadata"], "creationTimestamp": "2026-01-01T00:00:05Z"}}
    assert out_of_sync(old, wl, flavors=FLAVORS, now=after(601), term_started=term_started) is None
    just_before = {**stale, "metadata": {**stale["metadata"], "creationTimestamp": "2026-01-01T00:09:56Z"}}
    assert out_of_sync(just_before, wl, flavors=FLAVORS, now=after(601), term_started=term_started) is not None
    new = {**stale, "metadata": {**stale["metadata"], "creationTimestamp": "2026-01-01T00:10:03Z"}}
    assert out_of_sync(new, wl, flavors=FLAVORS, now=after(605), term_started=term_started) is not None


def scaled_job(parallelism: int | None, completions: int | None = None, *, suspend: bool = False) -> Obj:
    spec: Obj = {"suspend": suspend, "template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"metadata": {"uid": "j1"}, "spec": spec}


def test_a_started_job_copy_running_more_or_fewer_pods_than_its_copy_holds_is_out_of_sync() -> None:
    two = copy("w")
    two["spec"]["podSets"][0]["count"] = 2
    two["status"]["admission"]["podSetAssignments"][0]["count"] = 2
    eviction = count_out_of_sync(scaled_job(5, 10), two, now=after(2))
    assert eviction is not None
    assert (eviction.key, eviction.reason) == ("ns/w", REASON_OUT_OF_SYNC)
    assert eviction.message == (
        "the Job copy runs 5 pods at once (spec.parallelism 5, spec.completions 10), but its workload holds quota for 2"
    )
    evicted = find_condition({"status": eviction.status}, "Evicted") or {}
    assert (evicted["status"], evicted["reason"]) == ("True", REASON_OUT_OF_SYNC)
    assert pod_count_mismatch(scaled_job(1), two) is not None  # fewer counts too, as in Kueue
    # completions cap the pods at once (Kueue's count for a Job): 5 wanted, 2 left to complete
    assert pod_count_mismatch(scaled_job(5, 2), two) is None
    assert pod_count_mismatch(scaled_job(2), two) is None
    assert pod_count_mismatch(scaled_job(None), copy("w")) is None  # parallelism defaults to 1


def test_the_admitted_count_is_what_the_copy_holds_quota_for() -> None:
    partial = copy("w")
    partial["spec"]["podSets"][0]["count"] = 4
    partial["status"]["admission"]["podSetAssignments"][0]["count"] = 3  # admitted partially
    assert pod_count_mismatch(scaled_job(3), partial) is None
    assert pod_count_mismatch(scaled_job(4), partial) is not None


def test_a_scaled_job_copy_that_is_not_ours_to_check_is_left_alone() -> None:
    scaled = scaled_job(4)
    finished_job = {**scaled, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    evicted = copy("w")
    evicted["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    pending = copy("w", conditions=[{"type": "QuotaReserved", "status": "False", "reason": "Pending"}])
    for job, workload_ in (
        (scaled_job(4, suspend=True), copy("w")),
        (finished_job, copy("w")),
        (scaled, copy("w", manager=False)),  # a stock Kueue manager's copy
        (scaled, evicted),
        (scaled, pending),
    ):
        assert count_out_of_sync(job, workload_, now=after(2)) is None


def test_a_stock_managers_copy_whose_started_job_copy_was_scaled_is_finished_out_of_sync() -> None:
    stock = copy("w", manager=False)
    scaled = scaled_job(3)
    scaled["metadata"]["labels"] = {"kueue.x-k8s.io/prebuilt-workload-name": "w"}
    finish = stock_copy_out_of_sync(scaled, stock, now=after(2))
    assert finish is not None
    assert (finish.reason, finish.message) == ("OutOfSync", OUT_OF_SYNC_MESSAGE)
    finished = find_condition({"status": finish.status}, "Finished") or {}
    assert (finished["status"], finished["reason"], finished["message"]) == ("True", "OutOfSync", OUT_OF_SYNC_MESSAGE)
    assert stock_copy_out_of_sync(scaled, copy("w"), now=after(2)) is None, "kfed-manager's copies are evicted instead"
    same = scaled_job(1)
    same["metadata"]["labels"] = scaled["metadata"]["labels"]
    assert stock_copy_out_of_sync(same, stock, now=after(2)) is None
    # the Job copy of a copy finished so is suspended; one finished otherwise (its Job ended) is not
    stock["status"]["conditions"].append(finished)
    assert running_out_of_sync(scaled, stock)
    assert not running_out_of_sync(scaled_job(3, suspend=True), stock)
    assert not running_out_of_sync(scaled, copy("w", status=admitted_status("cq", "rf", "1", finished=True)))
