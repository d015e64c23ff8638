"""The EventRecorder's senders: several Event creates in flight at once, and every queued Event sent."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from federation.kube.api import KubeApi
from federation.kube.recorder import SENDERS, EventRecorder

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "team-a", "uid": "u"}}


class HeldApi:
    """Stands in for the API seam's ``create_event`` only: each create waits until the test lets it finish."""

    def __init__(self, expected: int = 0) -> None:
        self.in_flight = 0
        self.expected = expected
        self.reasons: list[str] = []
        self.release = anyio.Event()
        self.all_senders_busy = anyio.Event()
        self.all_sent = anyio.Event()

    async def create_event(self, regarding: Any, *, reason: str, **_: Any) -> None:
        self.in_flight += 1
        if self.in_flight >= SENDERS:
            self.all_senders_busy.set()
        await self.release.wait()
        self.in_flight -= 1
        self.reasons.append(reason)
        if len(self.reasons) >= self.expected:
            self.all_sent.set()


@pytest.mark.anyio
async def test_events_are_sent_several_at_once_and_none_is_lost() -> None:
    api = HeldApi(expected=3 * SENDERS)
    recorder = EventRecorder(cast(KubeApi, api), controller="c", instance="i")
    for n in range(3 * SENDERS):
        recorder.emit(JOB, reason=f"R{n}", note="n", action="A")
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.run)
        with anyio.fail_after(5):  # one sender at a time would never have SENDERS creates in flight
            await api.all_senders_busy.wait()
        api.release.set()
        with anyio.fail_after(5):
            await api.all_sent.wait()
        tg.cancel_scope.cancel()
    assert recorder.sent == 3 * SENDERS
    assert sorted(api.reasons) == sorted(f"R{n}" for n in range(3 * SENDERS))
    assert recorder.dropped == 0


def test_a_full_queue_drops_and_counts_without_blocking_the_caller() -> None:
    recorder = EventRecorder(cast(KubeApi, HeldApi()), controller="c", instance="i", max_buffer=2)
    for n in range(5):
        recorder.emit(JOB, reason=f"R{n}", note="n", action="A")
    assert recorder.dropped == 3
