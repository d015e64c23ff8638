import datetime as dt

from federation.conditions import find_condition, is_true, set_condition

T0 = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=1)


def test_adding_a_condition_stamps_the_transition_time() -> None:
    conditions, changed = set_condition(
        [],
        condition_type="QuotaReserved",
        status=True,
        reason="QuotaReserved",
        message="Quota reserved in ClusterQueue cq",
        now=T0,
    )
    assert changed
    assert conditions == [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "Quota reserved in ClusterQueue cq",
            "lastTransitionTime": "2026-11-21T10:00:00Z",
        }
    ]


def test_setting_the_same_condition_again_is_not_a_change() -> None:
    first, _ = set_condition([], condition_type="A", status=False, reason="Pending", message="m", now=T0)
    second, changed = set_condition(first, condition_type="A", status=False, reason="Pending", message="m", now=T1)
    assert not changed
    assert second == first


def test_message_change_keeps_transition_time_but_status_change_moves_it() -> None:
    first, _ = set_condition([], condition_type="A", status=False, reason="Pending", message="m1", now=T0)
    second, changed = set_condition(first, condition_type="A", status=False, reason="Pending", message="m2", now=T1)
    assert changed
    assert second[0]["lastTransitionTime"] == "2026-11-21T10:00:00Z"
    third, _ = set_condition(second, condition_type="A", status=True, reason="Admitted", message="ok", now=T1)
    assert third[0]["lastTransitionTime"] == "2026-11-21T10:01:00Z"
    assert is_true({"status": {"conditions": third}}, "A")
    assert find_condition({"status": {"conditions": third}}, "B") is None
