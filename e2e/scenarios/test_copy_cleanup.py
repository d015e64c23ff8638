"""The copies of finished Jobs leave the workers in batches, and one by one where the verb is not granted (S1's
clean-up, manager/copy_cleanup.py).

Each test reads the workers' audit logs: which request of kfed-manager's deleted each Workload copy, a
``deletecollection`` whose label selector names the manager Workload's uid, or a plain ``delete`` of the copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import LOCAL_QUEUE, job_manifest, named_queue_objects, routed_queue_objects
from e2e.rig.audit import Call, calls
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import Obj, items, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

UID_LABEL = "kfed.io/manager-workload-uid"
ONE_BY_ONE = "one-by-one"
"""A queue whose Jobs go to worker-1 only, for the test that takes deletecollection away there."""


def _submit(fed: Federation, names: list[str], *, queue: str = LOCAL_QUEUE) -> dict[str, Obj]:
    """Create the Jobs in one kubectl call, wait for all to complete; their manager Workloads by Job name."""
    jobs = [job_manifest(name, namespace="default", cpu="1", seconds=2, queue=queue) for name in names]
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}))
    for name in names:
        wait_complete(fed, name)
    workloads = {name: workload_of(fed, name) for name in names}
    assert all(wl is not None for wl in workloads.values()), workloads
    return {name: wl for name, wl in workloads.items() if wl is not None}


def _wait_copies_gone(fed: Federation, workloads: dict[str, Obj]) -> None:
    names = {wl["metadata"]["name"] for wl in workloads.values()} | set(workloads)

    def left() -> list[str]:
        return sorted(
            f"{worker}: {kind} {obj['metadata']['name']}"
            for worker in fed.workers
            for kind in ("workloads.kueue.x-k8s.io", "jobs")
            for obj in items(fed, worker, kind)
            if obj["metadata"]["name"] in names
        )

    wait_for(left, until=lambda found: found == [], timeout=60, what="the finished Jobs' copies to leave the workers")


def _manager_deletes(fed: Federation, worker: str) -> list[Call]:
    """kfed-manager's accepted deletes of Workloads on ``worker``, one by one or as a collection."""
    with fed.clusters[worker].audit_log.open(encoding="utf-8", errors="replace") as log:
        return [
            c
            for c in calls(log)
            if c.client == "kfed-manager" and c.resource == "workloads" and c.verb in ("delete", "deletecollection")
        ]


def test_the_copies_of_jobs_that_finish_together_go_in_batched_deletes(federation: Federation) -> None:
    workloads = _submit(federation, [f"batched-{i}" for i in range(12)])
    _wait_copies_gone(federation, workloads)
    for worker in {wl["status"]["clusterName"] for wl in workloads.values()}:
        mine = {wl["metadata"]["uid"]: wl["metadata"]["name"] for wl in workloads.values()
                if wl["status"]["clusterName"] == worker}  # fmt: skip
        deletes = _manager_deletes(federation, worker)
        batches = [
            c for c in deletes if c.verb == "deletecollection" and c.accepted and c.selected(UID_LABEL) & mine.keys()
        ]
        named = set().union(*(c.selected(UID_LABEL) for c in batches)) if batches else set()
        assert mine.keys() <= named, f"{worker}: copies not deleted in a batch: {sorted(mine.keys() - named)}"
        singles = [c.key for c in deletes if c.verb == "delete" and c.key in {f"default/{n}" for n in mine.values()}]
        assert singles == [], f"{worker}: copies also deleted one by one: {singles}"
    largest = max(
        len(c.selected(UID_LABEL) & {wl["metadata"]["uid"] for wl in workloads.values()})
        for worker in federation.workers
        for c in _manager_deletes(federation, worker)
        if c.verb == "deletecollection"
    )
    assert largest >= 2, "twelve Jobs finishing within seconds of each other never shared a request"


