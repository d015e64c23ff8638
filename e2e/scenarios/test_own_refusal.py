"""kfed's own cluster refusing a call (its chart's RBAC missing a rule): named where users look, and nothing lost.

kfed runs from the charts with only its ServiceAccounts' tokens. The test takes one rule out of a chart's
ClusterRole, as a hand-edited role might, submits a Job, and checks that the refusal shows as a Warning Event
``Forbidden`` on the object the call was for (once, not once per retry) and as an error log line; that the refused
call is retried with a pause, not hundreds of times a second; and that once the rule is back the Job completes
without anyone touching it. Three calls, three paths: kfed-manager's quota reservation (the scheduler's Workload
status write), kfed-manager's mirror of the worker Job's status (the remote sync's work queue) and kfed-agent's
admission on its worker. And a refused list keeps kfed-manager from starting on a partial view, its /readyz saying why.

A federation of its own: the shared one fails on any 403 in kfed's logs, and the 403s are the point here.
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.queues import queue_objects
from e2e.rig.audit import calls
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.from_charts import rendered_container
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import get, items, submit, wait_complete, workload_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

WORKER = "worker-1"
HOT_LOOP_BOUND = 10
"""Refused writes allowed when the audit log first shows the write refused twice: retried after a pause, that is 2
or a few; retried at once, every pass (the agent's loop before this was fixed), it was 36 by then and 700 five
seconds later."""


@pytest.fixture(scope="module")
def fed() -> Iterator[Federation]:
    bins = ensure_built()
    spec = FederationSpec(
        workers=1, default_shape=NodeShape(count=2), job_seconds=2, controllers=True, from_charts=True
    )
    with tempfile.TemporaryDirectory(prefix="kfed-own-refusal-") as tmp, running(Path(tmp), bins, spec) as fed:
        for cluster in fed.clusters:
            objects = queue_objects(namespace="default", cpu="8", memory="64Gi", manager=cluster == MANAGER)
            fed.kubectl(
                cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
            )
        yield fed


def _cluster_role(fed: Federation, process: str) -> tuple[str, dict[str, Any]]:
    """The cluster and the ClusterRole bound to the ServiceAccount the chart runs ``process`` as."""
    release = next(r for r in fed.releases if r.process == process)
    account = rendered_container(fed, release)["serviceAccountName"]
    bindings = items(fed, release.cluster, "clusterrolebindings")
    names = [
        b["roleRef"]["name"]
        for b in bindings
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == account for s in b.get("subjects") or ())
    ]
    roles = [get(fed, release.cluster, "clusterrole", name) for name in names]
    role = next(r for r in roles if r is not None and any("workloads/status" in x["resources"] for x in r["rules"]))
    return release.cluster, role


class _RuleTakenOut:
    """The ClusterRole of ``process`` without its rule for ``resource``, until ``restore``."""

    def __init__(self, fed: Federation, process: str, resource: str) -> None:
        self.fed = fed
        self.cluster, self.role = _cluster_role(fed, process)
        kept = [rule for rule in self.role["rules"] if rule["resources"] != [resource]]
        assert len(kept) == len(self.role["rules"]) - 1, f"one rule for {resource} in {self.role['metadata']['name']}"
        self._apply(kept)
        self.since = time.time()

    def _apply(self, rules: list[dict[str, Any]]) -> None:
        role = {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": self.role["metadata"]["name"], "labels": self.role["metadata"].get("labels") or {}},
            "rules": rules,
        }
        self.fed.kubectl(self.cluster, "replace", "-f", "-", input=json.dumps(role))

    def restore(self) -> None:
        self._apply(self.role["rules"])


def _refusal_events(fed: Federation, cluster: str, name: str) -> list[dict[str, Any]]:
    return items(fed, cluster, "events", "--field-selector", f"involvedObject.name={name},reason=Forbidden")


def _refused_calls(fed: Federation, cluster: str, *, resource: str, since: float) -> int:
    """Calls by kfed to ``resource`` (``workloads/status``) since ``since`` that the cluster's audit log shows refused
    with 403."""
    with fed.clusters[cluster].audit_log.open(encoding="utf-8", errors="replace") as handle:
        return sum(
            1
            for call in calls(handle)
            if call.code == 403
            and call.client.startswith("kfed-")
            and call.resource == resource
            and call.at is not None
            and call.at >= since
        )


def _assert_retried_not_looped(fed: Federation, cluster: str, *, resource: str, since: float) -> None:
    """The refused write is tried again (kfed did not give up on it), and not in a tight loop."""
    refused = wait_for(
        lambda: _refused_calls(fed, cluster, resource=resource, since=since),
        until=lambda n: n >= 2,
        timeout=30,
        what=f"the refused write to be tried again on {cluster}",
    )
    assert refused <= HOT_LOOP_BOUND, f"{refused} refused writes: retried in a loop, not after a pause"


def _log_has(fed: Federation, process: str, text: str) -> bool:
    return any(text in line for line in (fed.directory / "logs" / f"{process}.log").read_text().splitlines())


def _wait_refusal_event(fed: Federation, cluster: str, name: str, *, what: str) -> dict[str, Any]:
    events = wait_for(
        lambda: _refusal_events(fed, cluster, name),
        until=bool,
        timeout=60,
        what=f"a Warning Event Forbidden on {what}",
    )
    event = events[0]
    assert event["type"] == "Warning", event
    assert "forbidden" in event["message"].lower(), event["message"]
    assert "RBAC" in event["message"], event["message"]
    return event


@dataclass(frozen=True)
class Refused:
    job: str
    process: str
    """The kfed process whose ClusterRole loses the rule."""
    resource: str
    """The rule's resource: the call refused."""
    cluster: str
    """Where the call goes, and where its Event is (on the manager Workload, or on the copy)."""
    loop_checked: bool = True
    """Whether the audit log is checked for a retry loop (the work queue's own backoff paces the status mirror:
    tested in federation/kube/tests/test_workqueue.py)."""


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(Refused("reserve-refused", "kfed-manager", "workloads/status", MANAGER), id="manager-reservation"),
        pytest.param(
            Refused("mirror-refused", "kfed-manager", "jobs/status", MANAGER, loop_checked=False),
            id="manager-status-mirror",
        ),
        pytest.param(
            Refused("admit-refused", f"kfed-agent-{WORKER}", "workloads/status", WORKER), id="agent-admission"
        ),
    ],
)
def test_a_call_its_own_cluster_refuses_is_named_once_and_made_once_allowed(fed: Federation, case: Refused) -> None:
    missing = _RuleTakenOut(fed, case.process, case.resource)
    try:
        submit(fed, case.job, cpu="1", seconds=1)
        workload = wait_for(
            lambda: workload_of(fed, case.job), until=bool, timeout=60, what=f"the Workload of {case.job}"
        )
        assert workload is not None
        name = workload["metadata"]["name"]
        event = _wait_refusal_event(fed, case.cluster, name, what=f"Workload {name} on {case.cluster}")
        assert case.resource.split("/", maxsplit=1)[0] in event["message"], event["message"]
        assert _log_has(fed, case.process, "request refused by this cluster")
        if case.loop_checked:
            _assert_retried_not_looped(fed, case.cluster, resource=case.resource, since=missing.since)
    finally:
        missing.restore()
    wait_complete(fed, case.job, timeout=90)
    assert len(_refusal_events(fed, case.cluster, name)) == 1, "one Event for the refusal, not one per retry"


