"""The manager↔agent protocol: what each side writes in a worker's apiserver and what the other reads.

Manager and agent never talk directly; everything crosses the worker's apiserver (DESIGN §1). This module is
the one place that names the objects, labels, condition reasons and timings both sides rely on.

Dispatch (manager → worker W, after reserving global quota and recording W in
``status.nominatedClusterNames`` of the manager Workload):
  1. Workload copy: same namespace and name as the manager Workload; ``spec`` copied (podSets, queueName,
     priority, priorityClassRef); labels ``kueue.x-k8s.io/multikueue-origin: <origin>`` and
     ``kfed.io/manager-workload-uid: <uid of the manager Workload>``; annotation ``kfed.io/sent-at`` (when the
     manager created it, by its clock); no status.
  2. Job copy: same namespace and name as the manager Job; ``spec.managedBy`` cleared, ``spec.selector`` and the
     Job controller's generated labels dropped; labels as above plus
     ``kueue.x-k8s.io/prebuilt-workload-name: <workload name>``. When W's kfed-agent lists its ResourceFlavors in
     its capacity report (``status.flavors``: name, nodeLabels, tolerations), the Job copy is created only once
     the agent admitted the Workload copy (step 3), already started: ``spec.suspend: false`` and the admission's
     pod-template injection applied (``federation.pod_injection``), and owned by the Workload copy. Otherwise
     (stock Kueue on W) it is created with the Workload copy, ``spec.suspend: true``, and owns the Workload copy.
  Creates are idempotent: AlreadyExists is adopted only when the object carries our origin label and the same
  manager uid; anything else is never touched (SCENARIOS S7).

Local admission (agent on W):
  3. The agent admits the Workload copy against its own ClusterQueue (the one its LocalQueue ``spec.queueName``
     points to): one status write sets ``status.admission`` and the ``QuotaReserved`` and ``Admitted``
     conditions (the worker has no admission checks).
  4. A suspended Job copy (stock Kueue manager, or no flavors in the report) is started by the agent: it injects
     the assigned flavors' nodeLabels and tolerations into the Job's pod template and sets ``spec.suspend: false``
     (one write), so the worker's Job controller creates pods. A started Job whose Workload holds no quota is
     suspended. An admitted copy of kfed-manager's that no Job names within the agent's ``--job-copy-timeout``
     is evicted, which releases its quota and tells the manager to requeue it.
  5. When the Job has a ``Complete`` or ``Failed`` condition, the agent sets the Workload's ``Finished``
     condition (reason ``Succeeded`` or ``Failed``), which releases its quota.

Capacity (agent → manager): the agent keeps one cluster-scoped ``ClusterCapacity`` (named
``federation.api.capacity.CLUSTER_CAPACITY_NAME``) current: published within ``CAPACITY_DEBOUNCE_SECONDS`` of any
change but not more often than every ``CAPACITY_MIN_INTERVAL_SECONDS``, and at least every
``CAPACITY_HEARTBEAT_SECONDS``, ``status.generation`` +1 each time,
``status.observedTime`` from the agent's clock. The manager keeps an in-flight ledger of what it dispatched to W;
an entry stops counting once W reports a capacity computed after the copy's ``QuotaReserved`` transition (both
times come from the agent's clock), or when the copy is gone. A report not renewed for ``CAPACITY_STALE_SECONDS``
makes W ineligible for new dispatches; that age is counted on the manager's clock from when the last generation
arrived, so a worker whose clock disagrees with the manager's is judged the same way.

Status and finish (manager): the manager mirrors the remote Job's ``.status`` onto the manager Job once the
remote Workload is admitted (setting ``spec.suspend: false`` on the manager Job first), marks the manager
Workload ``Admitted`` with ``status.clusterName: W``, and when the remote Job has finished copies the final
status, finishes the manager Workload, and only then deletes the remote Job and Workload.
"""

from __future__ import annotations

from typing import Final

