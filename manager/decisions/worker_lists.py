"""Reading kfed's Workload annotations that list worker clusters (pure).

``kfed.io/excluded-clusters``, ``kfed.io/withdrawn-from`` (``manager.decisions.withdrawal``) and
``kfed.io/refused-by`` (``manager.decisions.refusals``) each hold comma-separated worker names; this is the one
reader of that form, so both modules parse it alike (spaces and empty parts ignored).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def workers_in(workload: Mapping[str, Any], annotation: str) -> frozenset[str]:
    """The worker names ``annotation`` lists on ``workload`` (empty when absent)."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    text = str(annotations.get(annotation) or "")
    return frozenset(name for name in (part.strip() for part in text.split(",")) if name)
