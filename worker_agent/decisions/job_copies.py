"""When a kfed-manager Workload copy was admitted here but its Job copy never came: evict it, release its quota.

kfed-manager creates the Workload copy first and the Job copy only once the agent has admitted it (the Job then
arrives already started). If the manager dies between the two, or its Job creation keeps failing, the admitted copy
would hold the worker's quota forever with nothing to run. So an admitted copy that carries
``federation.protocol.MANAGER_UID_LABEL`` and that no Job names (``decisions.jobs.prebuilt_workload_name``) for
longer than the timeout after its admission is deactivated (``spec.active: false``, else the next pass would admit
it again at once and hold the quota for another timeout, over and over while the manager is away) and gets
``Evicted=True`` reason ``JobCopyMissing``; the eviction's usual end (``decisions.preemption``: no Job to stop, so
the quota is released) follows. The manager sees the eviction on its copy and takes the Workload back.

Copies without the label (a stock Kueue MultiKueue manager creates the Job first), finished copies and copies
already evicted are left alone by this timeout.

**Out of sync.** The manager creates the Job copy started, its pod template already carrying the assigned
flavors' ``nodeLabels`` and ``tolerations`` as the agent's last capacity report listed them (published about 1 s
after a change). A ResourceFlavor edited in that second gives a Job copy with stale placement (pods on the old
nodes, or never scheduled). So the first time the agent sees a started Job copy of an admitted kfed-manager copy,
it checks the template against the flavors as it knows them (``federation.pod_injection``, the same rule): a
label or toleration the template lacks or has with another value counts, and so does one the manager's start patch
added (it says which in ``INJECTED_ANNOTATION``) that the flavor no longer gives (removed from the ResourceFlavor).
The Job's own ``nodeSelector`` and tolerations are not judged (a user may edit a suspended manager Job; kfed-manager
keeps its Workload). On a disagreement the copy is deactivated and evicted the same
way, reason ``OutOfSync`` (Kueue's word for a prebuilt Workload that no longer matches its Job), and the manager
takes it back and dispatches it again with the flavors of the new report. The same happens, on any change of the
Job, when a started Job copy runs another number of pods than its Workload holds quota for (its ``parallelism`` or
``completions`` edited here: Kueue finishes such a prebuilt Workload as out of sync too). A stock MultiKueue
manager's copy in that case is finished as Kueue finishes it on a worker (``Finished`` reason ``OutOfSync``), and
its Job copy suspended, since such a manager reads the copy's ``Finished``. Pure: plain dicts in, status patches
and the next deadline out.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.api_workloads import is_admitted, workload_key
from federation.admission.eviction_counts import scheduling_stats_after
from federation.api.workload import ADMITTED, FINISHED, QUOTA_RESERVED
from federation.conditions import conditions_of, find_condition, is_true, parse_time, set_condition, workload_generation
from federation.pod_injection import INJECTED_ANNOTATION, FlavorInjection, start_patch
from federation.protocol import MANAGER_UID_LABEL, REASON_OUT_OF_SYNC
from worker_agent.decisions.jobs import FinishWorkload, finish_with, job_finished, prebuilt_workload_name

Obj = dict[str, Any]

DEFAULT_JOB_COPY_TIMEOUT_SECONDS = 60.0
REASON_JOB_COPY_MISSING = "JobCopyMissing"


@dataclass(frozen=True, slots=True)
class JobCopyMissing:
    """Deactivate ``raw`` (key ``namespace/name``) and evict it with ``status`` (a status merge patch)."""

    key: str
    raw: Obj
    status: Obj
    message: str
    reason: str = REASON_JOB_COPY_MISSING


@dataclass(frozen=True, slots=True)
class JobCopyTimeouts:
    evictions: tuple[JobCopyMissing, ...]
    next_due: float | None
    """Epoch seconds when the next admitted copy without a Job reaches its timeout (None: none is waiting)."""


def admitted_since(workload: Mapping[str, Any]) -> float | None:
    """When the copy became admitted (the later of its QuotaReserved and Admitted transitions), or None when it is
    not admitted: with admission checks the manager waits for Admitted before it creates the Job."""
    if not (is_true(workload, QUOTA_RESERVED) and is_true(workload, ADMITTED)):
        return None
    times = [
        parse_time(str(found["lastTransitionTime"])).timestamp()
        for found in (find_condition(workload, QUOTA_RESERVED), find_condition(workload, ADMITTED))
        if found is not None and found.get("lastTransitionTime")
    ]
    return max(times) if times else None


def waits_for_job_copy(workload: Mapping[str, Any]) -> bool:
    """A kfed-manager copy that holds quota, is neither finished nor evicted: it should get a Job copy."""
    labels = (workload.get("metadata") or {}).get("labels") or {}
    if MANAGER_UID_LABEL not in labels:
        return False
    return not is_true(workload, "Finished") and not is_true(workload, "Evicted")


def job_copy_timeouts(
    workloads: Iterable[Obj], *, named_by_jobs: Collection[str], now: dt.datetime, timeout: float
) -> JobCopyTimeouts:
    """The admitted kfed-manager copies that no Job (``named_by_jobs``: ``namespace/name`` keys of the Workloads
    the Jobs name) has claimed for ``timeout`` seconds since their admission, and when the next one falls due."""
    evictions: list[JobCopyMissing] = []
    next_due: float | None = None
    for workload in workloads:
        if not waits_for_job_copy(workload):
            continue
        key = workload_key(workload)
        if key in named_by_jobs:
            continue
        since = admitted_since(workload)
        if since is None:
            continue
        due = since + timeout
        if now.timestamp() < due:
            next_due = due if next_due is None else min(next_due, due)
            continue
        message = f"no Job copy was created for the admitted workload within {timeout:g}s"
        evictions.append(JobCopyMissing(key, workload, eviction_status(workload, message, now=now), message))
    return JobCopyTimeouts(tuple(evictions), next_due)


def _injected(job: Mapping[str, Any]) -> Obj:
    """The placement kfed-manager's start patch added to the Job copy (``INJECTED_ANNOTATION``; empty when absent)."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(INJECTED_ANNOTATION)
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def placement_mismatch(
    job: Mapping[str, Any], workload: Mapping[str, Any], *, flavors: Mapping[str, FlavorInjection]
) -> str | None:
    """How a started Job copy's pod template differs from the placement its admitted ``workload`` gives it, or None
    when it matches: a ``nodeLabel`` or toleration of the assigned flavors (as ``flavors`` has them, with what Ready
    admission checks add) that the template lacks or has with another value, and one that kfed-manager's start patch
    added (``INJECTED_ANNOTATION``) that the flavors no longer give (REMOVED from the ResourceFlavor since). The
    Job's own ``nodeSelector`` and tolerations are not judged: a user may have edited the suspended manager Job.
    Raises ``KeyError`` naming an assigned flavor ``flavors`` lacks."""
    spec = job.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    start = start_patch(spec, workload, flavors=flavors)
    wanted = ((start.patch["spec"].get("template") or {}).get("spec")) or {}
    wanted_selector = wanted.get("nodeSelector") or {}
    selector = pod_spec.get("nodeSelector") or {}
    lacks = [
        f"nodeSelector {key}={value} (it has {key}={selector[key]})"
        if key in selector
        else f"nodeSelector {key}={value}"
        for key, value in sorted(wanted_selector.items())
        if selector.get(key) != value
    ]
    existing = list(pod_spec.get("tolerations") or ())
    lacks += [
        f"toleration {json.dumps(t, sort_keys=True)}" for t in wanted.get("tolerations") or () if t not in existing
    ]
    injected = _injected(job)
    given = [t for name in start.flavors for t in flavors[name].tolerations]
    extra = [
        f"nodeSelector {key}={value}"
        for key, value in sorted(selector.items())
        if key in (injected.get("nodeSelector") or {}) and key not in wanted_selector
    ]
    extra += [
        f"toleration {json.dumps(t, sort_keys=True)}"
        for t in existing
        if t in (injected.get("tolerations") or ()) and t not in given
    ]
    if not lacks and not extra:
        return None
    parts = ([f"it lacks {', '.join(lacks)}"] if lacks else []) + (
        [f"it carries {', '.join(extra)} that they no longer give"] if extra else []
    )
    return (
        f"the Job copy's pod template does not match the assigned ResourceFlavors ({', '.join(start.flavors)}) as "
        f"they are in this cluster: {'; '.join(parts)}"
    )


