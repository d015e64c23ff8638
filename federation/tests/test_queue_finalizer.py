"""Kueue's resource-in-use finalizer on ClusterQueues (and the Terminating status while it is held), ResourceFlavors
and AdmissionChecks."""

import datetime as dt
from typing import Any

from federation.admission.api_drain import drain
from federation.admission.api_queue_status import (
    RESOURCE_IN_USE_FINALIZER,
    cluster_queue_references,
    finalizer_action,
    finalizer_changes,
    in_use_changes,
    queue_status_patches,
)
from federation.admission.check_problems import mark_inactive
from federation.admission.decisions import Wait
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, state, workload

NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
DELETED = "2026-11-22T00:00:00Z"


def queue(name: str = "cq", *, finalizers: list[str] | None = None, deleted: bool = False) -> dict[str, Any]:
    raw = cluster_queue(name, {"default": {"cpu": "4"}})
    if finalizers is not None:
        raw["metadata"]["finalizers"] = finalizers
    if deleted:
        raw["metadata"]["deletionTimestamp"] = DELETED
    return raw


def test_the_finalizer_is_added_kept_while_in_use_and_removed_when_deleted_and_empty() -> None:
    assert finalizer_action(queue(), holding=0) == "add"
    assert finalizer_action(queue(finalizers=[RESOURCE_IN_USE_FINALIZER]), holding=3) == "keep"
    in_use = queue(finalizers=[RESOURCE_IN_USE_FINALIZER], deleted=True)
    assert finalizer_action(in_use, holding=1) == "keep"
    assert finalizer_action(in_use, holding=0) == "remove"
    assert finalizer_action(queue(deleted=True), holding=1) is None, "never re-added to a queue being deleted"


def _quota(*queues: dict[str, Any], workloads: list[dict[str, Any]]) -> Any:
    return state(
        flavors=[flavor("default")],
        queues=list(queues),
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=workloads,
    )


def test_changes_name_only_the_queues_whose_finalizers_change_and_keep_other_finalizers() -> None:
    fresh = queue("fresh", finalizers=["example.com/other"])
    held = queue("cq", finalizers=[RESOURCE_IN_USE_FINALIZER, "example.com/other"], deleted=True)
    running = workload("running", status=admitted_status("cq", "default", "1"))
    quota = _quota(fresh, held, workloads=[running])
    raws = {"fresh": fresh, "cq": held}
    assert finalizer_changes(quota, raws) == {"fresh": ["example.com/other", RESOURCE_IN_USE_FINALIZER]}

    done = workload("running", status=admitted_status("cq", "default", "1", finished=True))
    assert finalizer_changes(_quota(fresh, held, workloads=[done]), raws) == {
        "fresh": ["example.com/other", RESOURCE_IN_USE_FINALIZER],
        "cq": ["example.com/other"],
    }


def test_a_queue_being_deleted_admits_nothing_and_says_it_is_terminating() -> None:
    held = queue("cq", finalizers=[RESOURCE_IN_USE_FINALIZER], deleted=True)
    running = workload("running", status=admitted_status("cq", "default", "1"))
    quota = _quota(held, workloads=[running, workload("waiting")])
    status = queue_status_patches(quota, {"cq": held}, pending={"cq": 1}, now=NOW)["cq"]
    active = status["conditions"][0]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "False", "Terminating")
    assert active["message"] == "Can't admit new workloads; clusterQueue is terminating"
    assert status["reservingWorkloads"] == 1
    decisions = drain(quota, now_seconds=NOW.timestamp())
    assert len(decisions) == 1
    assert isinstance(decisions[0], Wait)
    assert "terminating" in decisions[0].message


