"""Kueue's ``Stopped`` Event on a Job it suspends, and the messages that say why.

kfed-manager records them on the Jobs queued on the manager cluster, kfed-agent on the Jobs queued on its worker
and on the Job copies it suspends, so ``kubectl describe job`` and alerts on Events read Kueue's words everywhere.
"""

from __future__ import annotations

REASON_STOPPED = "Stopped"
"""The reason of the Normal Event on a Job that was suspended."""
NOT_ADMITTED = "Not admitted by cluster queue"
"""Its message when the Job was started while its Workload was not admitted."""
WORKLOAD_DELETED = "Workload is deleted"
"""... when a running Job's Workload is being deleted (a finalizer holds it);"""
MISSING_WORKLOAD = "Missing Workload; unable to restore pod templates"
"""... when a running Job's Workload is gone;"""
NO_MATCHING_WORKLOAD = "No matching Workload; restoring pod templates according to existent Workload"
"""... when it no longer matches the Job (its pod count was changed), so it is deleted and the Job stopped."""
