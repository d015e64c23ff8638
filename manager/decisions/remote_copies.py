"""The objects the manager creates in the chosen worker: the Workload copy and the Job copy (see protocol).

A stock Kueue worker gets both at once, the Job suspended and owning the Workload (as a Kueue worker's Job owns its
Workload); a kfed-agent worker gets the Workload copy first and, once it admitted it, the Job copy already started
and owned by the Workload copy (``started_remote_job``).

Copies keep the user's labels and annotations, carry the origin and manager-uid labels that make them ours, and
drop everything the manager cluster's apiserver generated (uid, resourceVersion, owner references, the Job's
selector and controller-uid labels, status), so the worker's apiserver accepts them as new objects. The Job copy
also drops ``ttlSecondsAfterFinished``: the worker must keep the finished Job until the manager has mirrored its
final status; the manager deletes the copy itself after that (the manager Job keeps its TTL).

Under partial admission (``kueue.x-k8s.io/job-min-parallelism``) both copies carry the pod count the manager
admitted, not the Job's full count: the Workload copy's ``count`` (its ``minCount`` kept) and the Job copy's
``parallelism`` (and ``completions`` under job-completions-equal-parallelism), so a worker never reserves quota
for, nor runs, more pods than the manager reserved, and a stock Kueue worker finds the two copies equivalent. A
Job admitted at its ``minCount`` is sent as one that cannot shrink: no ``minCount`` on the Workload copy and no
min-parallelism on the Job copy (a Kueue worker refuses a min-parallelism that is not below the pod count).

Neither copy carries the execution time limit (the Workload's ``maximumExecutionTimeSeconds``, the Job's
``kueue.x-k8s.io/max-exec-time-seconds`` label): the manager keeps that clock (``federation.admission.execution_time``),
and a stock Kueue worker finds the two copies equivalent only if both lack it.

The Workload copy carries no preemption gate (Kueue v0.20's orchestrated preemption, ``spec.preemptionGates``). A
Kueue manager gates its copies because it sends one Workload to several workers at once and must stop each of them
from preempting on its behalf until one is chosen. kfed-manager decides preemption globally, before dispatch,
and sends each Workload to exactly one worker, so there is nothing for a gate to coordinate.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from federation.api.labels import (
    JOB_UID_LABEL,
    MAX_EXEC_TIME_LABEL,
    MIN_PARALLELISM_ANNOTATION,
    MULTIKUEUE_ORIGIN_LABEL,
    PREBUILT_WORKLOAD_LABEL,
)
from federation.conditions import format_time
from federation.merge_patch import apply_merge_patch
from federation.pod_injection import (
    INJECTED_ANNOTATION,
    FlavorInjection,
    admitted_count,
    injected_placement,
    pod_count_patch,
    start_patch,
)
from federation.protocol import JOB_GENERATED_LABELS, MANAGER_UID_LABEL, SENT_AT_ANNOTATION
from federation.workload_from_job import clean_template

_META_KEPT = ("name", "namespace", "labels", "annotations")
_JOB_SPEC_DROPPED = ("managedBy", "selector", "manualSelector", "ttlSecondsAfterFinished")
_ANNOTATIONS_DROPPED = ("kubectl.kubernetes.io/last-applied-configuration", SENT_AT_ANNOTATION)


def _copied_meta(meta: Mapping[str, Any], *, extra_labels: Mapping[str, str]) -> dict[str, Any]:
    kept = {k: copy.deepcopy(meta[k]) for k in _META_KEPT if k in meta}
    labels = {
        k: v
        for k, v in (kept.get("labels") or {}).items()
        if k not in JOB_GENERATED_LABELS and k != MAX_EXEC_TIME_LABEL
    }
    labels.update(extra_labels)
    kept["labels"] = labels
    annotations = {k: v for k, v in (kept.get("annotations") or {}).items() if k not in _ANNOTATIONS_DROPPED}
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    return kept


def ownership_labels(*, origin: str, manager_workload_uid: str) -> dict[str, str]:
    return {MULTIKUEUE_ORIGIN_LABEL: origin, MANAGER_UID_LABEL: manager_workload_uid}


def copies_selector(*, origin: str, manager_workload_uids: Iterable[str]) -> str:
    """The label selector that matches this manager's copies of the Workloads with these uids (and nothing else:
    the origin label says whose copy it is, the uid label which Workload it copies), for one deletecollection."""
    uids = sorted(set(manager_workload_uids))
    if not uids:
        raise ValueError("copies_selector needs at least one manager Workload uid")
    return f"{MULTIKUEUE_ORIGIN_LABEL}={origin},{MANAGER_UID_LABEL} in ({','.join(uids)})"


def owned_by(copy_: Mapping[str, Any] | None, owner: Mapping[str, Any] | None) -> bool:
    """Whether ``copy_`` names ``owner`` (by uid) among its owners: the worker's garbage collector deletes it."""
    if copy_ is None or owner is None:
        return False
    uid = (owner.get("metadata") or {}).get("uid")
    return bool(uid) and any(
        ref.get("uid") == uid for ref in (copy_.get("metadata") or {}).get("ownerReferences") or ()
    )


def is_ours(remote: Mapping[str, Any], *, origin: str, manager_workload_uid: str | None = None) -> bool:
    """True when a remote object carries our origin label (and, if given, the same manager Workload uid)."""
    labels = (remote.get("metadata") or {}).get("labels") or {}
    if labels.get(MULTIKUEUE_ORIGIN_LABEL) != origin:
        return False
    return manager_workload_uid is None or labels.get(MANAGER_UID_LABEL) == manager_workload_uid


