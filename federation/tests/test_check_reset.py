"""Kueue's reset of admission checks when a reservation goes (``federation.admission.check_reset``)."""

import datetime as dt
from typing import Any

from federation.admission.check_reset import checks_reset_on_eviction, without_reservation

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


def test_admitted_false_says_there_is_no_reservation() -> None:
    """Kueue v0.20's SyncAdmittedCondition without a reservation (UnadmittedWorkloadsObservability, on by default):
    NoReservation, also after an eviction reset the checks (not v0.19's NoReservationUnsatisfiedChecks)."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}
    [condition] = without_reservation([admitted], now=now, observed_generation=3)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "NoReservation",
        "The workload has no reservation",
    )
    assert (condition["observedGeneration"], condition["lastTransitionTime"]) == (3, "2026-01-01T00:00:00Z")
