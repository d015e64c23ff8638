"""Job → Workload: the Workload for a queued batch/v1 Job, as Kueue's Job integration builds it (kfed-manager's for
a Job queued on the manager cluster, kfed-agent's for one queued on its worker cluster itself).

The name is Kueue's (``job-<job name>-<5 hex digits of a SHA-1 over kind, group, name and uid>``, at most 63
characters, so it also fits the ``kueue.x-k8s.io/prebuilt-workload-name`` label), so tools that compute a Job's
Workload name find it; the Workload is owned by the Job, so deleting the
Job deletes it. One pod set, ``main``, of ``parallelism`` pods (fewer if ``completions`` is smaller), with
``minCount`` from ``kueue.x-k8s.io/job-min-parallelism`` for partial admission. The Job's
``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` (Kueue v0.20: 1-8) is copied to the Workload, as Kueue's
Job integration does, so the worker's agent honours it; any other value makes the Job not queueable, saying why.
So does ``kueue.x-k8s.io/max-exec-time-seconds`` (a whole number of seconds above 0; the Workload's
``maximumExecutionTimeSeconds``, see ``federation.admission.execution_time``) and a ``kueue.x-k8s.io/queue-name``
that the Workload API would refuse as its ``queueName`` (not a DNS-1123 subdomain), which Kueue's webhook refuses
on the Job itself.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.api.common import DNS1123_SUBDOMAIN, INT32_MAX
from federation.api.labels import (
    COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_UID_LABEL,
    MAX_EXEC_TIME_LABEL,
    MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD,
    MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION,
)
from federation.pod_injection import completions_follow_parallelism
from federation.protocol import JOB_GENERATED_LABELS

KUEUE_GROUP = "kueue.x-k8s.io"
SCHEDULING_GROUP = "scheduling.k8s.io"
WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
POD_SET_NAME = "main"
_MAX_NAME = 63
_HASH_LEN = 5
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN)
_MAX_SUBDOMAIN = 253


class JobNotQueueable(ValueError):
    """The Job cannot become a Workload; the message says why in words a user can act on. ``reason`` is the Warning
    Event's reason when Kueue has one of its own for the case (else the caller's: ``CreatingWorkloadFailed``…)."""

    reason: str | None = None


class WorkloadPriorityClassNotFound(JobNotQueueable):
    """The Job's ``kueue.x-k8s.io/priority-class`` names no WorkloadPriorityClass: Kueue v0.20's Warning Event
    ``WorkloadPriorityClassNotFound`` on the Job, its message ``WorkloadPriorityClass "NAME" not found``."""

    reason = "WorkloadPriorityClassNotFound"

    def __init__(self, name: str) -> None:
        super().__init__(f"WorkloadPriorityClass {json.dumps(name)} not found")


@functools.lru_cache(maxsize=8192)  # asked on every event of every manager Job
def workload_name_for_job(job_name: str, job_uid: str, *, kind: str = "Job", group: str = "batch") -> str:
    """Kueue's jobframework name: ``<kind>-<name>`` and the first 5 hex digits of the SHA-1 of kind, group, name and
    uid (newline-separated). Names that would pass 63 characters keep a 57-character prefix, as Kueue does with
    ShortWorkloadNames, so the name is also a valid label value (``kueue.x-k8s.io/prebuilt-workload-name``)."""
    digest = hashlib.sha1("\n".join((kind, group, job_name, job_uid)).encode(), usedforsecurity=False).hexdigest()
    prefix = f"{kind.lower()}-{job_name}"[: _MAX_NAME - _HASH_LEN - 1]
    return f"{prefix}-{digest[:_HASH_LEN]}"


@dataclass(frozen=True, slots=True)
class Priority:
    """The resolved priority of a Job: the class it comes from (if any) and its value."""

    class_name: str | None
    value: int
    pod_class: bool = False
    """``class_name`` is the pods' PriorityClass (``scheduling.k8s.io``), not a WorkloadPriorityClass."""


