"""Kueue's reset of admission checks when a reservation goes (``federation.admission.check_reset``)."""

import datetime as dt
from typing import Any

from federation.admission.check_reset import checks_reset_on_eviction, no_reservation_terms

NOW = dt.datetime(2026, 11, 25, 2, 30, tzinfo=dt.UTC)
EARLIER = "2026-11-25T01:00:00Z"


def test_pending_stays_and_every_other_state_is_reset_saying_what_it_was() -> None:
    checks: list[dict[str, Any]] = [
        {"name": "a", "state": "Pending", "message": "waiting", "lastTransitionTime": EARLIER, "retryCount": 2},
        {"name": "b", "state": "Ready", "message": "ok", "lastTransitionTime": EARLIER, "retryCount": 1},
        {"name": "c", "state": "Rejected", "message": "no", "lastTransitionTime": EARLIER},
        {
            "name": "d",
            "state": "Retry",
            "message": "later",
            "lastTransitionTime": EARLIER,
            "requeueAfterSeconds": 60,
            "retryCount": 1,
        },
    ]
    assert checks_reset_on_eviction(checks, now=NOW) == [
        checks[0],
        {
            "name": "b",
            "state": "Pending",
            "message": "Reset to Pending after eviction. Previously: Ready",
            "lastTransitionTime": "2026-11-25T02:30:00Z",
        },
        {
            "name": "c",
            "state": "Pending",
            "message": "Reset to Pending after eviction. Previously: Rejected",
            "lastTransitionTime": "2026-11-25T02:30:00Z",
        },
        {
            "name": "d",
            "state": "Pending",
            "message": "Reset to Pending after eviction. Previously: Retry",
            "lastTransitionTime": "2026-11-25T02:30:00Z",
            "requeueAfterSeconds": 60,
            "retryCount": 2,
        },
    ]
    assert checks[1]["state"] == "Ready", "the input is left as it was"


def test_admitted_false_says_there_is_no_reservation_with_or_without_checks() -> None:
    """Kueue v0.20's SyncAdmittedCondition after an eviction (UnadmittedWorkloadsObservability, on by default: its
    checks are reset, so none is Ready, and it still says NoReservation, not v0.19's NoReservationUnsatisfiedChecks)."""
    with_checks = {"status": {"admissionChecks": [{"name": "mk", "state": "Ready"}]}}
    assert no_reservation_terms(with_checks) == ("NoReservation", "The workload has no reservation")
    assert no_reservation_terms({"status": {}}) == ("NoReservation", "The workload has no reservation")
