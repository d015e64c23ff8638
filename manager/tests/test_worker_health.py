from __future__ import annotations

import datetime as dt

from manager.decisions.worker_health import (
    CONNECTED,
    CacheView,
    Health,
    ReconnectBackoff,
    connection_health,
    reconnect_message,
    workloads_looked_at_again,
)

SYNCED = [CacheView("Workload", synced=True), CacheView("Job", synced=True), CacheView("ClusterCapacity", synced=True)]


def test_a_failed_probe_fails_the_connection_even_with_quiet_caches() -> None:
    health = connection_health(probe_error="no answer to GET /version within 3s", caches=SYNCED, grace=3)
    assert health == Health("failed", "the worker's apiserver does not answer: no answer to GET /version within 3s")


def test_an_answering_worker_with_synced_caches_is_connected() -> None:
    assert connection_health(probe_error=None, caches=SYNCED, grace=3) is CONNECTED


def test_a_cache_failing_past_the_grace_fails_the_connection() -> None:
    caches = [*SYNCED[:2], CacheView("ClusterCapacity", synced=True, failing_for=4.0, error="403 Forbidden")]
    health = connection_health(probe_error=None, caches=caches, grace=3)
    assert health.state == "failed"
    assert "ClusterCapacity" in health.message
    assert "403 Forbidden" in health.message


def test_a_cache_failing_briefly_is_not_a_failure() -> None:
    caches = [*SYNCED[:2], CacheView("ClusterCapacity", synced=True, failing_for=1.0, error="reset")]
    assert connection_health(probe_error=None, caches=caches, grace=3) is CONNECTED


def test_caches_that_have_not_listed_yet_are_connecting() -> None:
    caches = [CacheView("Workload", synced=False), *SYNCED[1:]]
    assert connection_health(probe_error=None, caches=caches, grace=3) == Health(
        "connecting", "waiting for the first list of Workload"
    )


def test_backoff_doubles_from_5s_to_the_320s_cap() -> None:
    backoff = ReconnectBackoff(initial=5, maximum=320)
    now = 100.0
    delays = []
    for _ in range(9):
        delays.append(backoff.failed(now))
        now += delays[-1]
    assert delays == [5, 10, 20, 40, 80, 160, 320, 320, 320]


def test_reconciles_before_the_next_attempt_do_not_advance_the_backoff() -> None:
    backoff = ReconnectBackoff(initial=5, maximum=320)
    assert backoff.remaining(0.0) == 0.0
    assert backoff.failed(0.0) == 5.0
    # Status writes and Secret events re-queue the cluster many times within the 5 s: each only waits.
    for now in (0.1, 0.5, 1.0, 4.9):
        assert backoff.remaining(now) == 5.0 - now
    assert backoff.failures == 1
    assert backoff.remaining(5.0) == 0.0
    assert backoff.failed(5.0) == 10.0
    backoff.reset()
    assert (backoff.failures, backoff.remaining(6.0)) == (0, 0.0)


def test_the_reconnect_message_names_the_attempt_and_when_the_next_one_is_made() -> None:
    now = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
    message = reconnect_message("connection refused", attempt=3, delay=20, now=now)
    assert message == (
        "cannot reach the worker's apiserver: connection refused; attempt 3 failed, next at "
        "2026-11-23T10:00:20Z (in 20s)"
    )


def test_an_apiserver_refusing_the_credentials_is_not_said_to_be_silent() -> None:
    health = connection_health(probe_error="401 Unauthorized: Unauthorized", probe_status=401, caches=SYNCED, grace=3)
    assert health.state == "failed"
    assert health.message.startswith(
        "the worker's apiserver refuses the kubeconfig's credentials: 401 Unauthorized: Unauthorized ("
    )
    assert "does not answer" not in health.message
    forbidden = connection_health(probe_error="403 Forbidden: no", probe_status=403, caches=SYNCED, grace=3)
    assert (
        forbidden.message == "the worker's apiserver refuses GET /version to the kubeconfig's user: 403 Forbidden: no"
    )
    # Any other answer, or none, is still a worker that does not answer.
    other = connection_health(probe_error="503 ServiceUnavailable: x", probe_status=503, caches=SYNCED, grace=3)
    assert other.message == "the worker's apiserver does not answer: 503 ServiceUnavailable: x"


def test_a_refused_connection_attempt_names_the_refusal_and_the_next_attempt() -> None:
    now = dt.datetime(2026, 11, 23, 10, 0, 0, tzinfo=dt.UTC)
    message = reconnect_message("401 Unauthorized: Unauthorized", attempt=1, delay=5, now=now, status=401)
    assert message.startswith("the worker's apiserver refuses the kubeconfig's credentials: 401 Unauthorized")
    assert message.endswith("; attempt 1 failed, next at 2026-11-23T10:00:05Z (in 5s)")


def test_a_refused_capacity_report_leaves_the_worker_usable_and_says_how_it_is_probed() -> None:
    caches = [
        *SYNCED[:2],
        CacheView(
            "ClusterCapacity",
            synced=False,
            failing_for=30.0,
            error="403 Forbidden: clustercapacities.kfed.io is forbidden",
            optional=True,
            refused=True,
        ),
        CacheView("ClusterQueue", synced=True),
        CacheView("LocalQueue", synced=True),
    ]
    health = connection_health(probe_error=None, caches=caches, grace=3)
    assert health.state == "healthy"
    assert "no ClusterCapacity report (403 Forbidden" in health.message
    assert "probed through the worker's ClusterQueue status" in health.message


def test_a_refused_capacity_report_waits_for_the_queues_it_is_probed_from() -> None:
    caches = [
        *SYNCED[:2],
        CacheView("ClusterCapacity", synced=False, failing_for=30.0, error="404", optional=True, refused=True),
        CacheView("ClusterQueue", synced=False),
        CacheView("LocalQueue", synced=True),
    ]
    assert connection_health(probe_error=None, caches=caches, grace=3) == Health(
        "connecting", "waiting for the first list of ClusterQueue"
    )


def test_workloads_are_looked_at_again_when_the_worker_is_lost_back_or_connected_at_last() -> None:
    assert workloads_looked_at_again("healthy", "failed")
    assert workloads_looked_at_again("connecting", "failed")
    assert workloads_looked_at_again("failed", "healthy")
    # after a start or a leader change: the syncs made while it was connecting only wait for a recheck
    assert workloads_looked_at_again("connecting", "healthy")
    assert not workloads_looked_at_again("healthy", "healthy")
    assert not workloads_looked_at_again("healthy", "connecting")