def pod_count_mismatch(job: Mapping[str, Any], workload: Mapping[str, Any]) -> str | None:
    """How the number of pods a started Job copy runs at once differs from the count its admitted ``workload``
    holds quota for, or None when they agree (or the Workload is not a Job's single pod set). The count is Kueue's
    for a Job: ``spec.parallelism``, capped by ``spec.completions``. Both are mutable on a running Job, so an edit
    of the copy here would run pods beyond the quota reserved; Kueue finishes such a prebuilt Workload as out of
    sync with its Job."""
    spec = job.get("spec") or {}
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if not isinstance(parallelism, int) and parallelism is not None:
        return None
    pods = 1 if parallelism is None else parallelism
    if isinstance(completions, int) and completions < pods:
        pods = completions
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    if len(pod_sets) != 1:
        return None
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    count = assignments[0].get("count") if len(assignments) == 1 else None
    if count is None:
        count = pod_sets[0].get("count", 1)
    if pods == count:
        return None
    given = f"spec.parallelism {parallelism}" + (f", spec.completions {completions}" if completions is not None else "")
    return f"the Job copy runs {pods} pods at once ({given}), but its workload holds quota for {count}"


def _running(job: Mapping[str, Any]) -> bool:
    """The Job was started (``suspend: false``) and has not ended."""
    return (job.get("spec") or {}).get("suspend") is False and job_finished(job) is None


CHECK_CREATED_SINCE_MARGIN = dt.timedelta(seconds=10)
"""A Job copy created up to this long before the agent's term began is still checked (it may have been built from
a report published just before)."""


