"""Keeps the ``Active`` condition of MultiKueue AdmissionChecks current, as Kueue's MultiKueue controller does.

Re-evaluated whenever checks, configs or clusters change, and every few seconds because a worker's usability
also depends on time (a capacity report going stale). Written only when the condition changes. A
MultiKueueConfig whose dispatch annotations cannot be applied (``manager.decisions.dispatch_policy``) is named in
the message of the checks that use it, in a Warning Event on the config and in a log line.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import anyio
import structlog

from federation.conditions import set_condition
from federation.kube.api import KubeApi
from federation.kube.cache import SyncedCache
from federation.kube.errors import KubeError
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventSink
from federation.kube.refusal import RefusalReporter, is_refusal
from federation.kube.resources import ADMISSION_CHECKS
from federation.kube.trigger import Trigger
from manager.decisions.admission_checks import multikueue_check_verdict
from manager.decisions.dispatch_policy import INVALID_DISPATCH_POLICY_REASON, dispatch_annotation_problem
from manager.worker_connection import WorkerAvailability

log = structlog.get_logger(__name__)

RECHECK_SECONDS = 5.0


class AdmissionCheckStatus:
    def __init__(
        self,
        *,
        api: KubeApi,
        field_manager: str,
        admission_checks: SyncedCache,
        multikueue_configs: SyncedCache,
        workers: WorkerAvailability,
        events: EventSink,
        view: WriteOverlay | None = None,
    ) -> None:
        """``view``: the AdmissionChecks with this process's writes laid over ``admission_checks`` (shared with the
        scheduler's finalizer writes); made here when not given."""
        self._api = api
        self._field_manager = field_manager
        self._multikueue_configs = multikueue_configs
        self._workers = workers
        self._events = events
        self._annotation_problems_seen: dict[str, str] = {}
        self.trigger = Trigger()
        self._refusals = RefusalReporter(events=events, component="kfed-manager", lookup=lambda _: None, action="Sync")
        if view is None:
            view = WriteOverlay(admission_checks.store)
            admission_checks.add_handler(view.observe)
        self._checks = view
        """The checks with this process's writes the cache does not show yet: a trigger right after a write (ten
        workers connecting at once, or the scheduler's finalizer write) must not patch again at the old
        resourceVersion (a 409 Conflict)."""

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(RECHECK_SECONDS):
                await self.trigger.wait()
            try:
                await self.update_once()
            except KubeError as err:
                log.info("admission check status write failed; retrying", error=str(err))

    def _annotation_problems(self, configs: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
        """Per MultiKueueConfig, why its dispatch annotations are not applied; each new problem is logged and
        recorded as a Warning Event on the config once, and its end is logged."""
        found = {name: problem for name, config in configs.items() if (problem := dispatch_annotation_problem(config))}
        for name, problem in found.items():
            if self._annotation_problems_seen.get(name) != problem:
                log.warning("MultiKueueConfig dispatch annotations not applied", multikueue_config=name, reason=problem)
                self._events.emit(
                    configs[name],
                    reason=INVALID_DISPATCH_POLICY_REASON,
                    note=problem,
                    action="Dispatch",
                    event_type="Warning",
                )
        for name in self._annotation_problems_seen.keys() - found.keys():
            log.info("MultiKueueConfig dispatch annotations applied again", multikueue_config=name)
        self._annotation_problems_seen = found
        return found

    async def update_once(self) -> None:
        now = dt.datetime.now(dt.UTC)
        configs = {c["metadata"]["name"]: c for c in self._multikueue_configs.store}
        names = {n for c in configs.values() for n in (c.get("spec") or {}).get("clusters") or ()}
        problems = {name: reason for name in names if (reason := self._workers.unusable_reason(name, now))}
        annotation_problems = self._annotation_problems(configs)
        async with self._checks.write_lock:  # the scheduler's finalizer writes share the view
            for check in list(self._checks):
                await self._write_verdict(
                    check, configs=configs, problems=problems, annotation_problems=annotation_problems, now=now
                )

    async def _write_verdict(
        self,
        check: dict[str, Any],
        *,
        configs: Mapping[str, Mapping[str, Any]],
        problems: Mapping[str, str],
        annotation_problems: Mapping[str, str],
        now: dt.datetime,
    ) -> None:
        verdict = multikueue_check_verdict(
            check, configs=configs, cluster_problems=problems, config_problems=annotation_problems
        )
        if verdict is None:
            return
        conditions, changed = set_condition(
            (check.get("status") or {}).get("conditions") or [],
            condition_type="Active",
            status=verdict.active,
            reason=verdict.reason,
            message=verdict.message,
            now=now,
            observed_generation=check["metadata"].get("generation"),
        )
        if not changed:
            return
        name = check["metadata"]["name"]
        try:
            written = await self._api.patch_status(
                ADMISSION_CHECKS,
                name,
                {
                    "metadata": {"resourceVersion": check["metadata"]["resourceVersion"]},
                    "status": {"conditions": conditions},
                },
                field_manager=self._field_manager,
            )
        except KubeError as err:
            if not is_refusal(err):
                raise
            # named once (log line, Event on the check) until a write for it goes through; the others go on
            self._refusals.refused(name, err, retry_in=RECHECK_SECONDS, regarding=check)
            return
        self._refusals.succeeded(name)
        self._checks.wrote(check, written)