def made_for(remote: Mapping[str, Any], manager_workload_uid: str) -> bool:
    """True when a remote object carries the manager Workload uid label of ``manager_workload_uid``, with or without
    our origin label: a copy whose origin label someone took off is out of the caches' sight, but still ours."""
    labels = (remote.get("metadata") or {}).get("labels") or {}
    return bool(manager_workload_uid) and labels.get(MANAGER_UID_LABEL) == manager_workload_uid


def remote_workload(
    manager_workload: Mapping[str, Any],
    *,
    origin: str,
    sent_at: dt.datetime,
    job_copy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Workload copy; owned by ``job_copy`` (the Job copy as the worker's apiserver returned it) when given, as
    a Kueue worker owns a Workload by its Job: deleting the Job copy then takes the Workload copy with it (the
    worker's garbage collector deletes it, one delete per Job fewer for the manager). ``sent_at`` (now, by the
    manager's clock) is written as ``SENT_AT_ANNOTATION``: the dispatch timeout counts from it."""
    meta = manager_workload["metadata"]
    labels = ownership_labels(origin=origin, manager_workload_uid=meta["uid"])
    copied = _copied_meta(meta, extra_labels=labels)
    copied.setdefault("annotations", {})[SENT_AT_ANNOTATION] = format_time(sent_at)
    # The manager Job's uid names no Job on the worker: a Kueue worker would finish the copy as orphaned.
    copied["labels"].pop(JOB_UID_LABEL, None)
    if job_copy is not None:
        job_meta = job_copy["metadata"]
        copied["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job_meta["name"],
                "uid": job_meta["uid"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": manager_workload.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
        "kind": "Workload",
        "metadata": copied,
        "spec": _admitted_spec(manager_workload),
    }


def _admitted_spec(manager_workload: Mapping[str, Any]) -> dict[str, Any]:
    """The manager Workload's spec with each pod set's ``count`` cut to what the manager's admission reserved for
    it (partial admission): the worker must not run, nor reserve quota for, more pods than the manager counted.
    ``minCount`` stays, so a worker may still shrink it further (within what the manager reserved)."""
    spec = copy.deepcopy(dict(manager_workload["spec"]))
    spec.pop("maximumExecutionTimeSeconds", None)  # the manager's clock (module docstring)
    admission = (manager_workload.get("status") or {}).get("admission") or {}
    reserved = {
        str(psa.get("name")): int(psa["count"])
        for psa in admission.get("podSetAssignments") or ()
        if psa.get("count") is not None
    }
    for pod_set in spec.get("podSets") or ():
        count = reserved.get(str(pod_set.get("name")))
        if count is not None and count < int(pod_set.get("count", 1)):
            pod_set["count"] = count
            if pod_set.get("minCount") is not None and int(pod_set["minCount"]) >= count:
                pod_set.pop("minCount")  # it cannot shrink further: the copy is not open to partial admission
    return spec


def remote_job(manager_job: Mapping[str, Any], *, manager_workload: Mapping[str, Any], origin: str) -> dict[str, Any]:
    wl_meta = manager_workload["metadata"]
    labels = ownership_labels(origin=origin, manager_workload_uid=wl_meta["uid"])
    labels[PREBUILT_WORKLOAD_LABEL] = wl_meta["name"]
    spec = copy.deepcopy(dict(manager_job["spec"]))
    for field in _JOB_SPEC_DROPPED:
        spec.pop(field, None)
    spec["suspend"] = True
    spec["template"] = clean_template(spec.get("template", {}))
    meta = _copied_meta(manager_job["metadata"], extra_labels=labels)
    # the pod count the manager admitted (partial admission), so that the copy matches the Workload copy
    admitted = admitted_count(manager_workload)
    annotations = meta.get("annotations") or {}
    spec.update(pod_count_patch(spec, annotations, admitted))
    min_text = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if admitted is not None and min_text is not None and min_text.isdigit() and int(min_text) >= admitted:
        # shrunk to its minimum, the copy is not open to partial admission any more (as its Workload copy has no
        # minCount), and a Kueue worker refuses a Job whose min-parallelism is not below its pod count
        del annotations[MIN_PARALLELISM_ANNOTATION]
        if not annotations:
            meta.pop("annotations")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def started_remote_job(
    manager_job: Mapping[str, Any],
    *,
    manager_workload: Mapping[str, Any],
    origin: str,
    admitted_copy: Mapping[str, Any],
    flavors: Mapping[str, FlavorInjection],
) -> dict[str, Any]:
    """The Job copy for a kfed-agent worker that already admitted ``admitted_copy`` (the Workload copy as the
    worker's apiserver shows it): created started, its pod template already carrying what the admission adds
    (``federation.pod_injection``, the same patch the agent would apply), so the worker writes no start patch and
    its Job controller no suspend and resume. Owned by the Workload copy: deleting that copy takes the Job (and its
    pods) with it. Raises ``KeyError`` naming an assigned flavor ``flavors`` does not list."""
    job = remote_job(manager_job, manager_workload=manager_workload, origin=origin)
    start = start_patch(
        job["spec"], admitted_copy, flavors=flavors, annotations=job["metadata"].get("annotations") or {}
    )
    injected = injected_placement(job["spec"], start)
    job["spec"] = apply_merge_patch(job["spec"], start.patch["spec"])
    # what the flavors added, for the agent's OutOfSync check (a label since removed from a flavor still counts)
    job["metadata"].setdefault("annotations", {})[INJECTED_ANNOTATION] = json.dumps(injected, sort_keys=True)
    copy_meta = admitted_copy["metadata"]
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": str(admitted_copy.get("apiVersion") or "kueue.x-k8s.io/v1beta2"),
            "kind": "Workload",
            "name": copy_meta["name"],
            "uid": copy_meta["uid"],
        }
    ]
    return job