Lookup = Callable[[str], Mapping[str, Any] | None]
"""A cluster-scoped object by name, from a cache (None: no such object)."""


def resolve_priority(
    job: Mapping[str, Any],
    *,
    workload_class: Lookup,
    pod_class: Lookup,
    pod_classes: Iterable[Mapping[str, Any]],
) -> Priority:
    """Kueue's order: the ``kueue.x-k8s.io/priority-class`` label's WorkloadPriorityClass; else the PriorityClass its
    pods name (``priorityClassName``); else the cluster's ``globalDefault`` PriorityClass (the lowest valued, if
    several); else 0. ``JobNotQueueable`` names a class that does not exist."""
    name = priority_class_of(job)
    if name is not None:
        found = workload_class(name)
        if found is None:
            raise WorkloadPriorityClassNotFound(name)
        return Priority(name, int(found.get("value", 0)))
    template = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    pod_class_name = template.get("priorityClassName")
    if pod_class_name:
        found = pod_class(pod_class_name)
        if found is None:
            raise JobNotQueueable(f"PriorityClass {pod_class_name!r} (the pods' priorityClassName) does not exist")
        return Priority(pod_class_name, int(found.get("value", 0)), pod_class=True)
    defaults = [c for c in pod_classes if c.get("globalDefault")]
    if defaults:
        lowest = min(defaults, key=lambda c: int(c.get("value", 0)))
        return Priority(str(lowest["metadata"]["name"]), int(lowest.get("value", 0)), pod_class=True)
    return Priority(None, 0)


def priority_spec(priority: Priority) -> dict[str, Any]:
    """The Workload spec fields that carry ``priority``, as a merge patch (a ``None`` reference removes it)."""
    ref: dict[str, str] | None = None
    if priority.class_name and priority.pod_class:
        ref = {"group": SCHEDULING_GROUP, "kind": "PriorityClass", "name": priority.class_name}
    elif priority.class_name:
        ref = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": priority.class_name}
    return {"priority": priority.value, "priorityClassRef": ref}


def workload_priority_class(ref: Mapping[str, Any] | None) -> str | None:
    """The WorkloadPriorityClass a Workload's ``priorityClassRef`` names (None for a pods' PriorityClass): the value
    of a Job's ``kueue.x-k8s.io/priority-class`` label."""
    if not ref or ref.get("group") == SCHEDULING_GROUP:
        return None
    return str(ref.get("name")) if ref.get("name") else None


def priority_class_changed(workload: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """The Job's ``kueue.x-k8s.io/priority-class`` label names another class than its Workload's reference (as in
    Kueue, a change of the label re-prioritizes the Workload; a change of the class's value does not). A priority
    from the pods' PriorityClass changes only when the Job gets the label (its pod template is fixed)."""
    ref = (workload.get("spec") or {}).get("priorityClassRef") or {}
    label = priority_class_of(job)
    if ref.get("group") == SCHEDULING_GROUP:
        return label is not None
    return ref.get("name") != label


def queue_name_of(job: Mapping[str, Any]) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL)


def checked_queue_name(job: Mapping[str, Any]) -> str:
    """The Job's LocalQueue name; ``JobNotQueueable`` when it has none or one the Workload API refuses."""
    queue = queue_name_of(job)
    if not queue:
        raise JobNotQueueable(f"the Job has no {QUEUE_NAME_LABEL} label")
    if len(queue) > _MAX_SUBDOMAIN or not _DNS1123_SUBDOMAIN.fullmatch(queue):
        raise JobNotQueueable(
            f"{QUEUE_NAME_LABEL}={queue!r} is not a valid LocalQueue name: a lowercase RFC 1123 subdomain "
            "(lower case letters, digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return queue


def maximum_execution_time(job: Mapping[str, Any]) -> int | None:
    """The Job's ``kueue.x-k8s.io/max-exec-time-seconds`` (None without the label); ``JobNotQueueable`` unless it
    is a whole number of seconds above 0 (Kueue's webhook refuses such a Job)."""
    text = ((job.get("metadata") or {}).get("labels") or {}).get(MAX_EXEC_TIME_LABEL)
    if text is None:
        return None
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) <= INT32_MAX:
        raise JobNotQueueable(f"{MAX_EXEC_TIME_LABEL}={text!r} must be a whole number of seconds greater than 0")
    return int(text)


