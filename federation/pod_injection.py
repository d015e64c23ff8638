"""What an admission adds to a Job's pod template when the Job starts (pure), shared by the agent and the manager.

The agent starts a suspended Job whose Workload it admitted with one merge patch; kfed-manager, once a kfed-agent
admitted its Workload copy, creates the Job copy already started with the same patch applied. Both must produce
the same pod template, so the rule lives here once:

- the assigned flavors' ``nodeLabels`` are merged into the template's ``nodeSelector`` and their ``tolerations``
  appended (Kueue's "run with pod set info");
- every pod gets the labels and the annotation Kueue's Job reconciler gives it when it starts a Job (dashboards
  and scripts select pods by them): ``kueue.x-k8s.io/podset`` (the pod set's name), ``kueue.x-k8s.io/local-queue-name``
  and ``kueue.x-k8s.io/cluster-queue-name`` (the Workload's LocalQueue and the ClusterQueue that admitted it, where
  the name is a valid label value; Kueue's AssignQueueLabelsForPods, on by default), on a worker's copy of a
  MultiKueue Workload ``kueue.x-k8s.io/multikueue-worker-workload-pod: "true"``, and the annotation
  ``kueue.x-k8s.io/workload`` naming the Workload;
- a pod set with a ``topologyAssignment`` gets Kueue's TAS markings as well: the scheduling gate
  ``kueue.x-k8s.io/topology`` (the agent's ungater removes it once it pinned the pod to its domain) and the
  ``kueue.x-k8s.io/tas`` label;
- what Ready admission checks ask of the pods (``podSetUpdates``: labels, annotations, nodeSelector) is merged in;
- a Job open to partial admission (``kueue.x-k8s.io/job-min-parallelism``) gets the admitted pod count as its
  ``parallelism``, and as its ``completions`` too under ``kueue.x-k8s.io/job-completions-equal-parallelism: true``
  (Kueue's rule; :func:`pod_count_patch`, which also restores the Workload's count when such a Job is stopped).

Pod sets map to pod templates by position: a batch/v1 Job has one pod template and its Workload one pod set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.api.common import DNS1123_LABEL
from federation.api.labels import (
    COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    MIN_PARALLELISM_ANNOTATION,
    MULTIKUEUE_ORIGIN_LABEL,
)

Obj = dict[str, Any]

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
"""Kueue's scheduling gate: a TAS pod waits behind it until the ungater pins it to its domain."""
TAS_LABEL = "kueue.x-k8s.io/tas"
"""Kueue's label on pods of a TAS pod set (the agent's pod watches select on it)."""
PODSET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
LOCAL_QUEUE_POD_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_POD_LABEL = "kueue.x-k8s.io/cluster-queue-name"
MULTIKUEUE_WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
_DNS1123_LABEL = re.compile(DNS1123_LABEL)


INJECTED_ANNOTATION = "kfed.io/injected-placement"
"""On a Job copy kfed-manager creates started: the ``nodeSelector`` entries and ``tolerations`` the start patch added
(JSON, :func:`injected_placement`), so that kfed-agent can tell a flavor's label or toleration removed since then
from the Job's own (which a user may have edited on the suspended manager Job)."""


@dataclass(frozen=True, slots=True)
class FlavorInjection:
    """What one ResourceFlavor adds to the pods of a pod set assigned to it."""

    node_labels: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class StartPatch:
    """Merge-patch ``patch`` into the Job to start it; ``flavors`` are the assigned flavors it used."""

    patch: Obj
    flavors: tuple[str, ...]


def _pod_set_updates(workload: Mapping[str, Any], pod_set: str) -> list[Mapping[str, Any]]:
    checks = (workload.get("status") or {}).get("admissionChecks") or ()
    return [
        update
        for check in checks
        if check.get("state") == "Ready"
        for update in check.get("podSetUpdates") or ()
        if update.get("name") == pod_set
    ]


_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


def completions_follow_parallelism(annotations: Mapping[str, str]) -> bool:
    """``kueue.x-k8s.io/job-completions-equal-parallelism`` is true (Go's ``strconv.ParseBool`` spellings, as
    Kueue reads it); raises ``ValueError`` for a value that is neither true nor false."""
    text = annotations.get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    if text is None or text in _FALSE:
        return False
    if text in _TRUE:
        return True
    raise ValueError(f"{COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION}={text!r} is not true or false")


def pod_count_patch(job_spec: Mapping[str, Any], annotations: Mapping[str, str], count: int | None) -> Obj:
    """The ``spec`` fields that give a Job ``count`` pods: ``parallelism``, and ``completions`` too when
    job-completions-equal-parallelism is true. Only for a Job open to partial admission (job-min-parallelism), as
    Kueue does when it starts one with its admitted count or stops one and restores its Workload's; empty for any
    other Job, for no ``count``, and for fields that already hold it. A bad job-completions-equal-parallelism value
    counts as false here (kfed-manager refuses to queue such a Job; a worker copy has what the manager sent)."""
    if count is None or MIN_PARALLELISM_ANNOTATION not in annotations:
        return {}
    patch: Obj = {}
    parallelism = job_spec.get("parallelism")
    if (1 if parallelism is None else int(parallelism)) != count:
        patch["parallelism"] = count
    try:
        follow = completions_follow_parallelism(annotations)
    except ValueError:
        follow = False
    if follow and job_spec.get("completions") != count:
        patch["completions"] = count
    return patch


