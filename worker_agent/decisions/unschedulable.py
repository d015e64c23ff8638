"""Pods of an admitted copy that the worker's kube-scheduler cannot place: which, and what the copy says about it.

Why this module exists: quota is not nodes. A Job admitted by quota whose pods no node takes (a ``nodeSelector``
no node has, a taint nothing tolerates, pods larger than any node) waits on the worker, and without this only the
worker's pod Events say why. The agent learns of such pods from the scheduler's ``FailedScheduling`` Events
(``worker_agent.unschedulable``), lists the Job's unbound pods, and these functions decide from the pods'
``PodScheduled`` condition (the scheduler writes its message there too) what the Workload copy's
``kfed.io/PodsUnschedulable`` condition says; the manager shows it on the manager Workload. Pods that cannot even be
created (the Job controller's ``FailedCreate`` Events on the Job copy: a ServiceAccount or PriorityClass the worker
lacks, a ResourceQuota, Pod Security admission) are told the same way: :func:`creation_failure` decides from the
Job's own counts whether pods are still missing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.conditions import conditions_of, find_condition, parse_time, set_condition
from federation.pod_injection import TOPOLOGY_GATE
from federation.protocol import (
    PODS_UNSCHEDULABLE_CONDITION,
    REASON_FAILED_CREATE,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    UNSCHEDULABLE_GRACE_SECONDS,
)

Obj = Mapping[str, Any]
MESSAGE_LIMIT = 1000
UNMARKED_RECHECK_SECONDS = 2.0
"""How soon to look again at an unbound pod the scheduler has not marked (yet) either way."""
SCHEDULED_MESSAGE = "every pod of the Job is scheduled"


@dataclass(frozen=True, slots=True)
class StuckPods:
    """Pods unschedulable past the grace period (name, the scheduler's message), and how soon to look again for
    the ones still inside it (None: none are)."""

    pods: tuple[tuple[str, str], ...]
    recheck_in: float | None


def job_candidates(pod_name: str, job_names: Iterable[str]) -> list[str]:
    """The Jobs whose pods can carry this name (the Job controller names them ``<job>-<random>`` or, indexed,
    ``<job>-<index>-<random>``), longest first: the caller confirms by the Job's own pods."""
    return sorted((name for name in job_names if pod_name.startswith(f"{name}-")), key=len, reverse=True)


def _sooner(recheck: float | None, seconds: float) -> float:
    return seconds if recheck is None else min(recheck, seconds)


def stuck_pods(pods: Iterable[Obj], *, now: dt.datetime, grace: float = UNSCHEDULABLE_GRACE_SECONDS) -> StuckPods:
    """The unbound, live pods the scheduler marked ``PodScheduled=False`` reason ``Unschedulable`` at least
    ``grace`` seconds ago, and those held that long by a scheduling gate of someone else's (:func:`foreign_gates`:
    the user's pod template brought it, and whatever removes it on the manager cluster never sees the worker's
    pods). Pods gated by TAS only (its ungater places them) are not stuck; unbound pods not marked at all are looked
    at again soon."""
    stuck: list[tuple[str, str]] = []
    recheck: float | None = None
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        scheduled = find_condition(pod, "PodScheduled") or {}
        if scheduled.get("reason") == "SchedulingGated":
            gates = foreign_gates(pod.get("spec") or {})
            if not gates:
                continue
            message = gated_message(gates)
        elif scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            message = str(scheduled.get("message") or "")
        else:
            # not marked yet: the scheduler's Event can come before its write of the pod's status
            recheck = _sooner(recheck, UNMARKED_RECHECK_SECONDS)
            continue
        since = scheduled.get("lastTransitionTime")
        age = (now - parse_time(str(since))).total_seconds() if since else grace
        if age >= grace:
            stuck.append((str(meta.get("name", "")), message))
        else:
            recheck = _sooner(recheck, grace - age)
    return StuckPods(pods=tuple(sorted(stuck)), recheck_in=recheck)


def foreign_gates(pod_spec: Obj) -> tuple[str, ...]:
    """The names of a pod spec's (or pod template spec's) scheduling gates other than TAS's, which kfed-agent's
    ungater removes itself."""
    return tuple(
        str(gate.get("name"))
        for gate in pod_spec.get("schedulingGates") or ()
        if gate.get("name") and gate.get("name") != TOPOLOGY_GATE
    )


def gated_message(gates: Sequence[str]) -> str:
    names = ", ".join(gates)
    return (
        f"held by scheduling gate{'s' if len(gates) > 1 else ''} {names} from the Job's pod template, which nothing "
        "in this worker cluster has removed"
    )


def stuck_message(pods: Sequence[tuple[str, str]]) -> str:
    """One line for the condition: the first pod's name and the scheduler's message for it. It does not count the
    pods, so that pods of a large Job running out of grace one after the other do not rewrite it each time."""
    name, reason = pods[0]
    message = f"pod {name}{' and others' if len(pods) > 1 else ''} cannot be scheduled: {reason}"
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def missing_pods(job: Obj) -> int:
    """How many more pods the Job controller should have running for ``job`` now: ``parallelism`` (default 1), no
    more than the completions still owed, less the active ones; 0 once the Job has ended or is suspended."""
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    if spec.get("suspend") is True or any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions_of(job)
    ):
        return 0
    wanted = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    succeeded = int(status.get("succeeded") or 0)
    completions = spec.get("completions")
    if completions is not None:
        wanted = min(wanted, int(completions) - succeeded)
    elif succeeded:
        wanted = 0  # a work queue Job ends once one pod succeeded
    return max(0, wanted - int(status.get("active") or 0))


