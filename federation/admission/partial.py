"""Partial admission: when a workload does not fit whole, find the largest pod counts that do (``minCount``).

Every pod set with ``minCount`` below its ``count`` may shrink; they shrink together, each by the same fraction of
its own range ``count - minCount``, and a binary search finds the smallest reduction that an attempt accepts. The
attempt is any function of the pod counts (the scheduler passes "flavor assignment fits or finds victims"), so the
search is independent of quota details and assumes only that fewer pods never fit worse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from federation.admission.model import PodSet

__all__ = ["largest_fitting_counts", "may_shrink"]

T = TypeVar("T")


def may_shrink(pod_sets: Sequence[PodSet]) -> bool:
    """Whether any pod set allows fewer pods than requested."""
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in pod_sets)


def largest_fitting_counts(pod_sets: Sequence[PodSet], attempt: Callable[[tuple[int, ...]], T | None]) -> T | None:
    """The result of ``attempt`` at the largest reduced counts it accepts, or ``None`` if even ``minCount`` fails.

    ``attempt`` is never called with the full counts (the caller already tried those).
    """
    ranges = [ps.count - ps.min_count if ps.min_count is not None and ps.min_count < ps.count else 0 for ps in pod_sets]
    total = sum(ranges)
    if total == 0:
        return None

    def counts_at(step: int) -> tuple[int, ...]:
        return tuple(ps.count - span * step // total for ps, span in zip(pod_sets, ranges, strict=True))

    best = attempt(counts_at(total))
    if best is None:
        return None
    low, high = 1, total  # the answer lies in [low, high]; ``best`` holds the result at ``high``
    while low < high:
        middle = (low + high) // 2
        result = attempt(counts_at(middle))
        if result is None:
            low = middle + 1
        else:
            high, best = middle, result
    return best