def created_before(job: Mapping[str, Any], moment: dt.datetime) -> bool:
    """The Job was created before ``moment`` (less :data:`CHECK_CREATED_SINCE_MARGIN`)."""
    text = (job.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(text, str):
        return False
    created = parse_time(text)
    return created is not None and created < moment - CHECK_CREATED_SINCE_MARGIN


def out_of_sync(
    job: Mapping[str, Any],
    workload: Obj,
    *,
    flavors: Mapping[str, FlavorInjection],
    now: dt.datetime,
    term_started: dt.datetime | None = None,
) -> JobCopyMissing | None:
    """The eviction of ``workload``, an admitted kfed-manager copy, when its started, unfinished Job copy ``job``
    does not carry its flavors' placement (:func:`placement_mismatch`); None when it does, or when this is not such
    a pair (the agent starts suspended Jobs itself, with the flavors it has). A Job copy created well before the
    agent's term began (``term_started``: a restart, a new leader) is not checked: it was checked by the term that
    saw it created, and a ResourceFlavor edited since must not stop a running Job (Kueue does not either)."""
    if not _running(job):
        return None
    if term_started is not None and created_before(job, term_started):
        return None
    if not waits_for_job_copy(workload):
        return None
    if not is_admitted(workload):
        return None
    message = placement_mismatch(job, workload, flavors=flavors)
    if message is None:
        return None
    status = eviction_status(workload, message, now=now, reason=REASON_OUT_OF_SYNC)
    return JobCopyMissing(workload_key(workload), workload, status, message, REASON_OUT_OF_SYNC)


def count_out_of_sync(job: Mapping[str, Any], workload: Obj, *, now: dt.datetime) -> JobCopyMissing | None:
    """The eviction of ``workload``, an admitted kfed-manager copy, when its started, unfinished Job copy ``job``
    runs another number of pods than the Workload holds quota for (:func:`pod_count_mismatch`, e.g. someone raised
    the copy's ``spec.parallelism`` on this worker); None otherwise. Unlike the placement, checked on every change
    of the Job: the manager takes the copy back and sends the Job again as its manager Job says."""
    if not _running(job):
        return None
    if not waits_for_job_copy(workload) or not is_admitted(workload):
        return None
    message = pod_count_mismatch(job, workload)
    if message is None:
        return None
    status = eviction_status(workload, message, now=now, reason=REASON_OUT_OF_SYNC)
    return JobCopyMissing(workload_key(workload), workload, status, message, REASON_OUT_OF_SYNC)


OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
"""Kueue's ``Finished`` message for a prebuilt Workload that no longer matches its Job."""


def stock_copy_out_of_sync(job: Mapping[str, Any], workload: Obj, *, now: dt.datetime) -> FinishWorkload | None:
    """The finish of ``workload``, an admitted copy a stock MultiKueue manager sent (no
    ``federation.protocol.MANAGER_UID_LABEL``; its Job copy names it as prebuilt), when the started, unfinished Job
    copy ``job`` runs another number of pods than the copy holds quota for (:func:`pod_count_mismatch`): as Kueue
    does on a worker, ``Finished=True`` reason ``OutOfSync`` with Kueue's message, which releases its quota (the Job
    copy is then suspended: :func:`running_out_of_sync`). A Kueue v0.20 manager takes such a copy back and sends it
    again. None otherwise."""
    if not _running(job):
        return None
    labels = (workload.get("metadata") or {}).get("labels") or {}
    if MANAGER_UID_LABEL in labels or prebuilt_workload_name(job) is None:
        return None
    if is_true(workload, FINISHED) or not is_admitted(workload) or pod_count_mismatch(job, workload) is None:
        return None
    return finish_with(workload, REASON_OUT_OF_SYNC, OUT_OF_SYNC_MESSAGE, now=now)


def running_out_of_sync(job: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    """A started, unfinished Job copy whose prebuilt Workload was finished ``OutOfSync``: Kueue suspends it (the
    Workload no longer stands for it), and so does the agent."""
    if not _running(job):
        return False
    finished = find_condition(workload, FINISHED) or {}
    return finished.get("status") == "True" and finished.get("reason") == REASON_OUT_OF_SYNC


def eviction_status(workload: Obj, message: str, *, now: dt.datetime, reason: str = REASON_JOB_COPY_MISSING) -> Obj:
    """``Evicted=True`` reason ``JobCopyMissing`` or ``OutOfSync`` (the status merge patch)."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type="Evicted",
        status=True,
        reason=reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    return {"conditions": conditions, "schedulingStats": scheduling_stats_after(workload, reason)}


__all__ = [
    "DEFAULT_JOB_COPY_TIMEOUT_SECONDS",
    "OUT_OF_SYNC_MESSAGE",
    "REASON_JOB_COPY_MISSING",
    "REASON_OUT_OF_SYNC",
    "JobCopyMissing",
    "JobCopyTimeouts",
    "admitted_since",
    "count_out_of_sync",
    "eviction_status",
    "job_copy_timeouts",
    "out_of_sync",
    "placement_mismatch",
    "pod_count_mismatch",
    "running_out_of_sync",
    "stock_copy_out_of_sync",
    "waits_for_job_copy",
]
