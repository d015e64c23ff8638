"""A worker whose apiserver stops answering is shown unhealthy within seconds, gets no new Jobs, and comes back.

The worker's apiserver is frozen (SIGSTOP): its TCP connections stay open and no request or watch fails on its
own, the outage a client sees least. The manager must notice through its own liveness probe of the connection,
say so on the MultiKueueCluster (``Active=False``, Kueue's ``ClientConnectionFailed``) and in an Event, dispatch
the Jobs submitted meanwhile to the healthy worker only, and show the worker ``Active`` again once it answers.
"""

from __future__ import annotations

import json
import time
from functools import partial

import pytest

from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, items, submit
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

FROZEN, HEALTHY = "worker-1", "worker-2"
DETECT_WITHIN = 15.0
"""Seconds from the freeze to Active=False (probe interval + probe timeout + a status write, with slack)."""
JOBS = 6
MIN_OUTAGE = 25.0
"""The freeze lasts at least this long; the worker must stay Active=False all along."""


def _active(fed: Federation, worker: str) -> dict[str, object] | None:
    return condition(get(fed, MANAGER, "multikueuecluster", worker), "Active")


def _admitted(fed: Federation, submitted: dict[str, float], seen: dict[str, tuple[float, str]]) -> int:
    """Record, for each submitted Job whose manager Workload is newly Admitted, seconds since submit and worker."""
    workloads = items(fed, MANAGER, "workloads.kueue.x-k8s.io")
    now = time.monotonic()  # after the read: an upper bound of the wait, to the poll's resolution (~0.2 s)
    for wl in workloads:
        owners = [ref["name"] for ref in wl["metadata"].get("ownerReferences") or () if ref.get("kind") == "Job"]
        job = owners[0] if owners else None
        if job in submitted and job not in seen and is_true(wl, "Admitted"):
            seen[job] = (now - submitted[job], str((wl.get("status") or {}).get("clusterName")))
    return len(seen)


def _event_reasons(fed: Federation, worker: str) -> list[str]:
    out = fed.kubectl(
        MANAGER,
        "get",
        "events",
        "-n",
        "default",
        "--field-selector",
        f"involvedObject.kind=MultiKueueCluster,involvedObject.name={worker}",
        "-o",
        "json",
    ).stdout
    return [str(e.get("reason")) for e in json.loads(out)["items"]]


def test_a_frozen_worker_is_unhealthy_within_seconds_gets_no_new_jobs_and_comes_back(federation: Federation) -> None:
    assert (_active(federation, FROZEN) or {}).get("status") == "True"
    submitted: dict[str, float] = {}
    seen: dict[str, tuple[float, str]] = {}
    with federation.paused(FROZEN):
        frozen_at = time.monotonic()
        wait_for(
            lambda: _active(federation, FROZEN),
            until=lambda c: c is not None and c["status"] == "False" and c["reason"] == "ClientConnectionFailed",
            timeout=DETECT_WITHIN,
            what=f"{FROZEN} Active=False ClientConnectionFailed while its apiserver is frozen",
        )
        detected = time.monotonic() - frozen_at
        for i in range(JOBS):
            name = f"outage-{i}"
            submit(federation, name, cpu="1", seconds=2)
            submitted[name] = time.monotonic()
        wait_for(
            lambda: _admitted(federation, submitted, seen),
            until=lambda n: n == JOBS,
            timeout=60,
            what=f"all {JOBS} Jobs submitted during the outage to be admitted",
            interval=0.2,
        )
        assert {worker for _, worker in seen.values()} == {HEALTHY}, seen
        for name in submitted:
            job = wait_for(
                partial(get, federation, MANAGER, "job", name),
                until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
                timeout=60,
                what=f"{name} to finish on {HEALTHY}",
            )
            assert is_true(job, "Complete"), job
        while time.monotonic() - frozen_at < MIN_OUTAGE:  # a long outage stays visible: no flapping back
            still = _active(federation, FROZEN)
            assert still is not None
            assert (still["status"], still["reason"]) == ("False", "ClientConnectionFailed"), still
            time.sleep(0.5)
        outage = time.monotonic() - frozen_at
    resumed_at = time.monotonic()
    wait_for(
        lambda: _active(federation, FROZEN),
        until=lambda c: c is not None and c["status"] == "True" and c["reason"] == "Active",
        timeout=30,
        what=f"{FROZEN} Active=True again once its apiserver answers",
    )
    recovered = time.monotonic() - resumed_at
    reasons = wait_for(
        lambda: _event_reasons(federation, FROZEN),
        until=lambda r: "ClientConnectionFailed" in r and "Active" in r,
        timeout=15,
        what=f"Events on MultiKueueCluster {FROZEN} for the failure and the recovery",
    )
    waits = sorted(w for w, _ in seen.values())
    print(
        f"\noutage {outage:.1f}s: {FROZEN} Active=False after {detected:.1f}s, Active=True {recovered:.1f}s after "
        f"resume; submit->Admitted on {HEALTHY} min {waits[0]:.1f}s max {waits[-1]:.1f}s "
        f"median {waits[len(waits) // 2]:.1f}s; events {sorted(set(reasons))}"
    )
    for name in submitted:
        federation.kubectl(MANAGER, "delete", "job", name, "--wait=false", check=False)
