"""Count API writes from the apiservers' audit logs, by client (user agent) and verb; time each Job's steps.

The rig's audit policy records every create/update/patch/delete at Metadata level, so counting lines is exact:
no client-side counter can forget a retried request.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def client_of(user_agent: str) -> str:
    """``kfed-manager/0.1.0 ...`` → ``kfed-manager``; kube components keep their binary name."""
    return user_agent.split("/", 1)[0].split(" ", 1)[0] or "unknown"


def count_writes(lines: Iterable[str]) -> Counter[tuple[str, str, str]]:
    """(client, verb, resource) → number of completed write requests."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        counts[(client_of(event.get("userAgent", "")), event["verb"], resource)] += 1
    return counts


def writes_in(path: Path) -> Counter[tuple[str, str, str]]:
    if not path.exists():
        return Counter()
    with path.open(encoding="utf-8", errors="replace") as handle:
        return count_writes(handle)


@dataclass(frozen=True, slots=True)
class Call:
    """One completed request an audit log recorded."""

    client: str
    """``kfed-manager``, ``kube-controller-manager``… (:func:`client_of`)"""
    verb: str
    resource: str
    """With its subresource: ``jobs``, ``workloads/status``."""
    key: str
    """``namespace/name`` (``/name`` for a cluster-scoped object)."""
    code: int
    at: float | None
    """When the apiserver received it (epoch seconds)."""
    selector: str = ""
    """The request's ``labelSelector`` (a list, a watch, a deletecollection); "" without one."""

    @property
    def accepted(self) -> bool:
        return 200 <= self.code < 300

    def selected(self, label: str) -> set[str]:
        """The values a set-based term ``label in (a,b)`` of :attr:`selector` names (empty without one)."""
        found = re.search(rf"(?:^|,){re.escape(label)} in \(([^)]*)\)", self.selector)
        return {value.strip() for value in found[1].split(",") if value.strip()} if found else set()


def calls(lines: Iterable[str]) -> Iterator[Call]:
    """Every completed request of one cluster's audit log, in the log's order."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete":
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        yield Call(
            client=client_of(event.get("userAgent", "")),
            verb=str(event.get("verb", "")),
            resource=resource,
            key=f"{ref.get('namespace', '')}/{ref.get('name', '')}",
            code=int((event.get("responseStatus") or {}).get("code", 0)),
            at=_stamp(event),
            selector=_label_selector(str(event.get("requestURI", ""))),
        )


def created_names(path: Path, *, resource: str, client: str) -> list[str]:
    """``namespace/name`` of every object of ``resource`` that ``client`` created successfully."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8", errors="replace") as handle:
        return [
            call.key
            for call in calls(handle)
            if call.verb == "create" and call.resource == resource and call.client == client and call.accepted
        ]


def _label_selector(uri: str) -> str:
    if "labelSelector=" not in uri:
        return ""
    return (parse_qs(urlsplit(uri).query).get("labelSelector") or [""])[0]


def _stamp(event: dict[str, object]) -> float | None:
    text = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
    if not isinstance(text, str):
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _served_seconds(event: dict[str, object]) -> float | None:
    received, done = event.get("requestReceivedTimestamp"), event.get("stageTimestamp")
    if not isinstance(received, str) or not isinstance(done, str):
        return None
    parse = dt.datetime.fromisoformat
    return (parse(done.replace("Z", "+00:00")) - parse(received.replace("Z", "+00:00"))).total_seconds()


def job_of_pod(pod: str) -> str:
    """A Job's pods are named ``<job>-<5 random characters>``."""
    return pod.rsplit("-", 1)[0]


@dataclass
class JobTimes:
    """Per ``namespace/name`` of a Job, the wall-clock seconds at which the audit log saw each step (None: not seen).

    submitted: the first successful create of the Job by the submitting client (kubectl);
    create_seconds: how long the apiserver took to serve that create (received → response complete): how loaded
    the cluster the user submits to was, as the user felt it;
    running: the first write of its pod's status by the node agent (kwok plays kubelet: Running is its first write);
    finished: the last write of the Job's status on the cluster it was submitted to (the Complete one).
    """

    submitted: dict[str, float] = field(default_factory=dict)
    create_seconds: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)

    def only(self, keys: set[str]) -> JobTimes:
        """These times for the Jobs named by ``keys`` alone (a benchmark's own burst, not the Jobs its rig created
        while it came up, e.g. an admission-policy probe: those would start the clock early)."""
        return JobTimes(
            {k: v for k, v in self.submitted.items() if k in keys},
            {k: v for k, v in self.create_seconds.items() if k in keys},
            {k: v for k, v in self.running.items() if k in keys},
            {k: v for k, v in self.finished.items() if k in keys},
        )

    def merge(self, other: JobTimes) -> None:
        self.submitted.update(other.submitted)
        self.create_seconds.update(other.create_seconds)
        for key, value in other.running.items():
            self.running[key] = min(value, self.running.get(key, value))
        for key, value in other.finished.items():
            self.finished[key] = max(value, self.finished.get(key, value))


def job_times(
    lines: Iterable[str], *, submitter: str = "kubectl", node_agent: str = "kwok", finish_here: bool = True
) -> JobTimes:
    """The steps of every Job one cluster's audit log shows (``finish_here``: Jobs are submitted to this cluster, so
    the last status write of a Job there is when its user sees it finish)."""
    times = JobTimes()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") != "ResponseComplete" or event.get("verb") not in WRITE_VERBS:
            continue
        code = (event.get("responseStatus") or {}).get("code", 0)
        if not 200 <= code < 300:
            continue
        ref = event.get("objectRef") or {}
        resource, sub = ref.get("resource"), ref.get("subresource", "")
        key = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
        client = client_of(event.get("userAgent", ""))
        at = _stamp(event)
        if at is None:
            continue
        if resource == "jobs" and not sub and event["verb"] == "create" and client == submitter:
            if key not in times.submitted:
                times.submitted[key] = at
                served = _served_seconds(event)
                if served is not None:
                    times.create_seconds[key] = served
        elif resource == "pods" and sub == "status" and client == node_agent:
            job = f"{ref.get('namespace', '')}/{job_of_pod(ref.get('name', ''))}"
            times.running.setdefault(job, at)
        elif resource == "jobs" and sub == "status" and finish_here:
            times.finished[key] = max(at, times.finished.get(key, at))
    return times


def job_times_in(path: Path, **kwargs: Any) -> JobTimes:
    if not path.exists():
        return JobTimes()
    with path.open(encoding="utf-8", errors="replace") as handle:
        return job_times(handle, **kwargs)


def conflicts_in(path: Path) -> Counter[tuple[str, str]]:
    """(client, resource) → write requests answered 409 Conflict."""
    counts: Counter[tuple[str, str]] = Counter()
    if not path.exists():
        return counts
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if '"code":409' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("stage") != "ResponseComplete" or (event.get("responseStatus") or {}).get("code") != 409:
                continue
            ref = event.get("objectRef") or {}
            resource = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
            counts[(client_of(event.get("userAgent", "")), resource)] += 1
    return counts
