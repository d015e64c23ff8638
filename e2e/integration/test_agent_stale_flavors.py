"""kfed-agent against a real worker apiserver: a Job copy that arrives started with its flavors' placement as an
older capacity report listed it (a ResourceFlavor's nodeLabels edited in the second before kfed-manager created
it) gets its Workload copy deactivated and evicted (``OutOfSync``) and its quota released, so the manager takes it
back and dispatches it again; a Job copy that carries the flavors' current placement is left running. The manager
is played by kubectl."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.integration.test_agent import (
    NODE_LABEL,
    WORKER,
    RunningAgent,
    apply,
    condition,
    get_json,
    holds_for,
    is_true,
    make_queues,
    running_agent,
)
from e2e.integration.test_agent_job_copies import events_of, job_copy, released, workload_copy
from e2e.rig.federation import Federation
from e2e.waiting import wait_for
from federation.pod_injection import INJECTED_ANNOTATION

pytestmark = pytest.mark.integration

NEW_LABEL = ("kfed.io/test-pool", "b")


@pytest.fixture(scope="module")
def agent(rig: Federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    log_path = tmp_path_factory.mktemp("agent-stale-flavors") / "agent.log"
    with running_agent(rig, log_path) as running:
        yield running


def reported_flavor(rig: Federation, name: str) -> dict[str, Any]:
    status = (get_json(rig, "clustercapacities.kfed.io", "local") or {}).get("status") or {}
    return next((f for f in status.get("flavors") or () if f.get("name") == name), {})


def started(job: dict[str, Any], node_selector: dict[str, str]) -> dict[str, Any]:
    """The Job copy as kfed-manager creates it for an admitted copy: started, the flavors' labels injected."""
    job["spec"]["suspend"] = False
    job["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    return job


def test_a_job_copy_created_with_stale_flavor_labels_is_evicted_and_one_with_current_labels_runs(
    rig: Federation, agent: RunningAgent
) -> None:
    q = make_queues(rig)
    ns = q.namespace
    try:
        stale = workload_copy(ns, "stale", queue=q.local_queue, cpu="1")
        fresh = workload_copy(ns, "fresh", queue=q.local_queue, cpu="1")
        for copy in (stale, fresh):
            rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(copy))

        def workload(name: str) -> dict[str, Any]:
            return get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns) or {}

        wait_for(
            lambda: [workload("stale"), workload("fresh")],
            until=lambda both: all(is_true(w, "Admitted") for w in both),
            timeout=30,
            what="both copies admitted",
        )
        old_labels = {NODE_LABEL[0]: NODE_LABEL[1]}
        new_labels = dict([NODE_LABEL, NEW_LABEL])
        # the ResourceFlavor's nodeLabels change; the next report lists them (what kfed-manager reads)
        apply(
            rig,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": q.flavor},
                "spec": {"nodeLabels": new_labels},
            },
        )
        wait_for(
            lambda: reported_flavor(rig, q.flavor).get("nodeLabels"),
            until=lambda labels: labels == new_labels,
            timeout=15,
            what="the capacity report to list the flavor's new nodeLabels",
        )
        created = dt.datetime.now(dt.UTC)
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(started(job_copy(stale), old_labels)))
        rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(started(job_copy(fresh), new_labels)))

        evicted = wait_for(
            lambda: condition(workload("stale"), "Evicted"),
            until=lambda c: c is not None,
            timeout=30,
            what="the copy whose Job copy has stale flavor labels evicted",
        )
        assert evicted is not None
        message = str(evicted["message"])
        assert (evicted["status"], evicted["reason"]) == ("True", "OutOfSync")
        assert f"nodeSelector {NEW_LABEL[0]}={NEW_LABEL[1]}" in message, message
        assert q.flavor in message, message

        after = wait_for(lambda: workload("stale"), until=released, timeout=30, what="the evicted copy released")
        assert after["spec"]["active"] is False, "deactivated, so it is not admitted again at once"
        requeued = condition(after, "Requeued") or {}
        assert (requeued.get("status"), requeued.get("reason")) == ("False", "OutOfSync")
        job = get_json(rig, "job", "stale", "-n", ns) or {}
        assert job["spec"]["suspend"] is True, "its Job copy is stopped"

        found = wait_for(
            lambda: events_of(rig, ns, "stale", "OutOfSync"), until=bool, timeout=15, what="the OutOfSync Event"
        )
        assert found == [("Warning", message)]
        logged = [
            line
            for line in agent.log_lines()
            if line.get("event") == "workload.evicted" and line.get("workload") == f"{ns}/stale"
        ]
        assert [line.get("reason") for line in logged] == ["OutOfSync"]
        print(f"\nstale Job copy evicted {dt.datetime.now(dt.UTC) - created} after its creation (read back)")

        holds_for(
            "the copy whose Job copy carries the current labels admitted, its Job running, not evicted",
            lambda: (
                is_true(workload("fresh"), "Admitted")
                and not is_true(workload("fresh"), "Evicted")
                and (get_json(rig, "job", "fresh", "-n", ns) or {}).get("spec", {}).get("suspend") is False
            ),
            seconds=3,
        )
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)