def admitted_count(workload: Mapping[str, Any]) -> int | None:
    """The pod count the Workload's admission gives its first (a Job's only) pod set, or None when not admitted."""
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ()
    count = assignments[0].get("count") if assignments else None
    return int(count) if count is not None else None


def requested_count(workload: Mapping[str, Any] | None) -> int | None:
    """The pod count the Workload asks for, its first (a Job's only) pod set's; None without a pod set. What a
    stopped Job that partial admission had shrunk gets back."""
    pod_sets = ((workload or {}).get("spec") or {}).get("podSets") or ()
    return int(pod_sets[0].get("count", 1)) if pod_sets else None


def kueue_pod_labels(workload: Mapping[str, Any], pod_set: str) -> dict[str, str]:
    """The labels Kueue's Job reconciler puts on the pods of ``pod_set`` of the admitted ``workload`` (see the
    module docstring); a queue whose name is not a valid label value is left out, as Kueue leaves out such a
    ClusterQueue name."""
    labels = {PODSET_LABEL: pod_set}
    local_queue = str((workload.get("spec") or {}).get("queueName") or "")
    if local_queue and _LABEL_VALUE.fullmatch(local_queue):
        labels[LOCAL_QUEUE_POD_LABEL] = local_queue
    cluster_queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
    if len(cluster_queue) <= 63 and _DNS1123_LABEL.fullmatch(cluster_queue):
        labels[CLUSTER_QUEUE_POD_LABEL] = cluster_queue
    if MULTIKUEUE_ORIGIN_LABEL in ((workload.get("metadata") or {}).get("labels") or {}):
        labels[MULTIKUEUE_WORKER_POD_LABEL] = "true"
    return labels


def start_patch(
    job_spec: Mapping[str, Any],
    workload: Mapping[str, Any],
    *,
    flavors: Mapping[str, FlavorInjection],
    annotations: Mapping[str, str] | None = None,
) -> StartPatch:
    """The merge patch that starts a Job of spec ``job_spec`` (and ``annotations``) for its admitted ``workload``.

    Raises ``KeyError`` naming a ResourceFlavor the assignment uses that ``flavors`` does not hold (the caller
    reports it)."""
    assignments: Sequence[Mapping[str, Any]] = ((workload.get("status") or {}).get("admission") or {}).get(
        "podSetAssignments"
    ) or []
    first = assignments[0] if assignments else None
    used = list(dict.fromkeys(str(f) for f in ((first or {}).get("flavors") or {}).values()))
    node_selector: dict[str, str] = {}
    tolerations: list[Mapping[str, Any]] = []
    for name in used:
        flavor = flavors.get(name)
        if flavor is None:
            raise KeyError(name)
        node_selector.update(flavor.node_labels)
        tolerations.extend(flavor.tolerations)
    pod_spec = (job_spec.get("template") or {}).get("spec") or {}
    template_patch: Obj = {}
    if node_selector:
        template_patch["nodeSelector"] = node_selector  # merge patch: keys are merged into the existing map
    existing = list(pod_spec.get("tolerations") or [])
    missing = [t for t in tolerations if t not in existing]
    if missing:
        template_patch["tolerations"] = existing + missing  # merge patch replaces lists: send the whole list
    pod_set = str(first.get("name") or "main") if first is not None else "main"
    template_meta: Obj = {
        "labels": kueue_pod_labels(workload, pod_set),
        "annotations": {WORKLOAD_ANNOTATION: str((workload.get("metadata") or {}).get("name", ""))},
    }
    if first is not None and first.get("topologyAssignment"):
        gates = list(pod_spec.get("schedulingGates") or [])
        if not any(gate.get("name") == TOPOLOGY_GATE for gate in gates):
            template_patch["schedulingGates"] = [*gates, {"name": TOPOLOGY_GATE}]
        template_meta["labels"][TAS_LABEL] = "true"
    for update in _pod_set_updates(workload, pod_set):  # what Ready admission checks ask of the pods (Kueue's merge)
        for field in ("labels", "annotations"):
            if update.get(field):
                template_meta[field] = {**(template_meta.get(field) or {}), **update[field]}
        if update.get("nodeSelector"):
            template_patch["nodeSelector"] = {**(template_patch.get("nodeSelector") or {}), **update["nodeSelector"]}
    spec_patch: Obj = {"suspend": False, **pod_count_patch(job_spec, annotations or {}, admitted_count(workload))}
    spec_patch["template"] = {"metadata": template_meta}
    if template_patch:
        spec_patch.setdefault("template", {})["spec"] = template_patch
    return StartPatch({"spec": spec_patch}, tuple(used))


def injected_placement(job_spec: Mapping[str, Any], start: StartPatch) -> Obj:
    """What ``start`` (the start patch of a Job of spec ``job_spec``) adds to its pod template's ``nodeSelector`` and
    ``tolerations`` (the value of :data:`INJECTED_ANNOTATION`, as a dict)."""
    patched = ((start.patch["spec"].get("template") or {}).get("spec")) or {}
    existing = list(((job_spec.get("template") or {}).get("spec") or {}).get("tolerations") or ())
    return {
        "nodeSelector": dict(patched.get("nodeSelector") or {}),
        "tolerations": [t for t in patched.get("tolerations") or () if t not in existing],
    }
