"""``status.schedulingStats.evictions``: how many times a Workload was evicted, per reason, as Kueue counts them.

Why this module exists: Kueue adds one to this count on every eviction it writes (preemption, deactivation, an
admission check, node failures, a stopped queue …), and users read it on the Workload they own. kfed-manager evicts
the manager's Workloads and kfed-agent the worker's (including those of Jobs queued on the worker itself), so both
write the count, the same way, from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.admission.queue_metrics import eviction_labels


def scheduling_stats_after(workload: Mapping[str, Any], cause: str, *, underlying_cause: str = "") -> dict[str, Any]:
    """``status.schedulingStats`` with one more eviction for ``cause`` (an ``Evicted`` reason), counted as Kueue
    counts it: per ``reason`` and ``underlyingCause`` (``DeactivatedDueTo<cause>`` is ``Deactivated`` with that
    cause underneath; ``underlying_cause`` names it for the others, e.g. ``PodsReadyTimeout``'s ``WaitForStart``).
    The whole list is written (a merge patch replaces lists)."""
    reason, underlying = eviction_labels(cause, underlying_cause)
    stats = dict((workload.get("status") or {}).get("schedulingStats") or {})
    evictions = [dict(e) for e in stats.get("evictions") or ()]
    for entry in evictions:
        if entry.get("reason") == reason and (entry.get("underlyingCause") or "") == underlying:
            entry["count"] = int(entry.get("count") or 0) + 1
            break
    else:
        evictions.append({"reason": reason, "underlyingCause": underlying, "count": 1})
    return {**stats, "evictions": evictions}


__all__ = ["scheduling_stats_after"]
