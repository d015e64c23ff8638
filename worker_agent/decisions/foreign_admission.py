"""Another admission controller on kfed-agent's cluster, told from a Workload's ``managedFields`` (pure).

Why this module exists: a team moving a worker from Kueue to kfed-agent may install kfed-agent before it
uninstalls Kueue. Both then admit the cluster's Workloads, each by its own reading of the same quota, and neither
knows of the other. kfed-agent cannot stop Kueue, but it can see it: Kueue's scheduler writes a Workload's
``status.admission`` with server-side apply as field manager ``kueue-admission``, and the apiserver records that in
``metadata.managedFields``. A Workload whose admission appears while kfed-agent watches, owned by a field manager
that is not kfed-agent's, was admitted by another controller just now. (Workloads Kueue admitted before kfed-agent
started are not news: only a change kfed-agent saw happen counts, so the clocks of the two never matter.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OWN_FIELD_MANAGER = "kfed-agent"

ADMITTED_ELSEWHERE_REASON = "AdmittedByAnotherController"


def newly_admitted_by(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """The field manager that just wrote ``new``'s ``status.admission``, when it is not kfed-agent (None otherwise,
    and when ``old`` was admitted already or is not known)."""
    if old is None or (old.get("status") or {}).get("admission") or not (new.get("status") or {}).get("admission"):
        return None
    for entry in (new.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, Mapping):
            continue
        status = ((entry.get("fieldsV1") or {}).get("f:status")) or {}
        if isinstance(status, Mapping) and "f:admission" in status:
            manager = str(entry.get("manager") or "")
            return manager if manager and manager != OWN_FIELD_MANAGER else None
    return None


def admitted_elsewhere_message(manager: str, workload: str) -> str:
    """What the Warning Event and the log line say."""
    return (
        f"Workload {workload} was just admitted by another controller (field manager {manager}), not by kfed-agent: "
        "two admission controllers on one cluster each admit by their own view of the same quota. If Kueue still runs "
        "on this cluster, uninstall it: kfed-agent plays its part"
    )
