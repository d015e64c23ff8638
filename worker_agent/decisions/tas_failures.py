"""Node failures under running TAS workloads (pure): which nodes failed, and what to write about each workload.

Why this module exists: Kueue replaces one failed node per workload and evicts on the second (Kueue #14244).
kfed replaces all of them at once: for every admitted TAS workload whose assignment uses failed nodes it asks
``federation.topology.replace_failed_nodes`` for a new assignment that moves only the pods of the failed nodes,
inside the originally required domain, and rewrites ``topologyAssignment``; the old pods are deleted so the Job
controller creates replacements, which the ungater pins by the new assignment. If no replacement fits, the
workload is evicted with reason ``NodeFailures`` (the manager re-dispatches it).

A node is failed for a workload when (Kueue's rules):

* it is gone (deleted);
* it has been NotReady for at least ``delay`` (Kueue: 30 s) -- a node that recovers sooner moves nothing;
* it is NotReady and the workload's pods on it are terminating;
* it carries a ``NoExecute`` taint that the workload's pods do not tolerate (the node lifecycle controller's
  own not-ready / unreachable taints are judged by readiness instead);
* it is cordoned (``spec.unschedulable``) or carries a ``NoSchedule`` taint the workload's pods do not tolerate, and
  no pod of the workload runs there any more (Kueue's ``TASReplaceNodeOnNodeTaints``): the next pods the Job
  controller makes (a Job with more completions than parallelism, or replacements) would be pinned to a node that
  takes no new pods and wait there for good. While some still run there, nothing moves;
* beyond Kueue: it is cordoned and some of the pods the assignment puts there are not on it (``kubectl drain``
  evicted them, or they were not bound yet): their replacements would wait there the same way, so they move at
  once, without waiting for the others on the node to finish.

``status.unhealthyNodes`` lists the failed nodes of the workload; a node that is healthy again leaves the list
(Kueue #6348). The list keeps at most 8 entries, the limit of Kueue's v1beta2 schema (``maxItems: 8``), which
kfed's CRD keeps so that its Workloads stay valid for stock Kueue clusters and clients; replacement itself has no
limit (more than 8 failed nodes are all replaced, the Event and log name every one).

A user may cap replacement with Kueue v0.20's ``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` (1-8) on
the Workload (the manager copies it from the Job): when more of the workload's assigned nodes are failed at once
than that, it is evicted with ``NodeFailures`` instead of repaired. Kueue counts the failed nodes it is still
looking for replacements for; kfed replaces all of them in the same pass, so the count is the nodes of the current
assignment failed at once (a node already replaced away from does not count again). Without the annotation kfed
replaces any number. As before, a failure no replacement fits evicts at once (Kueue with the annotation would
keep the workload admitted, waiting for room, until the count passes the cap).

The pods left on failed nodes are retired so that the Job controller replaces them at once: each gets the
``DisruptionTarget`` condition (reason ``NodeFailures``: what the node lifecycle controller and PodGC set on pods
they delete, so ``kubectl describe`` and a Job's ``podFailurePolicy`` see an infrastructure disruption), then loses
the Job controller's ``batch.kubernetes.io/job-tracking`` finalizer, then is deleted. Without the finalizer the Job
controller never counts the pod as failed (it counts only pods that still carry it), so the replacement is created
in its next sync instead of after its failed-pod backoff (10 s * 2^(failures-1), up to 10 min, over every failure
since the last success: 16 pods on 8 failed nodes would wait the full 10 min), and a node failure does not use up
the Job's ``backoffLimit`` (``backoffLimit: 0`` would otherwise fail the whole Job). The condition alone does not
do this: the Job controller's backoff counts every failed pod, podFailurePolicy only changes ``backoffLimit``.
Pods on a failed node that another controller is already deleting (the NoExecute taint manager evicts untolerating
pods the moment the taint lands; PodGC deletes pods of deleted nodes) lose the finalizer too, racing the Job
controller's batched sync (1 s after the pod update); the finalizers of all of a pass's pods go first, at once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from federation.admission.eviction_counts import scheduling_stats_after
from federation.api.labels import (
    HOSTNAME_LABEL,
    MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD,
    UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION,
)
from federation.conditions import conditions_of, set_condition, workload_generation
from federation.topology import (
    PodSetRequest,
    Replacement,
    TopologyAssignment,
    TopologySnapshot,
    replace_failed_nodes,
)
from federation.topology.model import NODE_FAILURES_REASON
from worker_agent.decisions.tas_objects import (
    node_not_ready_since,
    node_spec,
    pod_live,
    untolerated_no_execute,
    untolerated_no_schedule,
)

Obj = Mapping[str, Any]
_P = TypeVar("_P", bound=Mapping[str, Any])
MAX_UNHEALTHY_NODES = 8
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
DISRUPTION_TARGET = "DisruptionTarget"


def disruption_patch(pod: Obj, *, node: str, why: str, now: dt.datetime) -> dict[str, Any] | None:
    """A strategic merge patch of the pod's status adding ``DisruptionTarget=True`` (reason NodeFailures; other
    conditions are kept, merged by type), or None when the pod already has it."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    if any(c.get("type") == DISRUPTION_TARGET and c.get("status") == "True" for c in conditions):
        return None
    condition = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": NODE_FAILURES_REASON,
        "message": f"kfed-agent: node {node} failed ({why}); the pod is replaced per the workload's topology",
        "lastTransitionTime": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"status": {"conditions": [condition]}}


