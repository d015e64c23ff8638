"""The dashboard kfed-manager serves, in headless Chromium on the rig: it loads, shows the workers and queues, and
shows a Job submitted after the page was loaded without a reload (its live update); a screenshot is saved."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from e2e.browser import Browser, ensure_chromium
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import submit
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

OUTPUT = Path(os.environ.get("KFED_TEST_OUTPUT", Path(__file__).resolve().parents[2] / ".test-output"))


def _dashboard_url(fed: Federation) -> str:
    release = next(r for r in fed.releases if r.process == "kfed-manager")
    return f"http://127.0.0.1:{release.values['dashboard.port']}/"


def test_dashboard_shows_a_new_job_live(federation: Federation, tmp_path: Path) -> None:
    fed = federation
    chromium = ensure_chromium()
    url = _dashboard_url(fed)
    with urllib.request.urlopen(url + "api/state", timeout=10) as response:
        state = json.loads(response.read())
    assert sorted(w["name"] for w in state["workers"]) == sorted(fed.workers)
    assert all(w["connected"] for w in state["workers"])
    with Browser(chromium, tmp_path / "profile") as browser:
        page = browser.open(url)
        wait_for(
            # the body is null until the page has parsed it: counted as no update yet
            lambda: page.eval("Number(document.body?.dataset.updates || 0)"),
            until=lambda n: n >= 1,
            timeout=30,
            what="the dashboard's first update",
        )
        loaded_at = page.eval("window.kfedLoadedAt")
        text = page.eval("document.body.innerText")
        assert "dash-live" not in text
        for worker in fed.workers:
            assert page.eval(f"document.querySelector('[data-worker=\"{worker}\"]').dataset.connected") == "true"
        submit(fed, "dash-live", cpu="1", seconds=20)
        try:
            wait_for(
                lambda: page.eval("document.getElementById('running').innerText"),
                until=lambda t: "job-dash-live-" in t and any(w in t for w in fed.workers),
                timeout=45,
                what="the running table to show the new Job's Workload on a worker, without a reload",
            )
            assert page.eval("window.kfedLoadedAt") == loaded_at, "the page was reloaded"
            assert "live · updated" in page.eval("document.getElementById('status').innerText")
            shot = page.screenshot(tmp_path / "dashboard.png")
            OUTPUT.mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, OUTPUT / "dashboard.png")
            assert shot.stat().st_size > 10_000
        finally:
            fed.kubectl(MANAGER, "delete", "job", "dash-live", "--ignore-not-found", "--wait=false")
