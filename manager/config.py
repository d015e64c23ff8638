"""The manager's settings, with Kueue's defaults where Kueue has the same setting."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

from federation.admission.api_workloads import ResourceRules
from federation.admission.cycle import CycleConfig
from federation.admission.pods_ready import WaitForPodsReady
from federation.kube.kubeconfig import DEFAULT_KUBECONFIG_DIR
from federation.protocol import DEFAULT_ORIGIN
from manager.decisions.dispatch_policy import MANAGER_DISPATCH_DEFAULT, DispatchChoice
from manager.decisions.refusals import DEFAULT_REFUSAL_BACKOFF, MAX_REFUSAL_BACKOFF
from manager.decisions.retention import RetentionPolicy


@dataclass(frozen=True)
class ManagerConfig:
    namespace: str = "kfed-system"
    """Where kubeconfig Secrets and the leader Lease live."""
    origin: str = DEFAULT_ORIGIN
    worker_lost_timeout: float = 900.0
    gc_interval: float = 60.0
    dispatch_timeout: float = 300.0
    """Seconds a worker has to admit a dispatched workload before it is withdrawn and dispatched again."""
    refusal_backoff: float = DEFAULT_REFUSAL_BACKOFF
    """Seconds a worker that refused a Workload's copy (403) is avoided for it the first time, doubling with each
    refusal (``manager.decisions.refusals``)."""
    refusal_backoff_max: float = MAX_REFUSAL_BACKOFF
    """The longest such a worker is avoided in one go."""
    reservation_hold: float = 2.0
    """Seconds a reservation for a kfed-agent worker may wait to be written with the worker's admission, in one
    Workload status write (``manager.reservation_holds``; 0: each is written on its own)."""
    dispatch: DispatchChoice = MANAGER_DISPATCH_DEFAULT
    """How to choose among workers that fit equally well (``manager.decisions.dispatch``), unless a
    MultiKueueConfig's annotations say otherwise (``manager.decisions.dispatch_policy``)."""
    cycle: CycleConfig = field(default_factory=CycleConfig)
    """Kueue's scheduler-wide switches: ``fairSharing`` (off by default) and its preemption strategies."""
    resource_rules: ResourceRules = field(default_factory=ResourceRules)
    """Kueue's ``resources.excludeResourcePrefixes`` / ``quotaCheckStrategy``: which requests count for quota."""
    manage_jobs_without_queue_name: bool = False
    """Kueue's ``manageJobsWithoutQueueName``: Jobs without a queue-name label (and no ``default`` LocalQueue) in a
    selected namespace are kept suspended."""
    managed_jobs_namespace_selector: dict[str, Any] | None = None
    """Kueue's ``managedJobsNamespaceSelector`` (None: Kueue's default, every namespace but kube-system and
    ``namespace``): where Jobs without a queue-name label are defaulted or kept suspended."""
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    """Kueue's objectRetentionPolicies.workloads (off by default)."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    """Kueue's waitForPodsReady (None: off, Kueue's default)."""
    reconnect_initial: float = 5.0
    reconnect_max: float = 320.0
    probe_interval: float = 2.0
    """Seconds between two liveness probes (``GET /version``) of each connected worker."""
    probe_timeout: float = 3.0
    """A probe unanswered this long fails the worker's connection (also: how long a cache may keep failing)."""
    kubeconfig_dir: str = DEFAULT_KUBECONFIG_DIR
    """The only directory ``locationType: Path`` kubeconfigs are read from (Kueue's default)."""
    kubeconfig_file_check_interval: float = 2.0
    """Seconds between two reads of each ``locationType: Path`` kubeconfig: a changed file (a mounted Secret the
    kubelet updated) reconnects its worker, as Kueue's watch of those files does."""
    client_qps: float = 300.0
    client_burst: int = 500
    workers: int = 16
    """Concurrent reconciles per controller (and concurrent status writes per scheduling pass). 64 was measured
    worse on the 300-Job burst: the scheduler's next pass decided on Workloads its own writes had not reached in
    the cache yet (308 Conflicts instead of 9, reservation p50 18 s instead of 2 s)."""
    field_manager: str = "kfed-manager"
    user_agent: str = "kfed-manager/0.1.0"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{os.getpid()}")
