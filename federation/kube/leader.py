"""Lease-based leader election (coordination.k8s.io/v1), with Kueue's / client-go's timing defaults.

Every kfed controller runs only on the replica holding its Lease; standbys just keep trying to acquire it. Expiry
is judged on the *local* monotonic clock from when this replica last saw the record change (as client-go does),
so clock skew between replicas cannot make two leaders. The record arithmetic (:func:`next_record`) is pure;
:class:`LeaderElector` adds the acquire/renew/release loops.
"""

from __future__ import annotations

import datetime as dt
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio
import structlog

from federation.kube.api import KubeApi, Obj
from federation.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from federation.kube.events import micro_time
from federation.kube.resources import LEASES

log = structlog.get_logger(__name__)

JITTER_FACTOR = 1.2
Callback = Callable[[], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Kueue's defaults: lease 15 s, renew deadline 10 s, retry period 2 s."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER_FACTOR} * retry_period")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


def next_record(
    current: LeaseRecord | None,
    *,
    identity: str,
    lease_duration_seconds: int,
    now: str,
    expired: bool,
) -> LeaseRecord | None:
    """The record to write to acquire or renew, or None when another live holder owns the lease.

    ``expired``: the current record has not changed for a whole lease duration on our local clock.
    """
    if current is None:
        return LeaseRecord(identity, lease_duration_seconds, now, now, 0)
    if current.holder == identity:
        return replace(current, lease_duration_seconds=lease_duration_seconds, renew_time=now)
    if current.holder and not expired:
        return None
    return LeaseRecord(identity, lease_duration_seconds, now, now, current.transitions + 1)


class LeaderElector:
    """Campaigns for a Lease; while leading runs ``on_started_leading`` (cancelled when leadership is lost).

    ``await elector.run()`` campaigns forever (leading, losing, and campaigning again); or use
    ``async with elector:`` to campaign in the background for the duration of the block. On cancellation the
    lease is released (if ``release_on_cancel``) so a standby takes over within one retry period.
    """

    def __init__(
        self,
        api: KubeApi,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._clock = clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._leading = False
        self._leading_event = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._log = log.bind(cluster=api.cluster, lease=f"{config.namespace}/{config.name}", identity=config.identity)

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The holder this replica last observed ("" if none)."""
        return self._observed.holder if self._observed else ""

    async def wait_leading(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        with anyio.move_on_after(timeout):
            await self._leading_event.wait()
        return self._leading

    async def __aenter__(self) -> LeaderElector:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self.run)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None

    async def run(self) -> None:
        """Campaign forever; each time leadership is won, lead until it is lost."""
        while True:
            await self._acquire()
            await self._lead()

    # -- internals ----------------------------------------------------------------------------------------------

    def _expired(self) -> bool:
        if self._observed is None:
            return True
        return self._observed_at + self._observed.lease_duration_seconds <= self._clock()

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            if self._observed is None or record.holder != self._observed.holder:
                if record.holder and self.on_new_leader is not None:
                    self.on_new_leader(record.holder)
                self._log.info("leader.observed", holder=record.holder or "<none>")
            self._observed = record
            self._observed_at = self._clock()

    def _jittered(self, period: float) -> float:
        return period * (1.0 + random.random() * (JITTER_FACTOR - 1.0))

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = micro_time(dt.datetime.now(dt.UTC))
        duration = max(1, round(cfg.lease_duration))
        try:
            lease = await self.api.get(LEASES, cfg.name, namespace=cfg.namespace)
        except NotFound:
            record = next_record(None, identity=cfg.identity, lease_duration_seconds=duration, now=now, expired=True)
            assert record is not None
            body = {"metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": record.to_spec()}
            try:
                await self.api.create(LEASES, body)
            except (AlreadyExists, Conflict):
                return False
            self._observe(record)
            return True

        current = LeaseRecord.from_lease(lease)
        self._observe(current)
        record = next_record(
            current, identity=cfg.identity, lease_duration_seconds=duration, now=now, expired=self._expired()
        )
        if record is None:
            return False
        updated: Obj = {**lease, "spec": {**(lease.get("spec") or {}), **record.to_spec()}}
        try:
            await self.api.replace(LEASES, updated)
        except Conflict:
            return False
        self._observe(record)
        return True

    async def _attempt(self, limit: float) -> bool:
        with anyio.move_on_after(limit):
            try:
                return await self._try_acquire_or_renew()
            except KubeError as exc:
                self._log.warning("leader.attempt_failed", error=str(exc)[:300])
        return False

    async def _acquire(self) -> None:
        self._log.info("leader.campaigning")
        while True:
            if await self._attempt(self.config.renew_deadline):
                return
            await anyio.sleep(self._jittered(self.config.retry_period))

    async def _lead(self) -> None:
        self._leading = True
        self._leading_event.set()
        self._log.info("leader.started_leading")
        try:
            async with anyio.create_task_group() as tg:
                if self.on_started_leading is not None:
                    tg.start_soon(_call, self.on_started_leading)
                await self._renew_until_lost()
                tg.cancel_scope.cancel()
        finally:
            self._leading = False
            self._leading_event = anyio.Event()
            with anyio.CancelScope(shield=True):
                if self.config.release_on_cancel:
                    await self._release()
                self._log.info("leader.stopped_leading")
                if self.on_stopped_leading is not None:
                    try:
                        await _call(self.on_stopped_leading)
                    except Exception:
                        self._log.exception("leader.on_stopped_leading_failed")

    async def _renew_until_lost(self) -> None:
        cfg = self.config
        last_renew = self._clock()
        while True:
            await anyio.sleep(cfg.retry_period)
            left = cfg.renew_deadline - (self._clock() - last_renew)
            if left > 0 and await self._attempt(left):
                last_renew = self._clock()
                continue
            if self._clock() - last_renew >= cfg.renew_deadline:
                self._log.warning("leader.lost", seconds_since_renew=round(self._clock() - last_renew, 2))
                return

    async def _release(self) -> None:
        """Hand the lease back (holder "", 1 s duration) if we still hold it, so a standby takes over at once."""
        cfg = self.config
        with anyio.move_on_after(cfg.retry_period):
            try:
                lease = await self.api.get(LEASES, cfg.name, namespace=cfg.namespace)
                if LeaseRecord.from_lease(lease).holder != cfg.identity:
                    return
                now = micro_time(dt.datetime.now(dt.UTC))
                spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1}
                spec.update(acquireTime=now, renewTime=now)
                await self.api.replace(LEASES, {**lease, "spec": spec})
                self._log.info("leader.released")
            except KubeError as exc:
                self._log.warning("leader.release_failed", error=str(exc)[:300])


async def _call(callback: Callback) -> None:
    result = callback()
    if inspect.isawaitable(result):
        await result
