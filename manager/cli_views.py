"""What `kubectl kfed` shows and builds, as pure functions of the objects it read (the command does only I/O).

Tables follow kubectl's look (upper-case headers, three spaces between columns, ``AGE`` last) and fit an
80-column terminal: the one free-text column (``MESSAGE``, ``WAITING FOR``) is cut to what is left of 80; ``-o
wide`` adds columns and keeps messages whole. Pending positions are Kueue's visibility positions: the order in
which the ClusterQueue (and the LocalQueue) would try the workloads — priority first, then the time the workload
was queued (created, or requeued) — counted from 0.
"""

from __future__ import annotations

import datetime as dt
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.conditions import find_condition, is_true, parse_time
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION
from manager.decisions.lifecycle import phase_of
from manager.decisions.visibility import Position, cluster_queue_of

Obj = Mapping[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
WIDTH = 80
LABEL_WIDTH = 14
"""Where a describe field's value starts (``Message:      ...``)."""


def _field(label: str, text: str) -> list[str]:
    """A describe field, its value wrapped to :data:`WIDTH` under itself: a reason is never cut short."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=label.ljust(LABEL_WIDTH),
        subsequent_indent=" " * LABEL_WIDTH,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [label]


SEP = "   "


def age(created: str | None, now: dt.datetime) -> str:
    if not created:
        return "-"
    seconds = int((now - parse_time(created)).total_seconds())
    # Like kubectl: a unit is used until the next one would read at least 2.
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table(
    header: Sequence[str], rows: Iterable[Sequence[str]], *, squeeze: str | None = None, width: int = WIDTH
) -> str:
    """kubectl's table; the ``squeeze`` column is cut so that every line fits ``width`` (never below 12 chars),
    and the columns close up to two spaces when three do not fit."""
    body = [list(row) for row in rows]
    text = ""
    for sep in (SEP, "  "):
        text = _layout(header, body, squeeze=squeeze, width=width, sep=sep)
        if max(len(line) for line in text.splitlines()) <= width:
            break
    return text


def _layout(header: Sequence[str], rows: list[list[str]], *, squeeze: str | None, width: int, sep: str) -> str:
    all_rows = [list(header), *(list(row) for row in rows)]
    if squeeze is not None and squeeze in header:
        index = list(header).index(squeeze)
        others = sum(max(len(row[i]) for row in all_rows) for i in range(len(header)) if i != index)
        room = max(12, width - others - len(sep) * (len(header) - 1))
        for row in all_rows[1:]:
            if len(row[index]) > room:
                row[index] = row[index][: room - 3] + "..."
    widths = [max(len(row[i]) for row in all_rows) for i in range(len(header))]
    return "\n".join(sep.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in all_rows)


# -- workloads -------------------------------------------------------------------------------------------------


def workload_state(workload: Obj) -> str:
    """The workload's lifecycle phase (``manager.decisions.lifecycle``), as shown in the STATE column."""
    return phase_of(workload).value


def worker_of(workload: Obj) -> str:
    status = workload.get("status") or {}
    return str(status.get("clusterName") or ",".join(status.get("nominatedClusterNames") or []) or "")


def why(workload: Obj) -> str:
    """What the workload waits for, or why it stopped: the message a user needs next to its state."""
    status = workload.get("status") or {}
    state = workload_state(workload)
    if state in {"Pending", "Requeued"}:
        pending = find_condition(workload, "QuotaReserved")
        return str(pending.get("message", "")) if pending else ""
    if state in {"Reserved", "Dispatched"}:  # e.g. a ProvisioningRequest on the worker
        waiting = [c for c in status.get("admissionChecks") or () if c.get("state") != "Ready"]
        return str(waiting[0].get("message") or "") if waiting else ""
    for kind in ("Evicted", "Finished"):
        condition = find_condition(workload, kind)
        if condition is not None and condition.get("status") == "True":
            return str(condition.get("message") or condition.get("reason") or "")
    if state == "Deactivated":
        return "spec.active is false (kubectl kfed resume workload NAME)"
    unplaced = find_condition(workload, PODS_UNSCHEDULABLE_CONDITION)
    if unplaced is not None and unplaced.get("status") == "True":  # admitted, but its worker cannot place the pods
        message = str(unplaced.get("message") or "")
        return message.removeprefix(f"worker cluster {status.get('clusterName')}: ")  # the WORKER column says it
    return ""


_KUEUECTL_STATUS: Mapping[str, Callable[[Obj], bool]] = {
    "all": lambda _w: True,
    "pending": lambda w: not is_true(w, "QuotaReserved") and not is_true(w, "Finished"),
    "quotareserved": lambda w: is_true(w, "QuotaReserved") and not is_true(w, "Admitted"),
    "admitted": lambda w: is_true(w, "Admitted") and not is_true(w, "Finished"),
    "finished": lambda w: is_true(w, "Finished"),
}
STATUSES = sorted({*_KUEUECTL_STATUS, "reserved", "dispatched", "running", "evicting", "requeued", "deactivated"})


@dataclass(frozen=True)
class WorkloadFilter:
    cluster_queue: str | None = None
    local_queue: str | None = None
    statuses: tuple[str, ...] = ()
    """kueuectl's (all, pending, quotareserved, admitted, finished) or kfed's phases, case-insensitive; any matches."""
    worker: str | None = None

    def matches(self, workload: Obj, local_queues: Mapping[str, str]) -> bool:
        if self.cluster_queue is not None and cluster_queue_of(workload, local_queues) != self.cluster_queue:
            return False
        if self.local_queue is not None and (workload.get("spec") or {}).get("queueName") != self.local_queue:
            return False
        if self.worker is not None and self.worker not in worker_of(workload).split(","):
            return False
        if self.statuses:
            phase = workload_state(workload).lower()
            return any(
                _KUEUECTL_STATUS[s](workload) if s in _KUEUECTL_STATUS else s == phase
                for s in (status.lower() for status in self.statuses)
            )
        return True


def owner_job(workload: Obj) -> str:
    for ref in workload["metadata"].get("ownerReferences") or ():
        return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"
    return ""


def render_workloads(
    workloads: Iterable[Obj],
    *,
    now: dt.datetime,
    all_namespaces: bool,
    wide: bool = False,
    local_queues: Mapping[str, str] | None = None,
    positions: Mapping[str, tuple[int, int]] | None = None,
) -> str:
    local_queues = local_queues or {}
    positions = positions or {}
    header = ["NAMESPACE"] if all_namespaces else []
    header += ["NAME", "QUEUE", "STATE", "WORKER"]
    if wide:
        header += ["CLUSTERQUEUE", "POSITION", "PRIORITY", "JOB"]
    header += ["MESSAGE", "AGE"]
    rows = []
    for wl in sorted(workloads, key=lambda w: (w["metadata"].get("namespace", ""), w["metadata"]["name"])):
        key = f"{wl['metadata'].get('namespace', '')}/{wl['metadata']['name']}"
        row = [wl["metadata"].get("namespace", "")] if all_namespaces else []
        row += [
            wl["metadata"]["name"],
            str((wl.get("spec") or {}).get("queueName", "")),
            workload_state(wl),
            worker_of(wl) or "-",
        ]
        if wide:
            position = positions.get(key)
            row += [
                cluster_queue_of(wl, local_queues) or "-",
                str(position[0]) if position else "-",
                str((wl.get("spec") or {}).get("priority", 0)),
                owner_job(wl) or "-",
            ]
        row += [why(wl), age(wl["metadata"].get("creationTimestamp"), now)]
        rows.append(row)
    return table(header, rows, squeeze=None if wide else "MESSAGE")


# -- pending positions -----------------------------------------------------------------------------------------


def render_pending(positions: Sequence[Position], *, now: dt.datetime, wide: bool = False) -> str:
    """Positions counted from 0, as Kueue's visibility API; ``wide`` adds the priority and keeps messages whole."""
    header = ["CLUSTERQUEUE", "POS", "LQ-POS", "NAMESPACE", "NAME"]
    header += ["PRIORITY", "WAITING FOR", "AGE"] if wide else ["WAITING FOR", "AGE"]
    rows = []
    for p in positions:
        row = [
            p.cluster_queue,
            str(p.in_cluster_queue),
            str(p.in_local_queue),
            str(p.workload["metadata"].get("namespace", "")),
            str(p.workload["metadata"]["name"]),
        ]
        if wide:
            row.append(str((p.workload.get("spec") or {}).get("priority") or 0))
        row += [why(p.workload) or "not tried yet", age(p.workload["metadata"].get("creationTimestamp"), now)]
        rows.append(row)
    return table(header, rows, squeeze=None if wide else "WAITING FOR")


# -- queues ----------------------------------------------------------------------------------------------------


def _active(obj: Obj) -> str:
    condition = find_condition(obj, "Active")
    return str(condition.get("status", "Unknown")) if condition else "Unknown"


def render_cluster_queues(queues: Iterable[Obj], *, now: dt.datetime, wide: bool = False) -> str:
    header = ["NAME", "COHORT", "PENDING", "ADMITTED", "ACTIVE", "STOP"]
    if wide:
        header += ["STRATEGY", "USAGE"]
    header.append("AGE")
    rows = []
    for q in sorted(queues, key=lambda o: o["metadata"]["name"]):
        spec, status = q.get("spec") or {}, q.get("status") or {}
        row = [
            q["metadata"]["name"],
            str(spec.get("cohortName") or "-"),
            str(status.get("pendingWorkloads", 0)),
            str(status.get("admittedWorkloads", 0)),
            _active(q),
            str(spec.get("stopPolicy") or "None"),
        ]
        if wide:
            usage = [
                f"{fl['name']}:{r['name']}={r.get('total', '0')}"
                for fl in status.get("flavorsReservation") or ()
                for r in fl.get("resources") or ()
            ]
            row += [str(spec.get("queueingStrategy") or "BestEffortFIFO"), ",".join(usage) or "-"]
        row.append(age(q["metadata"].get("creationTimestamp"), now))
        rows.append(row)
    return table(header, rows)


def render_local_queues(queues: Iterable[Obj], *, now: dt.datetime, all_namespaces: bool) -> str:
    header = ["NAMESPACE"] if all_namespaces else []
    header += ["NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED", "ACTIVE", "STOP", "AGE"]
    rows = []
    for q in sorted(queues, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])):
        spec, status = q.get("spec") or {}, q.get("status") or {}
        row = [q["metadata"].get("namespace", "")] if all_namespaces else []
        row += [
            q["metadata"]["name"],
            str(spec.get("clusterQueue", "")),
            str(status.get("pendingWorkloads", 0)),
            str(status.get("admittedWorkloads", 0)),
            _active(q),
            str(spec.get("stopPolicy") or "None"),
            age(q["metadata"].get("creationTimestamp"), now),
        ]
        rows.append(row)
    return table(header, rows)


