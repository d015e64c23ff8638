"""Lease leader election: the pure record logic, and electors racing on the in-memory apiserver."""

from __future__ import annotations

import anyio
import pytest

from federation.kube import resources as r
from federation.kube.fake import FakeApiServer
from federation.kube.leader import LeaderElectionConfig, LeaderElector, LeaseRecord, next_record

from .helpers import eventually

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.2}


def test_next_record_creates_renews_and_respects_live_holders() -> None:
    created = next_record(None, identity="a", lease_duration_seconds=15, now="t0", expired=True)
    assert created == LeaseRecord("a", 15, "t0", "t0", 0)
    renewed = next_record(created, identity="a", lease_duration_seconds=15, now="t1", expired=False)
    assert renewed == LeaseRecord("a", 15, "t0", "t1", 0)
    assert next_record(created, identity="b", lease_duration_seconds=15, now="t1", expired=False) is None
    taken = next_record(created, identity="b", lease_duration_seconds=15, now="t2", expired=True)
    assert taken == LeaseRecord("b", 15, "t2", "t2", 1)
    released = LeaseRecord("", 1, "t3", "t3", 1)
    assert next_record(released, identity="c", lease_duration_seconds=15, now="t4", expired=False) == LeaseRecord(
        "c", 15, "t4", "t4", 2
    )


def test_lease_record_round_trip() -> None:
    lease = {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "t", "leaseTransitions": 3}}
    record = LeaseRecord.from_lease(lease)
    assert record == LeaseRecord("a", 15, None, "t", 3)
    assert LeaseRecord.from_lease({"spec": record.to_spec()}) == record


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElectionConfig("l", "ns", "a", lease_duration=5, renew_deadline=5)
    with pytest.raises(ValueError, match="retry_period"):
        LeaderElectionConfig("l", "ns", "a", renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="identity"):
        LeaderElectionConfig("l", "ns", "")
    assert LeaderElectionConfig("l", "ns", "a").lease_duration == 15.0


def elector(fake: FakeApiServer, identity: str, log: list[str], **overrides: object) -> LeaderElector:
    config = LeaderElectionConfig("kfed-manager", "kfed-system", identity, **{**FAST, **overrides})  # type: ignore[arg-type]

    async def started() -> None:
        log.append(f"start {identity}")
        await anyio.sleep_forever()

    def stopped() -> None:
        log.append(f"stop {identity}")

    return LeaderElector(fake.api(identity), config, on_started_leading=started, on_stopped_leading=stopped)


@pytest.mark.anyio
async def test_one_leads_and_the_standby_takes_over_on_release() -> None:
    fake = FakeApiServer()
    log: list[str] = []
    a, b = elector(fake, "a", log), elector(fake, "b", log)
    a_scope = anyio.CancelScope()

    async def run_a() -> None:
        with a_scope:
            await a.run()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_a)
        assert await a.wait_leading(timeout=2.0)
        tg.start_soon(b.run)
        await eventually(lambda: b.leader == "a", what="standby observes the leader")
        assert not b.is_leader
        assert log == ["start a"]

        a_scope.cancel()  # leader shuts down: releases the lease
        assert await b.wait_leading(timeout=2.0)
        assert not a.is_leader
        await eventually(lambda: log == ["start a", "stop a", "start b"], what="b's work started")
        lease = fake.objects(r.LEASES)[0]
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1  # one change of holder: a -> b
        tg.cancel_scope.cancel()
    assert log[-1] == "stop b"


@pytest.mark.anyio
async def test_standby_takes_over_after_expiry_when_leader_vanishes_without_release() -> None:
    fake = FakeApiServer()
    log: list[str] = []
    a = elector(fake, "a", log, release_on_cancel=False)
    async with a:
        assert await a.wait_leading(timeout=2.0)
    b = elector(fake, "b", log)
    async with b:
        with anyio.fail_after(0.5):  # still held by the silent "a": lease is 1 s
            await anyio.sleep(0.4)
            assert not b.is_leader
        assert await b.wait_leading(timeout=3.0)
        assert b.leader == "b"


@pytest.mark.anyio
async def test_leader_steps_down_when_it_cannot_renew() -> None:
    fake = FakeApiServer()
    log: list[str] = []
    a = elector(fake, "a", log)
    async with a:
        assert await a.wait_leading(timeout=2.0)
        fake.stop()
        await eventually(lambda: log == ["start a", "stop a"], within=3.0, what="step down")
        assert not a.is_leader
        fake.start()
        assert await a.wait_leading(timeout=3.0)  # campaigns again once the apiserver is back
