"""Kubernetes-style status conditions on raw objects: read them, and set one without needless writes.

Shared by manager and agent so every condition kfed writes follows the same rules: ``lastTransitionTime`` moves
only when ``status`` changes, and setting a condition to what it already is reports "unchanged" so callers can
skip the API write (no write loops).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

Conditions = list[dict[str, Any]]


def format_time(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with second precision, as metav1.Time serializes."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def conditions_of(obj: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return (obj.get("status") or {}).get("conditions") or ()


def workload_generation(raw: Mapping[str, Any]) -> int | None:
    """``metadata.generation``, which Kueue writes as every Workload condition's ``observedGeneration``."""
    generation = (raw.get("metadata") or {}).get("generation")
    return int(generation) if isinstance(generation, int) else None


def observing_generation(workload: Mapping[str, Any], condition: dict[str, Any]) -> dict[str, Any]:
    """``condition`` with the Workload's generation as ``observedGeneration`` (when it has one)."""
    generation = workload_generation(workload)
    return condition if generation is None else {**condition, "observedGeneration": generation}


def find_condition(obj: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    # A plain loop, not next(generator): the agent's passes ask this of every Workload several times per pass.
    status = obj.get("status")
    if not status:
        return None
    condition: Mapping[str, Any]
    for condition in status.get("conditions") or ():
        if condition.get("type") == condition_type:
            return condition
    return None


def is_true(obj: Mapping[str, Any], condition_type: str) -> bool:
    found = find_condition(obj, condition_type)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    *,
    condition_type: str,
    status: bool,
    reason: str,
    message: str,
    now: dt.datetime,
    observed_generation: int | None = None,
) -> tuple[Conditions, bool]:
    """A copy of ``conditions`` with ``condition_type`` set, and whether anything a reader sees changed."""
    wanted = "True" if status else "False"
    result: Conditions = []
    changed = True
    found = False
    for existing in conditions:
        if existing.get("type") != condition_type:
            result.append(dict(existing))
            continue
        found = True
        same = (
            existing.get("status") == wanted
            and existing.get("reason") == reason
            and existing.get("message") == message
            and (observed_generation is None or existing.get("observedGeneration") == observed_generation)
        )
        if same:
            result.append(dict(existing))
            changed = False
            continue
        updated = {
            "type": condition_type,
            "status": wanted,
            "reason": reason,
            "message": message,
            "lastTransitionTime": existing.get("lastTransitionTime", format_time(now))
            if existing.get("status") == wanted
            else format_time(now),
        }
        if observed_generation is not None:
            updated["observedGeneration"] = observed_generation
        result.append(updated)
    if not found:
        added: dict[str, Any] = {
            "type": condition_type,
            "status": wanted,
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_time(now),
        }
        if observed_generation is not None:
            added["observedGeneration"] = observed_generation
        result.append(added)
    return result, changed