def _readyz(port: int) -> str | None:
    """kfed-manager's /readyz body (None while nothing answers on its port)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as err:  # 503: not ready, the body says why
        return str(err.read().decode())
    except OSError:
        return None


def test_a_list_its_own_cluster_refuses_keeps_the_manager_unready_saying_why(fed: Federation) -> None:
    """kfed-manager restarted without the rule to list Namespaces: it does not start work on a partial view, and its
    /readyz names the cache and the apiserver's refusal; once the rule is back it becomes ready by itself."""
    port = fed.launches["kfed-manager"].health_port
    missing = _RuleTakenOut(fed, "kfed-manager", "namespaces")
    try:
        with fed.stopped_controller("kfed-manager"):
            pass  # started again at once, now refused its Namespace list
        body = wait_for(
            lambda: _readyz(port),
            until=lambda b: b is not None and "namespaces (403" in b,
            timeout=90,
            what="kfed-manager's /readyz to name the refused Namespace list",
        )
        assert body is not None
        assert "forbidden" in body.lower(), body
    finally:
        missing.restore()
    wait_for(lambda: _readyz(port), until=lambda b: b == "ok", timeout=90, what="kfed-manager ready again")
    submit(fed, "after-readiness", cpu="1", seconds=1)
    wait_complete(fed, "after-readiness", timeout=90)
