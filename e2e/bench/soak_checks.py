"""The chaos soak's invariants, computed from audit-log events and sampled API objects (pure, unit-tested).

* **One worker at a time.** Each pod of a Job copy is alive, as far as the rig can tell, from the first status
  write of its node agent (kwok plays kubelet: Running is its first write) to the last write that touches it (its
  Succeeded status, its deletion). Two pods of the same Job on different workers alive at overlapping times break
  the invariant. A worker frozen past the worker-lost timeout is a partition: the manager requeues its Jobs without
  being able to stop them there (README: the trade-off), so its pods count as alive only until the freeze began,
  and how long such stale pods lived after the worker came back is reported on its own.
* **Quota.** In every sampled list of the manager's Workloads, the usage of those holding a reservation
  (``QuotaReserved``, not ``Finished``) stays within each ClusterQueue's nominal quota plus borrowing limit.
* **Recovery.** For a fault on a worker, the Jobs that had pods alive there when it began and had not finished:
  how long until a new pod of theirs was Running again (anywhere).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e.rig.audit import WRITE_VERBS, calls, client_of, job_of_pod
from federation.quantity import parse_quantity

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodLife:
    worker: str
    job: str
    pod: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Freeze:
    worker: str
    start: float
    end: float
    past_timeout: bool


def _stamp(event: Obj) -> float | None:
    text = event.get("stageTimestamp") or event.get("requestReceivedTimestamp")
    if not isinstance(text, str):
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pod_lives(lines: Iterable[str], *, worker: str, node_agent: str = "kwok") -> list[PodLife]:
    """Every pod of one worker's audit log that its node agent ran, with when it was first and last touched."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for line in lines:
        if '"pods"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        code = (event.get("responseStatus") or {}).get("code", 0)
        ref = event.get("objectRef") or {}
        if ref.get("resource") != "pods" or not 200 <= code < 300:
            continue
        at = _stamp(event)
        if at is None:
            continue
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        if key not in first:
            if ref.get("subresource") == "status" and client_of(event.get("userAgent", "")) == node_agent:
                first[key] = at
                last[key] = at
            continue
        last[key] = max(at, last[key])
    return [
        PodLife(worker=worker, job=job_of_pod(key), pod=key, start=start, end=last[key]) for key, start in first.items()
    ]


def deletes(lines: Iterable[str], *, resources: Collection[str], client: str) -> dict[str, list[float]]:
    """``namespace/name`` → when ``client`` (``kfed-manager``) had an object of one of ``resources`` deleted (each
    DELETE the apiserver accepted, in order), from one cluster's audit log."""
    found: dict[str, list[float]] = {}
    for call in calls(lines):
        ours = call.verb == "delete" and call.resource in resources and call.client == client
        if ours and call.accepted and call.at is not None:
            found.setdefault(call.key, []).append(call.at)
    return {key: sorted(times) for key, times in found.items()}


def clip_to_partitions(lives: Iterable[PodLife], freezes: Iterable[Freeze]) -> tuple[list[PodLife], list[float]]:
    """Pod lives cut at the start of a partition of their worker (a freeze past the worker-lost timeout) they were
    alive across, and how long each cut pod lived on after its worker came back (stale, deleted on return)."""
    partitions = [f for f in freezes if f.past_timeout]
    clipped: list[PodLife] = []
    stale: list[float] = []
    for life in lives:
        cut = next((f for f in partitions if f.worker == life.worker and life.start < f.start < life.end), None)
        if cut is None:
            clipped.append(life)
            continue
        clipped.append(PodLife(life.worker, life.job, life.pod, life.start, cut.start))
        stale.append(max(0.0, life.end - cut.end))
    return clipped, stale


def overlaps(lives: Iterable[PodLife]) -> list[tuple[PodLife, PodLife]]:
    """Pairs of pods of the same Job on different workers alive at the same time."""
    by_job: dict[str, list[PodLife]] = {}
    for life in lives:
        by_job.setdefault(life.job, []).append(life)
    found = []
    for group in by_job.values():
        group.sort(key=lambda life: life.start)
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if b.start >= a.end:
                    break
                if b.worker != a.worker:
                    found.append((a, b))
    return found


def _usage(workload: Obj) -> dict[tuple[str, str], int]:
    usage: dict[tuple[str, str], int] = {}
    for psa in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
        flavors = psa.get("flavors") or {}
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            key = (str(flavors.get(resource, "")), str(resource))
            usage[key] = usage.get(key, 0) + parse_quantity(str(amount))
    return usage


def _true(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or ()
    )


def quota_limits(cluster_queue: Obj) -> dict[tuple[str, str], int]:
    """(flavor, resource) → nominal quota plus borrowing limit (no limit: nominal only, the queue has no cohort)."""
    limits: dict[tuple[str, str], int] = {}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                total = parse_quantity(str(resource.get("nominalQuota", "0")))
                if resource.get("borrowingLimit") is not None:
                    total += parse_quantity(str(resource["borrowingLimit"]))
                limits[(str(flavor["name"]), str(resource["name"]))] = total
    return limits


@dataclass
class QuotaSamples:
    samples: int = 0
    violations: list[str] = field(default_factory=list)
    peak_share: float = 0.0
    """The highest reserved/limit ratio seen for any queue, flavor and resource."""

    def add(self, workloads: Iterable[Obj], cluster_queues: Mapping[str, Obj]) -> None:
        self.samples += 1
        reserved: dict[str, dict[tuple[str, str], int]] = {}
        for wl in workloads:
            if not _true(wl, "QuotaReserved") or _true(wl, "Finished"):
                continue
            queue = str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
            into = reserved.setdefault(queue, {})
            for key, amount in _usage(wl).items():
                into[key] = into.get(key, 0) + amount
        for queue, usage in reserved.items():
            limits = quota_limits(cluster_queues[queue]) if queue in cluster_queues else {}
            for key, amount in usage.items():
                limit = limits.get(key)
                if limit is None or amount > limit:
                    self.violations.append(f"{queue} {key[0]}/{key[1]}: {amount} reserved, limit {limit}")
                elif limit:
                    self.peak_share = max(self.peak_share, amount / limit)


def recovered_jobs(
    lives: Iterable[PodLife],
    *,
    worker: str,
    at: float,
    finished: Mapping[str, float],
    jobs: Collection[str] | None = None,
    elsewhere: bool = False,
) -> dict[str, float]:
    """Seconds from a fault on ``worker`` at ``at`` until each affected Job (a pod alive there then, not finished;
    only ``jobs`` when given) had a new pod Running — on another worker only with ``elsewhere``; by Job. Jobs that
    never ran again are left out (the caller counts them as unfinished)."""
    lives = list(lives)
    affected = {
        life.job
        for life in lives
        if life.worker == worker
        and life.start <= at < life.end
        and finished.get(life.job, float("inf")) > at
        and (jobs is None or life.job in jobs)
    }
    times = {}
    for job in affected:
        again = [
            life.start
            for life in lives
            if life.job == job and life.start > at and not (elsewhere and life.worker == worker)
        ]
        if again:
            times[job] = min(again) - at
    return times