def render_workers(clusters: Iterable[Obj], *, now: dt.datetime) -> str:
    rows = []
    for cluster in sorted(clusters, key=lambda c: c["metadata"]["name"]):
        active = find_condition(cluster, "Active")
        rows.append(
            [
                cluster["metadata"]["name"],
                str(active.get("status", "Unknown")) if active else "Unknown",
                str(active.get("reason", "")) if active else "",
                str(active.get("message", "")) if active else "not reconciled yet (is kfed-manager running?)",
                age(cluster["metadata"].get("creationTimestamp"), now),
            ]
        )
    return table(["WORKER", "CONNECTED", "REASON", "MESSAGE", "AGE"], rows, squeeze="MESSAGE")


def render_pods(pods: Iterable[Obj], *, now: dt.datetime, worker: str) -> str:
    rows = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        status = pod.get("status") or {}
        containers = status.get("containerStatuses") or ()
        ready = sum(1 for c in containers if c.get("ready"))
        total = len((pod.get("spec") or {}).get("containers") or ()) or len(containers)
        rows.append(
            [
                pod["metadata"]["name"],
                f"{ready}/{total}",
                str(status.get("phase", "")),
                str(sum(int(c.get("restartCount") or 0) for c in containers)),
                str((pod.get("spec") or {}).get("nodeName") or "-"),
                worker,
                age(pod["metadata"].get("creationTimestamp"), now),
            ]
        )
    return table(["NAME", "READY", "STATUS", "RESTARTS", "NODE", "WORKER", "AGE"], rows)


