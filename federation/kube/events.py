"""Building ``events.k8s.io/v1`` Events (the ones ``kubectl describe`` shows) as plain dicts.

Pure so the exact shape the apiserver validates (eventTime, reportingController, action, length limits) is unit
tested; :meth:`federation.kube.api.KubeApi.create_event` sends it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

MAX_NOTE_BYTES = 1024
MAX_REASON_CHARS = 128
MAX_NAME_CHARS = 253


def micro_time(now: dt.datetime) -> str:
    """Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "..."


def object_reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """An ObjectReference to a raw object (apiVersion, kind, namespace, name, uid, resourceVersion)."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
        "resourceVersion": str(meta.get("resourceVersion", "")),
    }
    return {k: v for k, v in ref.items() if v}


def event_name(regarding_name: str, now: dt.datetime) -> str:
    """``<name>.<unix nanoseconds in hex>`` like client-go, with the object's name shortened so the result stays a
    valid object name (at most 253 characters) even for objects whose own name is already that long."""
    suffix = f".{int(now.timestamp() * 1e9):x}"
    prefix = regarding_name[: MAX_NAME_CHARS - len(suffix)].rstrip(".-") or "event"
    return prefix + suffix


def build_event(
    regarding: Mapping[str, Any],
    *,
    reason: str,
    note: str,
    action: str,
    reporting_controller: str,
    reporting_instance: str,
    event_type: str = "Normal",
    now: dt.datetime,
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event about ``regarding`` (cluster-scoped objects get their Events in ``default``)."""
    if event_type not in ("Normal", "Warning"):
        raise ValueError(f"event type must be Normal or Warning, got {event_type!r}")
    ref = object_reference(regarding)
    name = ref.get("name", "unknown")
    namespace = ref.get("namespace") or "default"
    stamp = micro_time(now)
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": event_name(name, now), "namespace": namespace},
        "eventTime": stamp,
        "reportingController": reporting_controller,
        "reportingInstance": reporting_instance,
        "action": action[:MAX_REASON_CHARS],
        "reason": reason[:MAX_REASON_CHARS],
        "note": _truncate_utf8(note, MAX_NOTE_BYTES),
        "type": event_type,
        "regarding": ref,
    }
