"""The agent's main loop: local admission of pending Workloads, then starting and finishing prebuilt Jobs.

Level-triggered: any change in a watched kind pulls the trigger; one pass recomputes everything from the caches
(plus the overlay of the agent's own fresh writes) and writes only what differs; its admission part is skipped while
nothing it reads changed since it last had nothing to do (``decisions.idle``: most changes in a burst are Jobs'
status updates, which admission does not read). Writes carry the resourceVersion
they were decided on, so a concurrent change makes them fail with Conflict instead of overwriting it; the change
that caused the conflict pulls the trigger again. A pass holds ``lock`` so the capacity publisher never reports
a snapshot taken in the middle of admissions (see ``capacity_publisher``).

This module is the loop: when a pass runs and in which order its parts go. The parts live in
``admission_passes`` (admission) and ``job_passes`` (Jobs, deactivations, Job copies, finishes), the writes they
share and the retry after a failed one in ``writes``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import anyio
import structlog

from federation.admission.cycle import DEFAULT_CYCLE_CONFIG, CycleConfig
from federation.admission.pods_ready import WaitForPodsReady
from federation.kube.recorder import EventRecorder
from federation.kube.trigger import Trigger
from federation.obs.metrics import Metrics
from worker_agent.admission_passes import AdmissionPasses
from worker_agent.decisions.job_copies import DEFAULT_JOB_COPY_TIMEOUT_SECONDS
from worker_agent.job_passes import JobPasses
from worker_agent.provisioning import Provisioning
from worker_agent.run_limits import RunLimits
from worker_agent.tas import Tas
from worker_agent.world import World
from worker_agent.writes import Writes

log = structlog.get_logger(__name__)

COALESCE_SECONDS = 0.02
"""How long a pass waits after the first change that pulls the trigger, so the changes around it share the pass.
Each pass reads the whole cluster, so in a burst the passes, not the changes, are the agent's CPU: 20 ms instead of
5 took a tenth off its CPU per Job in a 300-Job burst (50 ms took nothing more off) and adds at most 20 ms to a
Job's admission."""


class Reconciler:
    def __init__(
        self,
        world: World,
        *,
        cluster: str,
        events: EventRecorder,
        metrics: Metrics,
        lock: anyio.Lock,
        on_admitted: Callable[[float], None] = lambda _: None,
        on_released: Callable[[], None] = lambda: None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        trigger: Trigger | None = None,
        tas: Tas | None = None,
        provisioning: Provisioning | None = None,
        job_copy_timeout: float = DEFAULT_JOB_COPY_TIMEOUT_SECONDS,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        cycle: CycleConfig = DEFAULT_CYCLE_CONFIG,
    ) -> None:
        """``on_released``: quota was released without a write the watches would see (a deferred finish)."""
        self.world = world
        self.cluster = cluster
        self.lock = lock
        self.clock = clock
        self.trigger = trigger or Trigger()
        self.tas = tas
        self.provisioning = provisioning
        self.passes = 0
        self.workload_index = world.workload_index()
        self.job_index = world.job_index()
        self._log = log.bind(cluster=cluster)
        self.writes = Writes(api=world.api, trigger=self.trigger, events=events)
        self.admission = AdmissionPasses(
            world=world,
            writes=self.writes,
            workload_index=self.workload_index,
            cluster=cluster,
            events=events,
            metrics=metrics,
            clock=clock,
            on_admitted=on_admitted,
            tas=tas,
            provisioning=provisioning,
            block_admission=wait_for_pods_ready is not None and wait_for_pods_ready.block_admission,
            cycle=cycle,
        )
        self.jobs = JobPasses(
            world=world,
            writes=self.writes,
            trigger=self.trigger,
            workload_index=self.workload_index,
            job_index=self.job_index,
            cluster=cluster,
            events=events,
            metrics=metrics,
            clock=clock,
            on_released=on_released,
            job_copy_timeout=job_copy_timeout,
        )
        self.run_limits = RunLimits(
            world=world,
            writes=self.writes,
            workload_index=self.workload_index,
            job_index=self.job_index,
            cluster=cluster,
            events=events,
            metrics=metrics,
            clock=clock,
            wait_for_pods_ready=wait_for_pods_ready,
        )

    async def run(self) -> None:
        self.trigger.pull()
        while True:
            recheck = self.tas.seconds_until_recheck() if self.tas is not None else None
            next_requeue_at = self.admission.next_requeue_at
            if next_requeue_at is not None:  # a requeue backoff ends: admit it then
                left = max(0.0, next_requeue_at - self.clock().timestamp()) + COALESCE_SECONDS
                recheck = left if recheck is None else min(recheck, left)
            next_job_copy_due = self.jobs.next_job_copy_due
            if next_job_copy_due is not None:  # an admitted copy's wait for its Job copy ends: evict it then
                left = max(0.0, next_job_copy_due - self.clock().timestamp()) + COALESCE_SECONDS
                recheck = left if recheck is None else min(recheck, left)
            limit_due = self.run_limits.next_due
            if limit_due is not None:  # a time limit or a readiness timeout falls due: act on it then
                left = max(0.0, limit_due - self.clock().timestamp()) + COALESCE_SECONDS
                recheck = left if recheck is None else min(recheck, left)
            finish_due = self.jobs.next_finish_due()
            if finish_due is not None:  # a deferred Finished write falls due
                left = max(0.0, finish_due - time.monotonic())
                recheck = left if recheck is None else min(recheck, left)
            retry_at = self.writes.retry_at
            if retry_at is not None:  # a failed write is tried again
                left = max(0.0, retry_at - time.monotonic())
                recheck = left if recheck is None else min(recheck, left)
            with anyio.move_on_after(recheck if recheck is not None else float("inf")):
                await self.trigger.wait()
            await anyio.sleep(COALESCE_SECONDS)
            self.writes.forget_due_retry()
            async with self.lock:
                try:
                    await self.admission.admission_pass()
                    if self.provisioning is not None:
                        await self.provisioning.sync(
                            self.world.all_workloads(),
                            flavor_labels={n: f.spec.node_labels for n, f in self.world.flavor_infos().items()},
                            remember=self.world.workload_writes.remember,
                            now=self.clock(),
                        )
                    # time limits and readiness first: the deactivation pass evicts what they deactivate
                    await self.run_limits.run_limits_pass()
                    await self.jobs.deactivation_pass()  # before the job pass, which stops and releases what it evicts
                    await self.jobs.job_copy_pass()  # before the job pass, which releases what it evicts
                    await self.jobs.job_pass()
                    await self.jobs.orphan_pass()  # after the job pass, which brings the Job index it reads up to date
                    if self.tas is not None:  # repair first: no pod is pinned by an assignment being repaired
                        await self.tas.repair_pass(
                            self.world.all_workloads(), remember=self.world.workload_writes.remember
                        )
                        await self.tas.ungate_pass(self.world.all_workloads())
                except Exception:  # a bug in one pass must not stop the agent; the next change retries
                    self._log.exception("agent.pass_failed")
            self.passes += 1