# -- describe --------------------------------------------------------------------------------------------------


def _conditions(obj: Obj | None, *, now: dt.datetime) -> list[str]:
    if obj is None:
        return ["  (none)"]
    rows = [
        [
            str(c.get("type", "")),
            str(c.get("status", "")),
            str(c.get("reason", "")),
            age(c.get("lastTransitionTime"), now),
            str(c.get("message", "")),
        ]
        for c in (obj.get("status") or {}).get("conditions") or ()
    ]
    if not rows:
        return ["  (none)"]
    text = table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows, squeeze="MESSAGE", width=WIDTH - 2)
    return ["  " + line for line in text.splitlines()]


@dataclass(frozen=True)
class EventView:
    side: str
    """``manager`` or the worker's name."""
    event: Obj


def _event_time(event: Obj) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or event["metadata"].get("creationTimestamp")
        or ""
    )


def describe_job(
    *,
    job: Obj,
    workload: Obj | None,
    worker: str | None,
    remote_workload: Obj | None,
    remote_job: Obj | None,
    pods: Sequence[Obj],
    events: Sequence[EventView],
    now: dt.datetime,
    problems: Sequence[str] = (),
) -> str:
    """A Job followed across the federation: its Workload, the worker, the remote Workload, pods and events."""
    meta = job["metadata"]
    js = job.get("status") or {}
    suspended = (job.get("spec") or {}).get("suspend")
    finished = next(
        (
            c["type"]
            for c in js.get("conditions") or ()
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ),
        None,
    )
    job_state = finished or ("Suspended" if suspended else "Running")
    lines = [
        f"Name:         {meta['name']}",
        f"Namespace:    {meta.get('namespace', '')}",
        f"Queue:        {(meta.get('labels') or {}).get('kueue.x-k8s.io/queue-name', '-')}",
        f"Job:          {job_state} (active {js.get('active', 0)}, succeeded {js.get('succeeded', 0)}, "
        f"failed {js.get('failed', 0)})",
    ]
    if workload is None:
        lines.append("Workload:     none yet (kfed-manager creates one for a Job with a queue-name label)")
    else:
        admission = (workload.get("status") or {}).get("admission") or {}
        lines += [
            f"Workload:     {workload['metadata']['name']} ({workload_state(workload)})",
            f"ClusterQueue: {admission.get('clusterQueue', '-')}",
            f"Worker:       {worker or '-'}",
        ]
        reason = why(workload)
        if reason:
            lines += _field("Message:", reason)
        lines += ["Conditions (manager Workload):", *_conditions(workload, now=now)]
    if worker:
        lines += [f"Conditions (Workload copy on {worker}):", *_conditions(remote_workload, now=now)]
        if remote_job is not None:
            rs = remote_job.get("status") or {}
            lines.append(
                f"Job copy on {worker}: active {rs.get('active', 0)}, succeeded {rs.get('succeeded', 0)}, "
                f"failed {rs.get('failed', 0)}"
            )
        lines.append(f"Pods (on {worker}):")
        lines += (
            ["  " + line for line in render_pods(pods, now=now, worker=worker).splitlines()] if pods else ["  (none)"]
        )
    lines.append("Events:")
    ordered = sorted(events, key=lambda e: _event_time(e.event))[-20:]
    if ordered:
        rows = [
            [
                age(_event_time(e.event) or None, now),
                e.side,
                f"{str((e.event.get('involvedObject') or {}).get('kind', '')).lower()}/"
                f"{(e.event.get('involvedObject') or {}).get('name', '')}",
                str(e.event.get("reason", "")),
                str(e.event.get("message") or e.event.get("note") or ""),
            ]
            for e in ordered
        ]
        text = table(["AGE", "FROM", "OBJECT", "REASON", "MESSAGE"], rows, squeeze="MESSAGE", width=WIDTH - 2)
        lines += ["  " + line for line in text.splitlines()]
    else:
        lines.append("  (none)")
    for problem in problems:
        lines += _field("Note:", problem)
    return "\n".join(lines)


