"""Topology-aware scheduling on the workers (issue 10): placement at admission, pinning by the ungater and the
real kube-scheduler binding inside the assigned domains; node failures of any number replaced inside the
required domain, or the workload evicted with NodeFailures and re-dispatched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.rig.federation import Federation
from e2e.rig.nodes import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL
from e2e.scenarios.helpers import worker_of
from e2e.scenarios.tas_support import (
    all_running,
    delete_job,
    domains,
    live_pods,
    remote_workload,
    submit_tas,
    tas_federation,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tas() -> Iterator[Federation]:
    yield from tas_federation()


def _running(fed: Federation, job: str, count: int, timeout: float = 60) -> tuple[str, dict[str, str]]:
    """(worker, pod → node) once the Job's ``count`` pods run on its worker."""
    worker = wait_for(lambda: worker_of(fed, job), until=bool, timeout=timeout, what=f"{job} dispatched")
    assert worker is not None
    nodes = wait_for(
        lambda: all_running(fed, worker, job, count),
        until=lambda found: found is not None,
        timeout=timeout,
        what=f"{count} pods of {job} running on {worker}",
    )
    assert nodes is not None
    return worker, nodes


def test_required_rack_lands_in_one_rack(tas: Federation) -> None:
    submit_tas(tas, "tas-rack", pods=6, cpu="4", required=RACK_LABEL, queue="tas-queue", seconds=30)
    try:
        worker, nodes = _running(tas, "tas-rack", 6)
        assert len(domains(tas, worker, list(nodes.values()), RACK_LABEL)) == 1, nodes
        wl = remote_workload(tas, worker, "tas-rack")
        assert wl is not None
        assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        assert assignment["levels"] == [HOSTNAME_LABEL]
        for pod in live_pods(tas, worker, "tas-rack"):
            assert pod["spec"]["nodeSelector"][HOSTNAME_LABEL] == pod["spec"]["nodeName"]
            assert not pod["spec"].get("schedulingGates")
    finally:
        delete_job(tas, "tas-rack")


def test_preferred_spreads_only_when_no_rack_fits(tas: Federation) -> None:
    submit_tas(tas, "tas-pref-fits", pods=3, cpu="8", preferred=RACK_LABEL, seconds=30)
    submit_tas(tas, "tas-pref-spreads", pods=6, cpu="8", preferred=RACK_LABEL, seconds=30)
    try:
        worker, fits = _running(tas, "tas-pref-fits", 3)
        assert len(domains(tas, worker, list(fits.values()), RACK_LABEL)) == 1, fits
        worker, spread = _running(tas, "tas-pref-spreads", 6)
        assert len(domains(tas, worker, list(spread.values()), RACK_LABEL)) == 2, spread
        assert len(domains(tas, worker, list(spread.values()), BLOCK_LABEL)) == 1, spread
    finally:
        delete_job(tas, "tas-pref-fits")
        delete_job(tas, "tas-pref-spreads")


def test_implicit_tas_assigns_a_topology_to_a_job_without_annotations(tas: Federation) -> None:
    submit_tas(tas, "tas-implicit", pods=3, cpu="2", queue="tas-queue", seconds=30)
    try:
        worker, _ = _running(tas, "tas-implicit", 3)
        wl = remote_workload(tas, worker, "tas-implicit")
        assert wl is not None
        assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        assert assignment["levels"] == [HOSTNAME_LABEL]
        for pod in live_pods(tas, worker, "tas-implicit"):
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/tas"] == "true"
            assert pod["spec"]["nodeSelector"][HOSTNAME_LABEL] == pod["spec"]["nodeName"]
    finally:
        delete_job(tas, "tas-implicit")