def dying_but_tracked(pods: Sequence[_P]) -> list[_P]:
    """Of the pods on failed nodes: those already being deleted or failed (by another controller) that the Job
    controller still tracks -- they would count as failures of the Job unless they lose the finalizer first."""
    return [
        pod
        for pod in pods
        if ((pod.get("metadata") or {}).get("deletionTimestamp") or (pod.get("status") or {}).get("phase") == "Failed")
        and (pod.get("status") or {}).get("phase") != "Succeeded"
        and untrack_patch(pod) is not None
    ]


def untrack_patch(pod: Obj) -> dict[str, Any] | None:
    """A strategic merge patch dropping the Job controller's tracking finalizer (the Job controller's own form),
    or None when the pod does not carry it."""
    if JOB_TRACKING_FINALIZER not in ((pod.get("metadata") or {}).get("finalizers") or ()):
        return None
    return {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """``failed``: why the node counts as failed (empty: it does not); ``recheck_at``: when a NotReady node's
    delay runs out (None: nothing to wait for)."""

    failed: str = ""
    recheck_at: dt.datetime | None = None


def judge_node(
    node: Obj | None,
    *,
    now: dt.datetime,
    delay: float,
    tolerations: Sequence[Any],
    pods_terminating: bool,
    pods_missing: int = 0,
    pods_running: int | None = None,
) -> NodeVerdict:
    """``pods_missing``: how many of the pods the assignment puts on the node are not on it (:func:`missing_pods`);
    ``pods_running``: how many of the workload's pods run there (:func:`running_pods`; None: not known)."""
    if node is None:
        return NodeVerdict("node deleted")
    since = node_not_ready_since(node)
    if since is not None:
        waited = (now - since).total_seconds()
        if waited >= delay:
            return NodeVerdict(f"NotReady for {waited:.0f}s (delay {delay:g}s)")
        if pods_terminating:
            return NodeVerdict("NotReady with the workload's pods terminating")
        return NodeVerdict("", since + dt.timedelta(seconds=delay))
    taints = untolerated_no_execute(node_spec(node), tuple(tolerations))
    if taints:
        taint = taints[0]
        return NodeVerdict(f"untolerated taint {taint.key}={taint.value}:{taint.effect}")
    if pods_missing and _cordoned(node):
        return NodeVerdict(
            f"cordoned, and {pods_missing} of the workload's pods assigned to it are not on it (drained)"
        )
    if pods_running == 0:
        blocked = untolerated_no_schedule(node_spec(node), tuple(tolerations))
        if _cordoned(node) or blocked:
            why = "cordoned" if _cordoned(node) else f"untolerated taint {blocked[0].key}={blocked[0].value}:NoSchedule"
            return NodeVerdict(f"{why}, and no pod of the workload runs on it (its next pods could not start there)")
    return NodeVerdict()


def _cordoned(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def missing_pods(assigned: int, node: str, pods: Sequence[Obj]) -> int:
    """How many of the ``assigned`` pods of a pod set are not on ``node``: pods bound there count while they run or
    once they succeeded; one being deleted (evicted) or failed does not."""
    there = 0
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != node or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if (pod.get("status") or {}).get("phase") != "Failed":
            there += 1
    return max(0, assigned - there)


def running_pods(node: str, pods: Sequence[Obj]) -> int:
    """How many of ``pods`` are bound to ``node`` and still run there (not finished, not being deleted): Kueue's
    progressing pods."""
    return sum(1 for pod in pods if (pod.get("spec") or {}).get("nodeName") == node and pod_live(pod))


def node_healthy(node: Obj | None, *, tolerations: Sequence[Any]) -> bool:
    """Ready, not cordoned and without untolerated NoExecute or NoSchedule taints (a node that recovered)."""
    if node is None or node_not_ready_since(node) is not None or _cordoned(node):
        return False
    spec = node_spec(node)
    return not untolerated_no_execute(spec, tuple(tolerations)) and not untolerated_no_schedule(
        spec, tuple(tolerations)
    )


@dataclass(frozen=True, slots=True)
class PodSetRepair:
    """One TAS pod set: its request, snapshot and current assignment, and the failed hosts it uses."""

    name: str
    request: PodSetRequest
    snapshot: TopologySnapshot
    assignment: TopologyAssignment
    failed: Mapping[str, str]
    """host (node) name → why it failed."""


@dataclass(frozen=True, slots=True)
class WorkloadRepair:
    """What to write for one workload: a merge patch of ``status`` and the pods to delete (on failed nodes)."""

    status: Obj
    evicted: bool
    message: str
    failed: Mapping[str, str]
    moved_pods: int = 0
    delete_pods: tuple[str, ...] = field(default_factory=tuple)


def assignment_hosts(assignment: TopologyAssignment) -> dict[str, int]:
    """Hostnames of an assignment whose only level is ``kubernetes.io/hostname``, with the pods it puts on each
    (else empty)."""
    from federation.topology import decode_assignment

    if tuple(assignment.levels) != (HOSTNAME_LABEL,):
        return {}
    hosts: dict[str, int] = {}
    for values, count in decode_assignment(assignment):
        hosts[values[0]] = hosts.get(values[0], 0) + count
    return hosts


def unhealthy_nodes(current: Sequence[str], failed: Sequence[str], recovered: set[str]) -> list[str]:
    names = [name for name in current if name not in recovered]
    for name in sorted(failed):
        if name not in names:
            names.append(name)
    return names[:MAX_UNHEALTHY_NODES]


def eviction_threshold(workload: Obj) -> int | None:
    """The user's cap on failed nodes replaced at once (Kueue's annotation, 1-8), None when unset or invalid."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION)
    if text is None or not str(text).isdigit():
        return None
    value = int(text)
    return value if 1 <= value <= MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD else None


def current_unhealthy(workload: Obj) -> list[str]:
    return [str(item.get("name")) for item in (workload.get("status") or {}).get("unhealthyNodes") or ()]


def plan_repair(
    workload: Obj,
    pod_sets: Sequence[PodSetRepair],
    *,
    recovered: set[str],
    pods_on_failed: Sequence[str],
    now: dt.datetime,
) -> WorkloadRepair | None:
    """The repair of one workload, or None when there is nothing to write."""
    failed: dict[str, str] = {}
    for pod_set in pod_sets:
        failed.update(pod_set.failed)
    previous = current_unhealthy(workload)
    unhealthy = unhealthy_nodes(previous, list(failed), recovered)
    admission = (workload.get("status") or {}).get("admission") or {}
    assignments = [dict(item) for item in admission.get("podSetAssignments") or ()]
    moved = 0
    impossible: list[str] = []
    changed_assignment = False
    threshold = eviction_threshold(workload)
    over_threshold = threshold is not None and len(failed) > threshold
    if over_threshold:
        impossible.append(
            f"{len(failed)} nodes failed at once, more than the {threshold} allowed by "
            f"{UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION}"
        )
    for pod_set in pod_sets:
        if not pod_set.failed or impossible:
            continue
        result = replace_failed_nodes(pod_set.snapshot, pod_set.request, pod_set.assignment, list(pod_set.failed))
        if not isinstance(result, Replacement):
            impossible.append(f"pod set {pod_set.name}: {result.message}")
            continue
        moved += len(result.moves)
        for item in assignments:
            if item.get("name") == pod_set.name:
                item["topologyAssignment"] = result.assignment.to_dict()
                changed_assignment = True
    names = ", ".join(f"{name} ({why})" for name, why in sorted(failed.items()))
    if impossible:
        message = f"{_eviction_sentence(failed, threshold_exceeded=over_threshold)}; {names}: {'; '.join(impossible)}"
        conditions, _ = set_condition(
            conditions_of(workload),
            condition_type="Evicted",
            status=True,
            reason=NODE_FAILURES_REASON,
            message=message[:32768],
            now=now,
            observed_generation=workload_generation(workload),
        )
        status: dict[str, Any] = {  # as Kueue's eviction, it clears unhealthyNodes: the message names the nodes
            "conditions": conditions,
            "unhealthyNodes": None,
            "schedulingStats": scheduling_stats_after(workload, NODE_FAILURES_REASON),
        }
        return WorkloadRepair(status, True, message, failed, 0, tuple(pods_on_failed))
    if not changed_assignment and unhealthy == previous:
        if pods_on_failed:
            return WorkloadRepair({}, False, "", failed, 0, tuple(pods_on_failed))
        return None
    status = {"unhealthyNodes": [{"name": n} for n in unhealthy] or None}
    if changed_assignment:
        status["admission"] = {**admission, "podSetAssignments": assignments}
    message = f"replaced {moved} pods of failed nodes {names}" if moved else "unhealthy nodes updated"
    return WorkloadRepair(status, False, message, failed, moved, tuple(pods_on_failed))


def _eviction_sentence(failed: Mapping[str, str], *, threshold_exceeded: bool) -> str:
    """Kueue's words for a ``NodeFailures`` eviction (kfed's details follow them): more nodes failed than the workload
    bears, or a pod of a failed node has no replacement in its topology."""
    if threshold_exceeded:
        nodes = ", ".join(sorted(failed))
        return f"Workload eviction triggered due to multiple TAS assigned node failures, including: {nodes}"
    return f"Workload was evicted as there was no replacement for unhealthy node(s): {','.join(sorted(failed))}"
