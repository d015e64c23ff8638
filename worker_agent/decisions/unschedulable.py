"""Pods of an admitted copy that the worker's kube-scheduler cannot place: which, and what the copy says about it.

Why this module exists: quota is not nodes. A Job admitted by quota whose pods no node takes (a ``nodeSelector``
no node has, a taint nothing tolerates, pods larger than any node) waits on the worker, and without this only the
worker's pod Events say why. The agent learns of such pods from the scheduler's ``FailedScheduling`` Events
(``worker_agent.unschedulable``), lists the Job's unbound pods, and these functions decide from the pods'
``PodScheduled`` condition (the scheduler writes its message there too) what the Workload copy's
``kfed.io/PodsUnschedulable`` condition says; the manager shows it on the manager Workload.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.conditions import conditions_of, find_condition, parse_time, set_condition
from federation.protocol import (
    PODS_UNSCHEDULABLE_CONDITION,
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


def stuck_pods(pods: Iterable[Obj], *, now: dt.datetime, grace: float = UNSCHEDULABLE_GRACE_SECONDS) -> StuckPods:
    """The unbound, live pods the scheduler marked ``PodScheduled=False`` reason ``Unschedulable`` at least
    ``grace`` seconds ago. Gated pods (reason ``SchedulingGated``: TAS, whose ungater places them) are not; unbound
    pods not marked at all are looked at again soon."""
    stuck: list[tuple[str, str]] = []
    recheck: float | None = None
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        scheduled = find_condition(pod, "PodScheduled")
        if scheduled is not None and scheduled.get("reason") == "SchedulingGated":
            continue
        if scheduled is None or scheduled.get("status") != "False" or scheduled.get("reason") != "Unschedulable":
            # not marked yet: the scheduler's Event can come before its write of the pod's status
            recheck = min(recheck, UNMARKED_RECHECK_SECONDS) if recheck is not None else UNMARKED_RECHECK_SECONDS
            continue
        since = scheduled.get("lastTransitionTime")
        age = (now - parse_time(str(since))).total_seconds() if since else grace
        if age >= grace:
            stuck.append((str(meta.get("name", "")), str(scheduled.get("message") or "")))
        else:
            recheck = min(recheck, grace - age) if recheck is not None else grace - age
    return StuckPods(pods=tuple(sorted(stuck)), recheck_in=recheck)


def stuck_message(pods: Sequence[tuple[str, str]]) -> str:
    """One line for the condition: the first pod's name and the scheduler's message for it. It does not count the
    pods, so that pods of a large Job running out of grace one after the other do not rewrite it each time."""
    name, reason = pods[0]
    message = f"pod {name}{' and others' if len(pods) > 1 else ''} cannot be scheduled: {reason}"
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."


def copy_conditions(workload: Obj, pods: Sequence[tuple[str, str]], *, now: dt.datetime) -> list[dict[str, Any]] | None:
    """The Workload copy's conditions with ``kfed.io/PodsUnschedulable`` as ``pods`` make it, or None when that
    changes nothing a reader sees. No stuck pod on a copy that never had the condition writes nothing."""
    current = find_condition(workload, PODS_UNSCHEDULABLE_CONDITION)
    if not pods and (current is None or current.get("status") == "False"):
        return None
    conditions, changed = set_condition(
        conditions_of(workload),
        condition_type=PODS_UNSCHEDULABLE_CONDITION,
        status=bool(pods),
        reason=REASON_UNSCHEDULABLE if pods else REASON_SCHEDULED,
        message=stuck_message(pods) if pods else SCHEDULED_MESSAGE,
        now=now,
    )
    return conditions if changed else None
