"""Lease leader election: the pure record logic and config checks.

Electors racing for a real Lease (hand-over, expiry, losing the lease) are in e2e/integration/test_kube_watch.py.
"""

from __future__ import annotations

import pytest

from federation.kube.leader import LeaderElectionConfig, LeaseRecord, next_record


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