def test_a_queue_kept_from_admitting_by_its_admission_checks_is_inactive_with_the_checks_reason() -> None:
    quota = _quota(queue(), workloads=[])
    problems = {"cq": [("AdmissionCheckNotFound", "references missing AdmissionCheck(s): mk")]}
    mark_inactive(quota, problems)
    patch = queue_status_patches(quota, {"cq": queue()}, pending={}, now=NOW)["cq"]
    active = next(c for c in patch["conditions"] if c["type"] == "Active")
    assert (active["status"], active["reason"]) == ("False", "AdmissionCheckNotFound")
    assert active["message"] == "Can't admit new workloads: references missing AdmissionCheck(s): mk."
    # and it admits nothing: its Workloads wait, saying why
    waiting = _quota(queue(), workloads=[workload("waiting")])
    mark_inactive(waiting, problems)
    decisions = drain(waiting, now_seconds=NOW.timestamp())
    assert len(decisions) == 1
    assert isinstance(decisions[0], Wait)
    assert decisions[0].message == "ClusterQueue cq is inactive: references missing AdmissionCheck(s): mk"
    # several causes, as Kueue words them: the first one's reason, every message
    problems["cq"].append(("MultipleMultiKueueAdmissionChecks", "Cannot use multiple ..., found: a,b"))
    held = queue()
    held["spec"]["stopPolicy"] = "Hold"
    stopped_quota = _quota(held, workloads=[])
    mark_inactive(stopped_quota, problems)
    stopped = queue_status_patches(stopped_quota, {"cq": held}, pending={}, now=NOW)["cq"]
    active = next(c for c in stopped["conditions"] if c["type"] == "Active")
    assert active["reason"] == "Stopped"
    assert active["message"] == (
        "Can't admit new workloads: is stopped, references missing AdmissionCheck(s): mk, "
        "Cannot use multiple ..., found: a,b."
    )
    ready = queue_status_patches(_quota(queue(), workloads=[]), {"cq": queue()}, pending={}, now=NOW)["cq"]
    assert next(c for c in ready["conditions"] if c["type"] == "Active")["reason"] == "Ready"


def test_a_stopped_queue_naming_a_missing_flavor_says_both_in_kueue_order() -> None:
    held = cluster_queue("cq", {"default": {"cpu": "4"}, "gone": {"cpu": "4"}})
    held["spec"]["stopPolicy"] = "Hold"
    quota = _quota(held, workloads=[])
    mark_inactive(quota, {"cq": [("AdmissionCheckNotFound", "references missing AdmissionCheck(s): mk")]})
    active = next(c for c in queue_status_patches(quota, {"cq": held}, pending={}, now=NOW)["cq"]["conditions"])
    assert (active["status"], active["reason"]) == ("False", "Stopped")
    assert active["message"] == (
        "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gone, "
        "references missing AdmissionCheck(s): mk."
    )
    node = quota.snapshot.cluster_queues["cq"]
    assert node.inactive_reason == (
        "ClusterQueue is stopped, references missing ResourceFlavor(s): gone, references missing AdmissionCheck(s): mk"
    )
    assert not node.terminating


def test_flavors_and_checks_carry_the_finalizer_and_a_deleted_one_keeps_it_while_a_queue_names_it() -> None:
    named = cluster_queue(
        "cq",
        {"rf-a": {"cpu": 1}, "rf-b": {"cpu": 1}},
        admissionChecksStrategy={"admissionChecks": [{"name": "check"}]},
    )
    flavors, checks = cluster_queue_references([named, cluster_queue("other", {"rf-c": {"cpu": 1}})])
    assert (flavors, checks) == ({"rf-a", "rf-b", "rf-c"}, {"check"})

    def obj(name: str, *, finalizers: tuple[str, ...] = (), deleted: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "finalizers": list(finalizers)}
        if deleted:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": meta}

    current = {
        "new": obj("new"),
        "kept": obj("kept", finalizers=(RESOURCE_IN_USE_FINALIZER,)),
        "deleted-named": obj("deleted-named", finalizers=("other.io/x", RESOURCE_IN_USE_FINALIZER), deleted=True),
        "deleted-unnamed": obj("deleted-unnamed", finalizers=("other.io/x", RESOURCE_IN_USE_FINALIZER), deleted=True),
        "deleted-before-added": obj("deleted-before-added", deleted=True),
    }
    assert in_use_changes(current, {"kept", "deleted-named"}) == {
        "new": [RESOURCE_IN_USE_FINALIZER],
        "deleted-unnamed": ["other.io/x"],
    }
