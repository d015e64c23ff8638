"""Work-queue concurrency: how wide N keys really run, and how long they take (no cluster needed).

Each reconcile waits a fixed time (an API round trip stand-in), so a queue that runs its workers concurrently
finishes ``keys`` keys in about ``keys / workers`` waits and reaches a peak of ``workers`` keys at once.
"""

from __future__ import annotations

import time

import anyio

from federation.kube.workqueue import WorkQueue


async def _run(keys: int, workers: int, seconds: float) -> tuple[float, int]:
    queue = WorkQueue("bench")
    done = anyio.Event()
    finished = 0

    async def reconcile(_key: str) -> None:
        nonlocal finished
        await anyio.sleep(seconds)
        finished += 1
        if finished == keys:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: queue.run(reconcile, workers=workers))
        await anyio.sleep(0.01)  # all workers idle first: the case that used to run one key at a time
        started = time.perf_counter()
        for i in range(keys):
            queue.add(f"key-{i}")
        await done.wait()
        elapsed = time.perf_counter() - started
        tg.cancel_scope.cancel()
    return elapsed, queue.peak_active


def main() -> None:
    for keys, workers, seconds in ((32, 16, 0.1), (1000, 16, 0.01), (1000, 64, 0.01)):
        elapsed, peak = anyio.run(_run, keys, workers, seconds)
        serial = keys * seconds
        print(
            f"{keys} keys x {seconds * 1000:.0f} ms, {workers} workers: {elapsed:.2f} s "
            f"(one at a time: {serial:.1f} s), peak concurrency {peak}"
        )
