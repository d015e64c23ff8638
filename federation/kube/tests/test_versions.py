"""resourceVersions compared as kube-apiserver's growing integers, and only for equality otherwise."""

from __future__ import annotations

import pytest

from federation.kube.versions import not_older


@pytest.mark.parametrize(
    ("seen", "written", "expected"),
    [
        ("42", "42", True),
        ("43", "42", True),
        ("100", "99", True),  # by value, not as text ("100" < "99" as text)
        ("99", "100", False),
        ("41", "42", False),
        ("12345678901234567890123", "9", True),  # any length
        ("abc", "abc", True),  # another server's form: equality only
        ("abd", "abc", False),
        ("042", "41", False),  # a leading zero is not kube-apiserver's form
        ("", "1", False),
        ("1", "", False),
        ("٣", "2", False),  # a non-ASCII digit is not either
    ],
)
def test_not_older(seen: str, written: str, expected: bool) -> None:
    assert not_older(seen, written) is expected
