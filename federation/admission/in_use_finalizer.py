"""Kueue's resource-in-use finalizer on Workloads: when it is lifted (pure; manager and agent).

Kueue creates the Workloads of its Jobs with ``kueue.x-k8s.io/resource-in-use`` and lifts it once the Workload has
finished, or once it is being deleted. kfed creates its Workloads without it, but a cluster that ran Kueue before
kfed (a manager or a worker switched one at a time) keeps the Workloads Kueue made there, finalizer and all; with
no one to lift it, deleting such a Workload, or the Job whose garbage collection deletes it, would leave it
``Terminating`` for ever. kfed-manager and kfed-agent lift it by Kueue's rule, through
``federation.kube.finalizer_release``. A Workload deleted under a running Job is then gone, and its Job is stopped
and queued again as for any deleted Workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.admission.api_queue_status import RESOURCE_IN_USE_FINALIZER
from federation.api.workload import FINISHED
from federation.conditions import is_true


def in_use_finalizer_due(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue would lift the Workload's resource-in-use finalizer now: it carries it, and it has finished or
    is being deleted."""
    meta = workload.get("metadata") or {}
    if RESOURCE_IN_USE_FINALIZER not in (meta.get("finalizers") or ()):
        return False
    return bool(meta.get("deletionTimestamp")) or is_true(workload, FINISHED)


__all__ = ["RESOURCE_IN_USE_FINALIZER", "in_use_finalizer_due"]
