"""Client-side rate limiting per cluster (QPS / burst), like client-go's token bucket.

A busy manager must not flood one worker's apiserver, and a throttled worker must not slow the others, so each
cluster's client owns one limiter. :class:`TokenBucket` is pure arithmetic over a caller-supplied clock (unit
tested without sleeping); :class:`RateLimiter` adds the async ``acquire``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import anyio

DEFAULT_QPS = 300.0
DEFAULT_BURST = 500


class TokenBucket:
    """Token bucket holding at most ``burst`` tokens, refilled at ``qps`` tokens per second.

    :meth:`reserve` always grants a token and returns how long the caller must wait before using it (tokens may go
    negative), so concurrent callers are served in arrival order, as with ``rate.Limiter.Wait`` in Go.
    ``qps <= 0`` or ``math.inf`` disables limiting.
    """

    def __init__(self, qps: float, burst: int, *, now: float) -> None:
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = now

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0 or math.isinf(self.qps)

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._last)
        self._last = max(self._last, now)
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def tokens(self, now: float) -> float:
        """Tokens available at ``now`` (negative while callers are queued)."""
        self._refill(now)
        return self._tokens

    def reserve(self, now: float) -> float:
        """Take one token; return the delay in seconds (0.0 when a token was available)."""
        if self.unlimited:
            return 0.0
        self._refill(now)
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def cancel(self, now: float) -> None:
        """Give back a token reserved but not used (e.g. the waiter was cancelled)."""
        if self.unlimited:
            return
        self._refill(now)
        self._tokens = min(float(self.burst), self._tokens + 1.0)


class RateLimiter:
    """Async wrapper: ``await limiter.acquire()`` before each request."""

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.bucket = TokenBucket(qps, burst, now=clock())

    async def acquire(self) -> float:
        """Wait for a token; returns the time waited (seconds) for metrics."""
        delay = self.bucket.reserve(self._clock())
        if delay > 0:
            try:
                await anyio.sleep(delay)
            except BaseException:
                self.bucket.cancel(self._clock())
                raise
        return delay
