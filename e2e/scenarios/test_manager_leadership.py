"""kfed-manager replicas and leadership (SCENARIOS F7): a standby is ready, and a leader that loses its Lease
because its own apiserver froze takes it back without crashing, with dispatch working again afterwards."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from e2e.rig.controllers import KFED_NAMESPACE, controller_script
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.ports import free_port
from e2e.rig.processes import ProcessRecord, start_process, stop_records
from e2e.scenarios.helpers import submit, wait_complete, worker_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


def _log_events(path: Path) -> list[dict[str, object]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def _count(path: Path, event: str) -> int:
    return sum(1 for e in _log_events(path) if e.get("event") == event)


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as err:
        return 0, str(err)


def _manager(fed: Federation) -> ProcessRecord:
    return next(r for r in fed.controller_records if r.name == "kfed-manager")


def test_a_standby_manager_replica_is_ready_while_another_leads(federation: Federation, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "kfed-manager-standby.log"
    _, record = start_process(
        "kfed-manager-standby",
        [
            controller_script("kfed-manager"),
            "--kubeconfig",
            str(federation.controller_kubeconfig("kfed-manager")),
            "--namespace",
            KFED_NAMESPACE,
            "--health-port",
            str(port),
            "--metrics-port",
            "-1",
            "--bind-address",
            "127.0.0.1",
        ],
        log_path=log,
        die_with_parent=True,
    )
    try:
        wait_for(
            lambda: _count(log, "leader.observed"),
            until=lambda n: n >= 1,
            timeout=30,
            what="the second replica to observe the current leader",
        )
        _, body = wait_for(
            lambda: _readyz(port), until=lambda r: r[0] == 200, timeout=20, what="the standby's /readyz to be 200"
        )
        assert body == "ok"
        assert _count(log, "leader.started_leading") == 0, "the standby took the lease from a live leader"
    finally:
        assert stop_records([record]) == []


def test_f7_manager_survives_losing_and_regaining_its_lease(federation: Federation) -> None:
    manager = _manager(federation)
    log = federation.directory / "logs" / "kfed-manager.log"
    terms_before = _count(log, "leader.started_leading")
    lost_before = _count(log, "leader.lost")
    with federation.paused(MANAGER):
        # Frozen apiserver: renewals time out and after the renew deadline (10 s) the leader gives up its term.
        wait_for(lambda: _count(log, "leader.lost"), until=lambda n: n > lost_before, timeout=40, what="leader.lost")
    wait_for(
        lambda: _count(log, "leader.started_leading"),
        until=lambda n: n > terms_before,
        timeout=60,
        what="kfed-manager to lead again after its apiserver came back",
    )
    assert manager.alive(), "kfed-manager exited after regaining its lease"
    assert not [e for e in _log_events(log) if e.get("level") in ("critical",) or "Traceback" in str(e)]
    submit(federation, "f7-after", cpu="1", seconds=1)
    wait_for(lambda: worker_of(federation, "f7-after"), until=bool, timeout=60, what="f7-after dispatched")
    wait_complete(federation, "f7-after")
    assert manager.alive()
