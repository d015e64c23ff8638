import pytest

from federation.topology import Taint, Toleration
from federation.topology.taints import selector_matches, taints_tolerated, tolerates


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration(key="gpu", value="true", effect="NoSchedule"), Taint("gpu", "NoSchedule", "true"), True),
        (Toleration(key="gpu", value="false", effect="NoSchedule"), Taint("gpu", "NoSchedule", "true"), False),
        (Toleration(key="gpu", operator="Exists"), Taint("gpu", "NoExecute", "x"), True),
        (Toleration(operator="Exists"), Taint("anything", "NoSchedule"), True),
        (Toleration(key="gpu", operator="Exists", effect="NoSchedule"), Taint("gpu", "NoExecute"), False),
        (Toleration(key="other", operator="Exists"), Taint("gpu", "NoSchedule"), False),
    ],
)
def test_toleration_matching(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_never_filters() -> None:
    assert taints_tolerated([Taint("soft", "PreferNoSchedule")], ())
    assert not taints_tolerated([Taint("hard", "NoExecute")], ())


def test_selector() -> None:
    assert selector_matches({"a": "1"}, {"a": "1", "b": "2"})
    assert not selector_matches({"a": "1"}, {"a": "2"})
    assert selector_matches({}, {})