def priority_class_of(job: Mapping[str, Any]) -> str | None:
    return ((job.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL)


def pod_count(job_spec: Mapping[str, Any]) -> int:
    parallelism = job_spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)
    completions = job_spec.get("completions")
    if completions is not None and int(completions) < count:
        count = int(completions)
    return count


def clean_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template without the labels the Job API generates (they name the manager Job's uid)."""
    cleaned = copy.deepcopy(dict(template))
    labels = (cleaned.get("metadata") or {}).get("labels")
    if labels:
        for key in JOB_GENERATED_LABELS:
            labels.pop(key, None)
    return cleaned


def _check_completions_follow(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
    """Kueue's rule for job-completions-equal-parallelism: a boolean, and when true only on an Indexed Job whose
    ``completions`` equals its ``parallelism`` (partial admission then changes both together)."""
    try:
        follow = completions_follow_parallelism(annotations)
    except ValueError as err:
        raise JobNotQueueable(str(err)) from None
    if not follow:
        return
    if spec.get("completionMode", "NonIndexed") != "Indexed":
        raise JobNotQueueable(f"{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} is only allowed on an Indexed Job")
    if (spec.get("parallelism") or 1) != (spec.get("completions") or 1):
        raise JobNotQueueable(f"{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}: completions must equal parallelism")


def pod_sets_for_job(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Workload's ``podSets`` for the Job as it is now; ``JobNotQueueable`` for a bad min-parallelism."""
    spec = job.get("spec") or {}
    count = pod_count(spec)
    pod_set: dict[str, Any] = {
        "name": POD_SET_NAME,
        "count": count,
        "template": clean_template(spec.get("template", {})),
    }
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    _check_completions_follow(spec, annotations)
    min_text = annotations.get(MIN_PARALLELISM_ANNOTATION)
    if min_text is not None:
        try:
            min_count = int(min_text)
        except ValueError:
            raise JobNotQueueable(f"{MIN_PARALLELISM_ANNOTATION}={min_text!r} is not a whole number") from None
        if not 0 < min_count <= count:
            raise JobNotQueueable(f"{MIN_PARALLELISM_ANNOTATION}={min_count} must be between 1 and {count}")
        if min_count < count:
            pod_set["minCount"] = min_count
    return [pod_set]


def job_owner_reference(name: str, uid: str) -> dict[str, Any]:
    """The controlling ownerReference a Job's Workload carries (the garbage collector deletes it with the Job)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def workload_for_job(job: Mapping[str, Any], *, priority: Priority) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    if not (name and namespace and uid):
        raise JobNotQueueable("the Job has no name, namespace or uid yet")
    queue = checked_queue_name(job)
    copied: dict[str, str] = {}
    threshold = (meta.get("annotations") or {}).get(UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION)
    if threshold is not None:
        if not (str(threshold).isdigit() and 1 <= int(threshold) <= MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD):
            raise JobNotQueueable(
                f"{UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION}={threshold!r} "
                f"must be an integer between 1 and {MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD}"
            )
        copied[UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION] = str(threshold)
    workload_spec: dict[str, Any] = {"queueName": queue, "podSets": pod_sets_for_job(job), **priority_spec(priority)}
    if workload_spec["priorityClassRef"] is None:
        del workload_spec["priorityClassRef"]
    limit = maximum_execution_time(job)
    if limit is not None:
        workload_spec["maximumExecutionTimeSeconds"] = limit
    return {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name_for_job(name, uid),
            "namespace": namespace,
            "labels": {JOB_UID_LABEL: uid},
            **({"annotations": copied} if copied else {}),
            "ownerReferences": [job_owner_reference(name, uid)],
        },
        "spec": workload_spec,
    }
