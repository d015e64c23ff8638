from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from federation.kube.ratelimit import RateLimiter, TokenBucket


def test_burst_is_free_then_spaced_by_qps() -> None:
    bucket = TokenBucket(10.0, 3, now=0.0)
    assert [bucket.reserve(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve(0.0) == pytest.approx(0.1)
    assert bucket.reserve(0.0) == pytest.approx(0.2)


def test_refill_is_capped_at_burst() -> None:
    bucket = TokenBucket(10.0, 2, now=0.0)
    bucket.reserve(0.0)
    bucket.reserve(0.0)
    assert bucket.tokens(100.0) == 2.0
    assert bucket.reserve(100.0) == 0.0


def test_partial_refill() -> None:
    bucket = TokenBucket(4.0, 1, now=0.0)
    assert bucket.reserve(0.0) == 0.0
    assert bucket.reserve(0.125) == pytest.approx(0.125)


def test_clock_going_backwards_does_not_mint_tokens() -> None:
    bucket = TokenBucket(1.0, 1, now=10.0)
    bucket.reserve(10.0)
    assert bucket.tokens(5.0) == 0.0


def test_cancel_returns_the_token() -> None:
    bucket = TokenBucket(1.0, 1, now=0.0)
    bucket.reserve(0.0)
    assert bucket.reserve(0.0) == pytest.approx(1.0)
    bucket.cancel(0.0)
    assert bucket.tokens(0.0) == 0.0


@pytest.mark.parametrize("qps", [0.0, -1.0, math.inf])
def test_unlimited(qps: float) -> None:
    bucket = TokenBucket(qps, 1, now=0.0)
    assert all(bucket.reserve(0.0) == 0.0 for _ in range(1000))


def test_burst_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TokenBucket(1.0, 0, now=0.0)


@given(
    qps=st.floats(min_value=0.5, max_value=1000),
    burst=st.integers(min_value=1, max_value=50),
    n=st.integers(min_value=1, max_value=200),
)
def test_n_requests_at_once_finish_no_earlier_than_rate_allows(qps: float, burst: int, n: int) -> None:
    bucket = TokenBucket(qps, burst, now=0.0)
    delays = [bucket.reserve(0.0) for _ in range(n)]
    assert delays == sorted(delays)
    assert delays[-1] == pytest.approx(max(0, n - burst) / qps)


@pytest.mark.anyio
async def test_limiter_acquire_waits_for_a_token() -> None:
    now = [0.0]
    limiter = RateLimiter(100.0, 1, clock=lambda: now[0])
    assert await limiter.acquire() == 0.0
    waited = await limiter.acquire()
    assert waited == pytest.approx(0.01)
