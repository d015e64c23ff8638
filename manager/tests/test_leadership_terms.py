"""Each leadership term runs a fresh runtime; a standby is ready, a leader only once its caches synced."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from manager.app import LeadershipTerms
from manager.decisions.visibility import QueueObjects

pytestmark = pytest.mark.anyio


class _Runtime:
    def __init__(self) -> None:
        self.caches_synced = False
        self.stop = anyio.Event()
        self.runs = 0

    def synced(self) -> tuple[bool, str]:
        return (self.caches_synced, "" if self.caches_synced else "waiting for caches: jobs")

    def remotes_connected(self) -> tuple[bool, str]:
        return True, "1/2 connected; degraded: w2"

    def dashboard_state(self) -> dict[str, object]:
        return {}

    def queue_objects(self) -> QueueObjects:
        return QueueObjects([], [], [])

    async def run(self) -> None:
        self.runs += 1
        await self.stop.wait()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_every_term_gets_a_fresh_runtime_and_readiness_follows_the_term() -> None:
    built: list[_Runtime] = []

    def build() -> _Runtime:
        built.append(_Runtime())
        return built[-1]

    terms = LeadershipTerms(build)
    assert terms.ready() == (True, "standby")
    for term in (1, 2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(terms.lead)
            with anyio.fail_after(5):
                while len(built) < term:  # noqa: ASYNC110
                    await anyio.sleep(0.001)
            assert terms.ready() == (False, "waiting for caches: jobs")
            built[-1].caches_synced = True
            assert terms.ready() == (True, "")
            built[-1].stop.set()
        assert terms.ready() == (True, "standby")
    assert len(built) == 2
    assert built[0] is not built[1]
    assert [r.runs for r in built] == [1, 1]


async def test_a_term_cancelled_by_lost_leadership_leaves_a_ready_standby() -> None:
    terms = LeadershipTerms(_Runtime)
    async with anyio.create_task_group() as tg:
        tg.start_soon(terms.lead)
        await anyio.lowlevel.checkpoint()
        assert terms.current is not None
        tg.cancel_scope.cancel()
    assert terms.current is None
    assert terms.ready() == (True, "standby")
