"""Kueue's reclaimable pods for a batch/v1 Job (pure): quota a running Job no longer needs is given back early.

A Job running ``parallelism`` pods at once with ``completions`` to reach needs fewer pods once the work left is less
than a full round: with ``remaining = completions - terminal``, the pods past ``remaining`` will never run again, so
``parallelism - remaining`` of them are reclaimable. ``terminal`` is ``status.succeeded``; for an Indexed Job, the
indexes in ``status.completedIndexes`` and ``status.failedIndexes`` together (an index that failed for good, under
``backoffLimitPerIndex``, is not run again either). A one-pod Job, or one with nothing terminal, reclaims nothing;
``parallelism`` above ``completions`` counts as ``completions``, the pods the Workload holds quota for.
This is Kueue's ``ReclaimablePods`` (Beta, on by default since v0.15), including v0.20's counting of failed indexes.

The Workload says it in ``status.reclaimablePods`` (per pod set, Kueue's pod set of a Job is ``main``), and every
quota count reads it (:func:`usable_count`): a ClusterQueue's usage of the Workload is its per-pod usage times the
pods it may still run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.api.workload import DEFAULT_PODSET_NAME
from federation.conditions import is_true

Obj = Mapping[str, Any]


def _index_ranges(text: str, limit: int) -> list[tuple[int, int]]:
    """``"1,3-5"`` → ``[(1, 1), (3, 5)]``, cut at ``limit - 1``; pieces that are not ranges of numbers are skipped."""
    ranges = []
    for piece in text.split(","):
        first_text, _, last_text = piece.strip().partition("-")
        try:
            first = int(first_text)
            last = int(last_text) if last_text else first
        except ValueError:
            continue
        last = min(last, limit - 1)
        if 0 <= first <= last:
            ranges.append((first, last))
    return ranges


def terminal_indexes(completed: str, failed: str, completions: int) -> int:
    """How many distinct indexes below ``completions`` the two index lists name together."""
    if completions <= 0:
        return 0
    count, reached = 0, -1
    for first, last in sorted(_index_ranges(completed, completions) + _index_ranges(failed, completions)):
        start = max(first, reached + 1)
        if start <= last:
            count += last - start + 1
            reached = last
    return count


def reclaimable_pods(job: Obj) -> list[dict[str, Any]]:
    """The Job's ``status.reclaimablePods`` as Kueue computes it (an empty list: none)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    given_parallelism, given_completions = spec.get("parallelism"), spec.get("completions")
    parallelism = 1 if given_parallelism is None else int(given_parallelism)
    completions = parallelism if given_completions is None else int(given_completions)
    # no more pods run at once than there are completions: the Workload's pod count (Kueue v0.20, #16111)
    parallelism = min(parallelism, completions)
    if spec.get("completionMode") == "Indexed":
        terminal = terminal_indexes(
            str(status.get("completedIndexes") or ""), str(status.get("failedIndexes") or ""), completions
        )
    else:
        terminal = int(status.get("succeeded") or 0)
    if parallelism <= 1 or terminal <= 0:
        return []
    remaining = max(completions - terminal, 0)
    if remaining >= parallelism:
        return []
    return [{"name": DEFAULT_PODSET_NAME, "count": parallelism - remaining}]


def recorded(workload: Obj) -> list[dict[str, Any]]:
    """The Workload's ``status.reclaimablePods`` as written (an empty list: none), to compare with a new count."""
    return [
        {"name": str(entry.get("name")), "count": int(entry.get("count") or 0)}
        for entry in (workload.get("status") or {}).get("reclaimablePods") or ()
        if int(entry.get("count") or 0) > 0
    ]


def reclaimable_update(job: Obj, workload: Obj) -> list[dict[str, Any]] | None:
    """The ``status.reclaimablePods`` to write on ``workload`` for its ``job`` (the list as Kueue would have it), or
    None when nothing is to be written: it holds no quota, it finished, or it already says so."""
    if not ((workload.get("status") or {}).get("admission")) or is_true(workload, "Finished"):
        return None
    wanted = reclaimable_pods(job)
    return wanted if wanted != recorded(workload) else None


def usable_count(workload: Obj, pod_set: str, count: int) -> int:
    """Of the ``count`` pods a pod set was admitted with, how many still hold quota."""
    for entry in (workload.get("status") or {}).get("reclaimablePods") or ():
        if entry.get("name") == pod_set:
            return max(0, count - int(entry.get("count") or 0))
    return count