MULTIKUEUE_CONTROLLER: Final = "kueue.x-k8s.io/multikueue"
"""AdmissionCheck controllerName and Job spec.managedBy value that mean 'dispatched by MultiKueue (kfed)'."""
DEFAULT_ORIGIN: Final = "multikueue"
"""Value of ``kueue.x-k8s.io/multikueue-origin`` on remote objects (configurable per manager, as in Kueue)."""
MANAGER_UID_LABEL: Final = "kfed.io/manager-workload-uid"
SENT_AT_ANNOTATION: Final = "kfed.io/sent-at"
"""On a Workload copy: when kfed-manager created it, by the manager's clock (RFC 3339). The dispatch timeout counts
from it; the copy's ``creationTimestamp`` is the worker's clock, which may disagree with the manager's."""

CAPACITY_DEBOUNCE_SECONDS: Final = 0.2
CAPACITY_MIN_INTERVAL_SECONDS: Final = 1.0
"""Reports in a burst of admissions go out at most this often: the manager's in-flight ledger covers the gap."""
QUEUE_STATUS_MIN_INTERVAL_SECONDS: Final = 5.0
"""The worker's ClusterQueue/LocalQueue status (usage, pending counts) is rewritten at most this often; the last
change is always written once the interval has passed."""
CAPACITY_HEARTBEAT_SECONDS: Final = 30.0
CAPACITY_STALE_SECONDS: Final = 120.0

# Reasons kfed writes in conditions (Kueue's where Kueue has one).
# QuotaReserved=False: Kueue v0.20's granular reasons (UnadmittedWorkloadsObservability, on by default there),
# besides the scheduler's NoMatchingFlavor, WaitingForQuota and ExceedsMaxQuota (federation.admission.decisions).
REASON_PENDING_EVALUATION: Final = "PendingEvaluation"
"""Back in the queue, not yet looked at again (after an eviction, in a requeue backoff)."""
REASON_MISCONFIGURED: Final = "Misconfigured"
"""Its LocalQueue or ClusterQueue does not exist, or it cannot be admitted as it is (namespace, LimitRange)."""
REASON_SUSPENDED: Final = "Suspended"
"""Its LocalQueue or ClusterQueue is stopped or inactive."""
REASON_WAITING_FOR_PREEMPTED: Final = "WaitingForPreemptedWorkloads"
REASON_TOPOLOGY_PLACEMENT_FAILED: Final = "TopologyPlacementFailed"
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_ADMITTED: Final = "Admitted"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_FAILED: Final = "Failed"
REASON_OWNER_NOT_FOUND: Final = "OwnerNotFound"
"""Kueue's Finished reason for a Workload whose owner (Job) no longer exists (``federation.admission.orphans``)."""
REASON_OUT_OF_SYNC: Final = "OutOfSync"
"""Kueue's Finished reason for a prebuilt Workload that no longer matches its Job (e.g. its Job copy's parallelism
changed on the worker); kfed-agent evicts a kfed-manager copy with it (``worker_agent.decisions.job_copies``)."""
REASON_NO_WORKER_CAPACITY: Final = "NoWorkerCapacity"

PODS_UNSCHEDULABLE_CONDITION: Final = "kfed.io/PodsUnschedulable"
"""Kueue has no condition for it: pods of an admitted copy that the worker's kube-scheduler cannot place. The agent
sets it on the Workload copy (``True``, reason ``Unschedulable``, the scheduler's message) once a pod has been
unschedulable for ``UNSCHEDULABLE_GRACE_SECONDS``, and ``False`` (reason ``Scheduled``) once none is; the manager
shows it on the manager Workload, naming the worker, with a Warning Event. Pods the worker's Job controller cannot
even create (the Job copy's ``FailedCreate`` Events: a ServiceAccount or PriorityClass missing there, a
ResourceQuota, Pod Security admission) set it too, with reason ``FailedCreate`` and that Event's message."""
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_FAILED_CREATE: Final = "FailedCreate"
REASON_SCHEDULED: Final = "Scheduled"
UNSCHEDULABLE_GRACE_SECONDS: Final = 10.0
"""A pod unschedulable for less than this is not reported: in a burst, a pod may wait a moment for room that the
quota promised and another pod is still giving back."""

JOB_GENERATED_LABELS: Final = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
"""Labels the Job API adds to a Job's selector and pod template; a copy for another cluster drops them."""