@dataclass(frozen=True, slots=True)
class CreationFailure:
    """The Job controller's latest ``FailedCreate`` message for a Job copy, and since when it has been failing."""

    message: str
    since: dt.datetime
    job_uid: str = ""
    """The uid of the Job the Events were about: a later Job of the same name is another Job."""


def creation_failure(
    job: Obj, failure: CreationFailure | None, *, now: dt.datetime, grace: float = UNSCHEDULABLE_GRACE_SECONDS
) -> tuple[str | None, float | None]:
    """``(message, recheck_in)``: the message to show when pods of ``job`` have been failing to be created for at
    least ``grace`` seconds and some are still missing (:func:`missing_pods`); when to look again for a failure
    still inside the grace period. ``(None, None)`` once no pod is missing."""
    uid = str((job.get("metadata") or {}).get("uid") or "")
    if failure is None or missing_pods(job) == 0 or (failure.job_uid and uid and failure.job_uid != uid):
        return None, None
    age = (now - failure.since).total_seconds()
    if age < grace:
        return None, grace - age
    return failure.message, None


def creation_message(event_message: str) -> str:
    message = f"the Job copy cannot create its pods: {event_message}"
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def copy_conditions(
    workload: Obj, pods: Sequence[tuple[str, str]], *, now: dt.datetime, not_created: str | None = None
) -> list[dict[str, Any]] | None:
    """The Workload copy's conditions with ``kfed.io/PodsUnschedulable`` as ``pods`` (and ``not_created``, the
    Job controller's message when pods cannot be created, which comes first) make it, or None when that changes
    nothing a reader sees. No stuck pod on a copy that never had the condition writes nothing."""
    current = find_condition(workload, PODS_UNSCHEDULABLE_CONDITION)
    stuck = bool(pods) or not_created is not None
    if not stuck and (current is None or current.get("status") == "False"):
        return None
    if not_created is not None:
        reason, message = REASON_FAILED_CREATE, creation_message(not_created)
    elif pods:
        reason, message = REASON_UNSCHEDULABLE, stuck_message(pods)
    else:
        reason, message = REASON_SCHEDULED, SCHEDULED_MESSAGE
    conditions, changed = set_condition(
        conditions_of(workload),
        condition_type=PODS_UNSCHEDULABLE_CONDITION,
        status=stuck,
        reason=reason,
        message=message,
        now=now,
    )
    return conditions if changed else None
