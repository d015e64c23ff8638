from __future__ import annotations

from federation.resources import Resources


def test_arithmetic_is_exact_and_drops_zeros() -> None:
    a = Resources.parse({"cpu": "500m", "memory": "1Gi"})
    b = Resources.parse({"cpu": "1.5", "nvidia.com/gpu": "1"})
    assert (a + b) == Resources.parse({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"})
    assert (a - a) == Resources()
    assert len(a - Resources.parse({"cpu": "500m"})) == 1
    assert a.scaled(3).get_amount("cpu") == 1500


def test_fits_is_a_partial_order_with_missing_as_zero() -> None:
    small = Resources.parse({"cpu": "1"})
    large = Resources.parse({"cpu": "2", "memory": "1Gi"})
    assert small <= large
    assert not large <= small
    assert large >= small
    assert not Resources.parse({"gpu": "1"}).fits_in(large)
    assert large.exceeding(small) == {"cpu": 1000, "memory": 1_073_741_824_000}
    assert small.exceeding(large) == {}


def test_format_prints_kubernetes_quantities() -> None:
    vector = Resources.parse({"memory": "1536Mi", "cpu": "0.5"})
    assert vector.format() == "cpu=500m, memory=1536Mi"
    assert (vector - Resources.parse({"cpu": "1"})).clamped_at_zero() == Resources.parse({"memory": "1536Mi"})