def test_a_job_copy_carrying_a_label_since_removed_from_its_flavor_is_evicted_and_the_jobs_own_label_is_not(
    rig: Federation, agent: RunningAgent
) -> None:
    q = make_queues(rig)
    ns = q.namespace
    try:
        both = dict([NODE_LABEL, NEW_LABEL])
        flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": q.flavor}}
        apply(rig, {**flavor, "spec": {"nodeLabels": both}})
        removed = workload_copy(ns, "removed", queue=q.local_queue, cpu="1")
        own = workload_copy(ns, "own", queue=q.local_queue, cpu="1")
        for copy in (removed, own):
            rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(copy))

        def workload(name: str) -> dict[str, Any]:
            return get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns) or {}

        wait_for(
            lambda: [workload("removed"), workload("own")],
            until=lambda pair: all(is_true(w, "Admitted") for w in pair),
            timeout=30,
            what="both copies admitted",
        )
        only = {NODE_LABEL[0]: NODE_LABEL[1]}
        apply(rig, {**flavor, "spec": {"nodeLabels": only}})  # NEW_LABEL removed from the flavor
        wait_for(
            lambda: reported_flavor(rig, q.flavor).get("nodeLabels"),
            until=lambda labels: labels == only,
            timeout=15,
            what="the capacity report to list the flavor without the removed label",
        )
        # built by the manager from the report before the edit: it added both labels and says so
        stale = started(job_copy(removed), both)
        stale["metadata"]["annotations"] = {INJECTED_ANNOTATION: json.dumps({"nodeSelector": both, "tolerations": []})}
        # built after it: the flavor's label, and a nodeSelector of the Job's own (a user's edit of the manager Job)
        fresh = started(job_copy(own), {**only, "team": "y"})
        fresh["metadata"]["annotations"] = {INJECTED_ANNOTATION: json.dumps({"nodeSelector": only, "tolerations": []})}
        for job in (stale, fresh):
            rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(job))

        evicted = wait_for(
            lambda: condition(workload("removed"), "Evicted"),
            until=lambda c: c is not None,
            timeout=30,
            what="the copy whose Job copy carries the removed label evicted",
        )
        assert evicted is not None
        assert (evicted["status"], evicted["reason"]) == ("True", "OutOfSync")
        assert f"carries nodeSelector {NEW_LABEL[0]}={NEW_LABEL[1]}" in str(evicted["message"]), evicted["message"]
        holds_for(
            "the copy whose Job copy has the Job's own extra nodeSelector admitted and not evicted",
            lambda: is_true(workload("own"), "Admitted") and not is_true(workload("own"), "Evicted"),
            seconds=3,
        )
    finally:
        rig.kubectl(WORKER, "delete", "namespace", ns, "--wait=false", check=False)
