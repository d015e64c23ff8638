"""A worker whose credentials refuse kfed-manager's copies: the Job is not stuck, and the refusal is visible.

worker-2 is joined with Kueue's documented MultiKueue role less ``create`` on Jobs (a plausible slip in a
hand-written role). kfed-manager's copy is refused with 403 Forbidden; instead of retrying at once it names the
refusal (a Warning Event ``RemoteWriteForbidden`` on the Workload, the Workload's ``Evicted`` condition, a log line),
remembers it on the Workload (``kfed.io/refused-by`` until ``kfed.io/refused-until``), removes whatever it had
created there, and tries that worker again only after a backoff (``--refusal-backoff``, short here): routed to
worker-2 alone it waits saying why and is tried again by itself; once worker-1 is allowed too, it runs there. A
refusal that heals (a ResourceQuota lifted) needs no one to edit the Workload.

A federation of its own: the shared one fails on any 403 in kfed's logs, and the 403 is the point here.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.interop import KUEUE_MANAGER_RULES, kueue_manager_kubeconfig, use_kubeconfig
from e2e.queues import named_queue_objects, queue_objects, routed_queue_objects
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import NodeShape
from e2e.scenarios.helpers import condition, get, items, remote_copies, submit, wait_complete, workload_of
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for
from federation.conditions import conditions_of

pytestmark = pytest.mark.e2e

QUEUE = "refusal"
MAX_BACKOFF = 4
REFUSING = "worker-2"
PROBED = "probed through the worker's ClusterQueue status"
NO_JOB_CREATE = [
    {**rule, "verbs": [verb for verb in rule["verbs"] if verb != "create"]}
    if rule["apiGroups"] == ["batch"] and rule["resources"] == ["jobs"]
    else rule
    for rule in KUEUE_MANAGER_RULES
]


def _apply(fed: Federation, cluster: str, objects: list[dict[str, object]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


@pytest.fixture(scope="module")
def refusing_federation() -> Iterator[Federation]:
    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        default_shape=NodeShape(count=2),
        job_seconds=2,
        controllers=True,
        manager_args=("--refusal-backoff", "1", "--refusal-backoff-max", str(MAX_BACKOFF)),
    )
    with tempfile.TemporaryDirectory(prefix="kfed-refusal-") as tmp, running(Path(tmp), bins, spec) as fed:
        for cluster in fed.clusters:  # the sample queues bring the ResourceFlavor
            _apply(fed, cluster, queue_objects(namespace="default", cpu="8", memory="64Gi", manager=cluster == MANAGER))
        _apply(fed, MANAGER, routed_queue_objects(QUEUE, [REFUSING], cpu="8"))
        for worker in fed.workers:
            _apply(fed, worker, named_queue_objects(QUEUE, cpu="8", manager=False))
        use_kubeconfig(fed, REFUSING, kueue_manager_kubeconfig(fed, REFUSING, rules=NO_JOB_CREATE))
        wait_for(
            lambda: condition(get(fed, MANAGER, "multikueuecluster", REFUSING, namespace="kfed-system"), "Active"),
            until=lambda c: c is not None and c["status"] == "True" and PROBED in str(c["message"]),
            timeout=60,
            what=f"{REFUSING} Active=True with the restricted credentials",
        )
        yield fed


def test_a_refused_copy_is_named_and_the_job_runs_on_a_worker_that_accepts_it(
    refusing_federation: Federation,
) -> None:
    fed = refusing_federation
    submit(fed, "refused-1", cpu="1", seconds=1, queue=QUEUE)
    workload = wait_for(
        lambda: workload_of(fed, "refused-1"),
        until=lambda wl: (
            wl is not None and REFUSING in (wl["metadata"].get("annotations") or {}).get("kfed.io/refused-by", "")
        ),
        timeout=60,
        what="the Workload to record that worker-2 refused its copy",
    )
    assert workload is not None
    name = workload["metadata"]["name"]
    events = wait_for(  # the Event is sent off the reconcile path: it may trail the annotation
        lambda: items(
            fed, MANAGER, "events", "--field-selector", f"involvedObject.name={name},reason=RemoteWriteForbidden"
        ),
        until=bool,
        timeout=30,
        what="a Warning Event naming the refusal",
    )
    assert events[0]["type"] == "Warning"
    assert "403" in events[0]["message"] or "Forbidden" in events[0]["message"], events[0]["message"]

    requeued = wait_for(
        lambda: workload_of(fed, "refused-1"),
        until=lambda wl: (
            (condition(wl, "Evicted") or {}).get("status") == "True"
            and (condition(wl, "QuotaReserved") or {}).get("status") == "False"
        ),
        timeout=60,
        what="the Workload to be taken back from worker-2",
    )
    evicted = condition(requeued, "Evicted")
    assert evicted is not None
    assert f'worker cluster "{REFUSING}" refused' in evicted["message"], evicted
    wait_for(
        lambda: remote_copies(fed, "refused-1"),
        until=lambda copies: copies == {},
        timeout=30,
        what="no copy of refused-1 left on any worker",
    )
    first_until = _refused_until(requeued)
    assert first_until, "the Workload says when worker-2 is tried again"
    wait_for(
        lambda: workload_of(fed, "refused-1"),
        until=lambda wl: wl is not None and _refused_until(wl) not in ("", first_until),
        timeout=30,
        what="kfed-manager to try worker-2 again by itself once its refusal ended (a new kfed.io/refused-until)",
    )

    _apply(fed, MANAGER, routed_queue_objects(QUEUE, list(fed.workers), cpu="8")[:1])  # worker-1 allowed too
    wait_complete(fed, "refused-1", timeout=90)
    done = workload_of(fed, "refused-1")
    assert (done or {}).get("status", {}).get("clusterName") == "worker-1", "never sent back to the refusing worker"


def test_a_copy_the_workers_quota_refuses_is_not_blamed_on_permissions(refusing_federation: Federation) -> None:
    """A 403 is not always a missing permission: worker-1's ResourceQuota allows no Job in the namespace. The refusal
    says so (and worker-2's, if it was tried, still names the permission); once the quota is removed, the Job runs
    there without anyone touching the Workload."""
    fed = refusing_federation
    _apply(fed, MANAGER, routed_queue_objects(QUEUE, list(fed.workers), cpu="8")[:1])
    quota: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-jobs", "namespace": "default"},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }
    _apply(fed, "worker-1", [quota])
    submit(fed, "over-quota", cpu="1", seconds=1, queue=QUEUE)
    workload = wait_for(
        lambda: workload_of(fed, "over-quota"),
        until=lambda wl: wl is not None and "worker-1" in _refused_by(wl),
        timeout=90,
        what="the Workload to record that worker-1 refused its copy",
    )
    assert workload is not None
    name = workload["metadata"]["name"]

    def refusals_by_worker() -> dict[str, list[str]]:
        events = items(
            fed, MANAGER, "events", "--field-selector", f"involvedObject.name={name},reason=RemoteWriteForbidden"
        )
        return {worker: [e["message"] for e in events if e["message"].startswith(worker)] for worker in fed.workers}

    # The Event is sent off the reconcile path, so it may trail the annotation; and worker-1 is tried again after
    # each backoff (1 s first), so it may have refused more than once by now: every refusal must name the quota.
    by_worker = wait_for(
        refusals_by_worker,
        until=lambda found: bool(found["worker-1"]),
        timeout=30,
        what="a RemoteWriteForbidden Event on the Workload for worker-1's refusal",
    )
    for quota_refusal in by_worker["worker-1"]:
        assert "quota" in quota_refusal, quota_refusal
        assert "not a permission: the cluster's admission refused it" in quota_refusal, quota_refusal
        assert "lack this permission" not in quota_refusal, quota_refusal
    for permission_refusal in by_worker[REFUSING]:
        assert "lack this permission" in permission_refusal, permission_refusal

    fed.kubectl("worker-1", "delete", "resourcequota", "no-jobs")
    # No one edits the Workload: worker-1 is tried again after each backoff (at most MAX_BACKOFF s here).
    # kube-apiserver's quota admission may keep a quota it looked up live for 30 s after the quota is gone (its
    # liveLookupCache), so the first tries may be refused anew.
    try:
        wait_complete(fed, "over-quota", timeout=120)
    except AssertionError as err:  # say where the Workload stands, not only that the Job did not finish
        stands = workload_of(fed, "over-quota") or {}
        conditions = [(c["type"], c["status"], c.get("reason"), c.get("message")) for c in conditions_of(stands)]
        raise AssertionError(f"{err}\nrefused by: {_refused_by(stands)}; conditions: {conditions}") from err
    done = workload_of(fed, "over-quota")
    assert (done or {}).get("status", {}).get("clusterName") == "worker-1"


def _refused_until(workload: dict[str, Any] | None) -> str:
    return str(((workload or {}).get("metadata", {}).get("annotations") or {}).get("kfed.io/refused-until", ""))


def _refused_by(workload: dict[str, Any]) -> list[str]:
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    return [w for w in str(annotations.get("kfed.io/refused-by", "")).split(",") if w]
