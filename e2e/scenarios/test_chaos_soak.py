"""F10 in every run of the suite: Jobs submitted for the whole of the chaos soak's timetable while kfed is hurt.

The soak of ``make bench BENCH=soak`` (``e2e.bench.soak_bench``) on a small scale: 150 Jobs at 1.2 per second, so
Jobs keep arriving through every fault of its timetable (kfed-manager and each kfed-agent SIGKILLed and restarted,
a worker frozen short of the worker-lost timeout and another past it, nodes deleted under running Jobs), kfed run
from its charts. Every invariant the soak checks must hold: each Job finished on the manager (the one in ten made
to fail, Failed), none ran on two workers at once, no copy outlived its Job, no ClusterQueue over its quota, no kfed
process dead, no Traceback, no RBAC refusal, no Job moved by the short freeze.
"""

from __future__ import annotations

import pytest

from e2e.bench.soak_bench import soak

pytestmark = pytest.mark.e2e

JOBS = 150
RATE = 1.2
"""Jobs per second: 150 of them arrive over the timetable's first 125 s (its last fault is at 140 s)."""


def test_jobs_submitted_while_kfed_is_hurt_all_finish_and_every_invariant_holds() -> None:
    report, broken = soak(JOBS, RATE)
    assert not broken, "\n".join(broken)
    assert report["finished"] == JOBS
    assert report["made_to_fail"] == JOBS // 10
    assert report["made_to_fail_failed"] == report["made_to_fail"], "a Job made to fail must end Failed"
    assert report["ran_on_two_workers_at_once"] == 0
    assert report["leftover_copies"] == 0