@pytest.fixture
def worker_1_without_deletecollection(federation: Federation) -> Iterator[None]:
    """Queues ``one-by-one`` that send Jobs to worker-1 only, whose manager-access ClusterRole (kfed-agent's chart)
    loses the verb deletecollection on Workloads for the test, as a worker set up with Kueue's documented MultiKueue
    role has it; the role and the queues are restored and removed afterwards."""
    roles = json.loads(federation.kubectl("worker-1", "get", "clusterroles", "-o", "json").stdout)["items"]
    role = next(r for r in roles if r["metadata"]["name"].endswith("-manager-access"))
    original = copy.deepcopy(role)
    for rule in role["rules"]:
        if "workloads" in rule["resources"]:
            rule["verbs"] = [verb for verb in rule["verbs"] if verb != "deletecollection"]
    binding = next(
        b
        for b in json.loads(federation.kubectl("worker-1", "get", "clusterrolebindings", "-o", "json").stdout)["items"]
        if b["roleRef"]["name"] == role["metadata"]["name"]
    )
    subject = binding["subjects"][0]
    identity = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
    federation.expected_forbidden_calls.add(("worker-1", "deletecollection"))  # taken away on purpose, below
    _replace(federation, role)
    manager_objects = routed_queue_objects(ONE_BY_ONE, ["worker-1"], cpu="16")
    worker_objects = named_queue_objects(ONE_BY_ONE, cpu="16", manager=False)
    try:
        _apply(federation, "worker-1", worker_objects)
        _apply(federation, MANAGER, manager_objects)

        def may_deletecollection() -> str:
            answer = federation.kubectl(
                "worker-1", "auth", "can-i", "deletecollection", "workloads.kueue.x-k8s.io", "-n", "default",
                f"--as={identity}", check=False,
            )  # fmt: skip
            return answer.stdout.strip()

        wait_for(
            may_deletecollection,
            until=lambda answer: answer == "no",
            timeout=30,
            what="worker-1's apiserver to refuse deletecollection to the manager",
        )
        yield
    finally:
        _replace(federation, original)
        federation.kubectl(MANAGER, "delete", "jobs", "-l", f"kueue.x-k8s.io/queue-name={ONE_BY_ONE}", "--wait=false")
        for kind, name in [(o["kind"].lower(), o["metadata"]["name"]) for o in reversed(manager_objects)]:
            federation.kubectl(MANAGER, "delete", kind, name, "-n", "default", "--wait=false", "--ignore-not-found")
        for kind in ("localqueue", "clusterqueue"):
            federation.kubectl("worker-1", "delete", kind, ONE_BY_ONE, "-n", "default", "--wait=false")


def _replace(fed: Federation, role: dict[str, Any]) -> None:
    body = copy.deepcopy(role)
    body["metadata"].pop("resourceVersion", None)
    fed.kubectl("worker-1", "replace", "-f", "-", input=json.dumps(body))


def _apply(fed: Federation, cluster: str, objects: list[dict[str, Any]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


@pytest.mark.usefixtures("worker_1_without_deletecollection")
def test_a_worker_that_refuses_deletecollection_gets_one_delete_per_copy_and_the_log_says_what_to_grant(
    federation: Federation,
) -> None:
    workloads = _submit(federation, [f"one-by-one-{i}" for i in range(4)], queue=ONE_BY_ONE)
    assert {wl["status"]["clusterName"] for wl in workloads.values()} == {"worker-1"}
    _wait_copies_gone(federation, workloads)
    deletes = [c for c in _manager_deletes(federation, "worker-1") if c.accepted]
    singles = {c.key for c in deletes if c.verb == "delete"}
    expected = {f"default/{wl['metadata']['name']}" for wl in workloads.values()}
    assert expected <= singles, f"copies not deleted one by one: {sorted(expected - singles)}"
    uids = {wl["metadata"]["uid"] for wl in workloads.values()}
    assert not any(c.selected(UID_LABEL) & uids for c in deletes if c.verb == "deletecollection")
    warned = [
        json.loads(line)
        for log in sorted((federation.directory / "logs").glob("kfed-manager*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if "refuses deletecollection" in line
    ]
    assert any(w.get("cluster") == "worker-1" and "deletecollection" in str(w.get("grant")) for w in warned), warned
