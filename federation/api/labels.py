"""Well-known label, annotation and scheduling-gate keys: Kueue's where Kueue defines one, `kfed.io/` otherwise."""

from __future__ import annotations

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""On a Workload Kueue made for a Job: the Job's uid."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
PREBUILT_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/prebuilt-workload-name"
"""Kueue v0.18+ (WorkloadIdentifierAnnotations, on by default) writes the prebuilt Workload's name on a MultiKueue Job
copy as this annotation instead of the label, and reads the annotation first."""
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
"""On a batch/v1 Job: the fewest pods it can run with (partial admission); its Workload's ``minCount``."""
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""On a Job: its Workload's ``maximumExecutionTimeSeconds``, the admitted time after which it is deactivated."""
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
"""On an Indexed Job with partial admission: ``completions`` follows ``parallelism`` when admission shrinks it."""

PODSET_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PODSET_PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
PODSET_SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
PODSET_TOPOLOGY_SPREADING_ANNOTATION = "kueue.x-k8s.io/podset-topology-spreading"
# Kueue v0.20 (alpha TASReplaceMultipleFailedNodes, Go constant UnhealthyNodesConcurrentEvictionThresholdAnnotation):
# on a Job or Workload, how many failed nodes may await replacement at once before the Workload is evicted, 1-8.
UNHEALTHY_NODES_EVICTION_THRESHOLD_ANNOTATION = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
MAX_UNHEALTHY_NODES_EVICTION_THRESHOLD = 8

HOSTNAME_LABEL = "kubernetes.io/hostname"

KFED_PREFIX = "kfed.io/"