# -- create ----------------------------------------------------------------------------------------------------


def _resource_list(text: str) -> dict[str, dict[str, str]]:
    """kueuectl's quota syntax: ``flavor:cpu=1;memory=1Gi,other:cpu=2`` → flavor → resource → amount."""
    out: dict[str, dict[str, str]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        flavor, sep, resources = part.partition(":")
        if not sep or not flavor:
            raise ValueError(f"{part!r}: expected FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...]")
        for item in filter(None, (r.strip() for r in resources.split(";"))):
            name, eq, amount = item.partition("=")
            if not eq or not name or not amount:
                raise ValueError(f"{item!r}: expected RESOURCE=QUANTITY")
            out.setdefault(flavor, {})[name] = amount
    return out


def cluster_queue_object(
    name: str,
    *,
    cohort: str | None = None,
    queuing_strategy: str | None = None,
    namespace_selector: Mapping[str, str] | None = None,
    reclaim_within_cohort: str | None = None,
    preemption_within_cluster_queue: str | None = None,
    nominal_quota: str = "",
    borrowing_limit: str = "",
    lending_limit: str = "",
    admission_checks: Sequence[str] = (),
) -> dict[str, Any]:
    nominal, borrowing, lending = (_resource_list(t) for t in (nominal_quota, borrowing_limit, lending_limit))
    for flavor in [*borrowing, *lending]:
        if flavor not in nominal:
            raise ValueError(f"flavor {flavor} has a limit but no --nominal-quota")
    covered = sorted({r for per in nominal.values() for r in per})
    flavors = []
    for flavor, resources in nominal.items():
        entries = []
        for resource in covered:
            entry: dict[str, Any] = {"name": resource, "nominalQuota": resources.get(resource, "0")}
            if resource in borrowing.get(flavor, {}):
                entry["borrowingLimit"] = borrowing[flavor][resource]
            if resource in lending.get(flavor, {}):
                entry["lendingLimit"] = lending[flavor][resource]
            entries.append(entry)
        flavors.append({"name": flavor, "resources": entries})
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": dict(namespace_selector)} if namespace_selector else {},
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}] if flavors else [],
    }
    if cohort:
        spec["cohortName"] = cohort
    if queuing_strategy:
        spec["queueingStrategy"] = queuing_strategy
    preemption = {}
    if reclaim_within_cohort:
        preemption["reclaimWithinCohort"] = reclaim_within_cohort
    if preemption_within_cluster_queue:
        preemption["withinClusterQueue"] = preemption_within_cluster_queue
    if preemption:
        spec["preemption"] = preemption
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check} for check in admission_checks]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue_object(name: str, *, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def resource_flavor_object(
    name: str, *, node_labels: Mapping[str, str] | None = None, node_taints: Sequence[str] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    taints = []
    for text in node_taints:  # kubectl taint syntax: key[=value]:Effect
        pair, sep, effect = text.rpartition(":")
        if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(f"{text!r}: expected KEY[=VALUE]:NoSchedule|PreferNoSchedule|NoExecute")
        key, _, value = pair.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def key_values(text: str | None) -> dict[str, str]:
    """``a=1,b=2`` → ``{"a": "1", "b": "2"}``."""
    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in (text or "").split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"{item!r}: expected KEY=VALUE")
        out[key] = value
    return out
