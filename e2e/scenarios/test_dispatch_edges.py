"""Dispatch edge cases on a real local federation (SCENARIOS.md S2, S6, I4)."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, LOCAL_QUEUE, job_manifest, workload_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, items, submit, wait_complete, workload_of
from e2e.waiting import wait_for

Obj = dict[str, Any]
KUEUE_API = "kueue.x-k8s.io/v1beta2"
HOLD = '{"spec": {"stopPolicy": "Hold"}}'
RUN = '{"spec": {"stopPolicy": "None"}}'

pytestmark = pytest.mark.e2e


def _assert_no_copy(federation: Federation, workload: Obj) -> None:
    """No worker holds a copy of the manager's ``workload``."""
    for worker in federation.workers:
        assert not [
            w for w in items(federation, worker, "workloads") if w["metadata"]["name"] == workload["metadata"]["name"]
        ], f"no copy on {worker}"


def test_s2_the_manager_job_starts_only_after_admission_and_mirrors_status_while_running(
    federation: Federation,
) -> None:
    submit(federation, "s2", cpu="1", parallelism=2, seconds=8)
    samples: list[tuple[bool, bool, int]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        job = get(federation, MANAGER, "job", "s2") or {}
        workload = workload_of(federation, "s2")  # read after the Job: an unsuspended Job implies admission already
        samples.append(
            (
                bool(job.get("spec", {}).get("suspend")),
                is_true(workload, "Admitted"),
                int((job.get("status") or {}).get("active", 0)),
            )
        )
        if is_true(job, "Complete"):
            break
        time.sleep(0.2)
    # (That it is created suspended is the admission policy's test; admission can beat the first sample here.)
    assert samples, "no observation"
    assert all(admitted for suspended, admitted, _ in samples if not suspended), (
        "the manager Job was unsuspended before the worker admitted the workload"
    )
    assert any(active == 2 for _, _, active in samples), "the two running pods were never mirrored"


def test_s6_a_job_that_finishes_before_the_manager_saw_it_run_still_syncs(federation: Federation) -> None:
    submit(federation, "s6", cpu="1", seconds=0)
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "s6"),
        until=lambda j: is_true(j, "Complete"),
        timeout=60,
        what="s6 Complete on the manager",
    )
    assert job is not None
    assert job["status"]["succeeded"] == 1
    assert job["status"].get("completionTime")


def test_i4_a_job_of_parallelism_zero_ends_complete(federation: Federation) -> None:
    """It runs no pod, so its remote status has no startTime; the manager's mirror must still be accepted."""
    manifest = job_manifest("i4-zero", namespace="default", cpu="1", parallelism=0)
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "i4-zero"),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=60,
        what="i4-zero finished on the manager",
    )
    assert job is not None
    assert is_true(job, "Complete"), job.get("status")
    wait_for(
        lambda: workload_of(federation, "i4-zero"),
        until=lambda wl: is_true(wl, "Finished"),
        timeout=30,
        what="the i4-zero Workload Finished",
    )


def test_c2_a_job_without_a_workload_priority_class_takes_its_pods_priority_class(federation: Federation) -> None:
    """As in Kueue, a Job's priority comes from its pods' PriorityClass when it names no WorkloadPriorityClass."""
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "c2-pod-high"},
        "value": 4242,
    }
    for cluster in federation.clusters:  # the worker's pods need it too
        federation.kubectl(cluster, "apply", "-f", "-", input=json.dumps(priority_class))
    manifest = job_manifest("c2-pc", namespace="default", cpu="1", seconds=1)
    manifest["spec"]["template"]["spec"]["priorityClassName"] = "c2-pod-high"
    assert _priority_of_new_job(federation, manifest) == (
        4242,
        {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "c2-pod-high"},
    )


def _priority_of_new_job(federation: Federation, manifest: Obj) -> tuple[int, Obj]:
    """Create the Job ``manifest`` on the manager: its Workload's priority and ``priorityClassRef``, once it ran."""
    name = manifest["metadata"]["name"]
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    workload = wait_for(
        lambda: workload_of(federation, name),
        until=lambda wl: wl is not None,
        timeout=30,
        what=f"the {name} Workload",
    )
    assert workload is not None
    wait_complete(federation, name)
    return workload["spec"]["priority"], workload["spec"]["priorityClassRef"]


def _dry_run_labels(federation: Federation, cluster: str, manifest: Obj) -> dict[str, str]:
    """The labels ``manifest`` would be created with on ``cluster`` (server-side dry run: admission included)."""
    out = federation.kubectl(cluster, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(manifest))
    return dict(json.loads(out.stdout)["metadata"].get("labels") or {})


def test_c2_a_job_created_without_a_workload_priority_class_takes_the_default_one_when_it_exists(
    federation: Federation,
) -> None:
    """Kueue v0.20's WorkloadPriorityClassDefaulting (on by default): a Job created without
    ``kueue.x-k8s.io/priority-class`` gets ``default`` when a WorkloadPriorityClass of that name exists, and its
    Workload that class's priority; without one the Job is left as it is. On a worker, a Job queued there is labelled
    too, a manager's copy is not."""
    label = "kueue.x-k8s.io/priority-class"
    default_class = {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": "default"}}
    worker = federation.workers[0]
    assert label not in _dry_run_labels(federation, MANAGER, job_manifest("c2-plain", namespace="default", cpu="1"))
    try:
        for cluster in federation.clusters:
            federation.kubectl(cluster, "apply", "-f", "-", input=json.dumps({**default_class, "value": 321}))
        for cluster in (MANAGER, worker):  # the policy reads the class through the apiserver's own informer
            probe = functools.partial(
                _dry_run_labels, federation, cluster, job_manifest("c2-default", namespace="default", cpu="1")
            )
            wait_for(
                probe,
                until=lambda labels: labels.get(label) == "default",
                timeout=30,
                what=f"a Job created on {cluster} without a priority class labelled with the default one",
            )
        copy = job_manifest("c2-copy", namespace="default", cpu="1")
        copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "job-c2-copy-00000"
        assert label not in _dry_run_labels(federation, worker, copy), "a manager's copy keeps its manager's labels"
        own = job_manifest("c2-own", namespace="kfed-system", cpu="1")
        assert label not in _dry_run_labels(federation, MANAGER, own), "outside managedJobsNamespaceSelector (#15851)"
        chosen = job_manifest("c2-chosen", namespace="default", cpu="1")
        chosen["metadata"]["labels"][label] = "kfed-test-missing"
        assert _dry_run_labels(federation, MANAGER, chosen)[label] == "kfed-test-missing"

        assert _priority_of_new_job(
            federation, job_manifest("c2-default", namespace="default", cpu="1", seconds=1)
        ) == (
            321,
            {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "default"},
        )
    finally:
        for cluster in federation.clusters:
            federation.kubectl(cluster, "delete", "workloadpriorityclass", "default", "--ignore-not-found")


def test_a_jobs_pods_that_will_not_run_again_give_their_quota_back_on_both_sides(federation: Federation) -> None:
    """Kueue's reclaimable pods: a Job of 3 completions, 2 at a time, needs one pod once two succeeded; its
    Workload on the worker and on the manager say so (``status.reclaimablePods``), so both ClusterQueues hold quota
    for one pod while the last runs."""
    manifest = job_manifest("reclaim", namespace="default", cpu="1", parallelism=2, seconds=10)
    manifest["spec"]["completions"] = 3
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    reclaimed = [{"name": "main", "count": 1}]
    workload = wait_for(
        lambda: workload_of(federation, "reclaim"),
        until=lambda wl: wl is not None and (wl.get("status") or {}).get("reclaimablePods") == reclaimed,
        timeout=60,
        what="the manager Workload to give back the quota of the pod that will not run again",
    )
    assert workload is not None
    assert is_true(workload, "Admitted")
    assert not is_true(workload, "Finished")
    worker = workload["status"]["clusterName"]
    name = workload["metadata"]["name"]
    wait_for(
        lambda: [
            (w.get("status") or {}).get("reclaimablePods")
            for w in items(federation, worker, "workloads")
            if w["metadata"]["name"] == name
        ],
        until=lambda found: found == [reclaimed],
        timeout=10,
        what="the worker's copy to give back the same quota",
    )
    job = get(federation, MANAGER, "job", "reclaim")
    assert job is not None
    assert (job.get("status") or {}).get("succeeded", 0) >= 2, job.get("status")
    wait_complete(federation, "reclaim")


def _flagged(federation: Federation, job: str, what: str) -> tuple[str, Obj]:
    """Wait for Job ``job``'s manager Workload to say ``kfed.io/PodsUnschedulable=True``; its worker and that
    condition. Within 28 s: the shared federation's PodsReady timeout (30 s) evicts the Workload after that."""
    workload = wait_for(
        lambda: workload_of(federation, job),
        until=lambda wl: is_true(wl, "kfed.io/PodsUnschedulable"),
        timeout=28,
        what=what,
    )
    assert workload is not None
    flagged = condition(workload, "kfed.io/PodsUnschedulable")
    assert flagged is not None
    return str(workload["status"]["clusterName"]), flagged


def test_pods_the_worker_cannot_place_are_named_on_the_manager_until_they_are_placed(federation: Federation) -> None:
    """Quota is not nodes: a Job admitted by quota whose pods no worker node takes says why on the manager (the
    worker's scheduler message, naming the worker), and says so no more once a node takes them."""
    label = "kfed-test.io/unschedulable-scenario"
    manifest = job_manifest("unplaced", namespace="default", cpu="1", seconds=20)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {label: "yes"}
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    labelled: list[tuple[str, str]] = []
    try:
        worker, unplaced = _flagged(federation, "unplaced", "the manager Workload saying its pods cannot be scheduled")
        assert unplaced["reason"] == "Unschedulable"
        assert unplaced["message"].startswith(f"worker cluster {worker}: pod unplaced-"), unplaced
        assert "didn't match Pod's node affinity/selector" in unplaced["message"], unplaced
        events = items(
            federation,
            MANAGER,
            "events",
            "--field-selector",
            "involvedObject.kind=Job,involvedObject.name=unplaced,reason=PodsUnschedulable",
        )
        assert [e["type"] for e in events] == ["Warning"], events
        assert worker in events[0]["message"]
        # Room appears on every worker (a PodsReady eviction may have sent it to the other one meanwhile).
        for cluster in federation.workers:
            for node in federation.kubectl(cluster, "get", "nodes", "-o", "name").stdout.split():
                federation.kubectl(cluster, "label", node, f"{label}=yes")
                labelled.append((cluster, node))
        workload = wait_for(
            lambda: workload_of(federation, "unplaced"),
            until=lambda wl: (condition(wl, "kfed.io/PodsUnschedulable") or {}).get("reason") == "Scheduled",
            timeout=60,
            what="the manager Workload saying no pod is unschedulable any more, while the Job runs",
        )
        assert not is_true(workload, "Finished"), "cleared by the worker's agent, not by the finish"
        wait_complete(federation, "unplaced", timeout=90)
    finally:
        for cluster, node in labelled:
            federation.kubectl(cluster, "label", node, f"{label}-", check=False)
        federation.kubectl(MANAGER, "delete", "job", "unplaced", "-n", "default", "--wait=false", check=False)


def test_pods_the_worker_cannot_create_are_named_on_the_manager(federation: Federation) -> None:
    """A Job copy whose pods the worker refuses (here a ServiceAccount that only the manager cluster has) says why on
    the manager, with the worker's Job controller's message, and runs once the worker has what it lacked."""
    account = "kfed-test-trainer"
    federation.kubectl(MANAGER, "create", "serviceaccount", account, "-n", "default")
    manifest = job_manifest("uncreated", namespace="default", cpu="1", seconds=1)
    manifest["spec"]["template"]["spec"]["serviceAccountName"] = account
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    created: list[str] = []
    try:
        worker, uncreated = _flagged(federation, "uncreated", "the manager Workload saying its pods cannot be created")
        assert uncreated["reason"] == "FailedCreate"
        assert uncreated["message"].startswith(f"worker cluster {worker}: the Job copy cannot create its pods: "), (
            uncreated
        )
        assert f'serviceaccount "{account}" not found' in uncreated["message"], uncreated
        selector = "involvedObject.kind=Job,involvedObject.name=uncreated,reason=PodsUnschedulable"
        events = items(federation, MANAGER, "events", "--field-selector", selector)
        assert [e["type"] for e in events] == ["Warning"], events
        for cluster in federation.workers:
            federation.kubectl(cluster, "create", "serviceaccount", account, "-n", "default")
            created.append(cluster)
        wait_complete(federation, "uncreated", timeout=120)
        finished = workload_of(federation, "uncreated")
        assert not is_true(finished, "kfed.io/PodsUnschedulable"), finished
    finally:
        for cluster in created:
            federation.kubectl(cluster, "delete", "serviceaccount", account, "-n", "default", check=False)
        federation.kubectl(MANAGER, "delete", "job", "uncreated", "-n", "default", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "serviceaccount", account, "-n", "default", check=False)


def test_pods_held_by_a_users_scheduling_gate_are_named_on_the_manager(federation: Federation) -> None:
    """A scheduling gate in the user's pod template holds the worker's pods, and what removes it where the Job was
    submitted never sees them: the manager Workload names the gate, and the Job runs once the gate is removed."""
    gate = "kfed-test.io/approval"
    manifest = job_manifest("gated", namespace="default", cpu="1", seconds=1)
    manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": gate}]
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    try:
        worker, held = _flagged(
            federation, "gated", "the manager Workload naming the scheduling gate that holds its pods"
        )
        assert held["message"].startswith(f"worker cluster {worker}: pod gated-"), held
        assert f"held by scheduling gate {gate} from the Job's pod template" in held["message"], held
        for pod in items(federation, worker, "pods", "-l", "batch.kubernetes.io/job-name=gated"):
            remove = '[{"op": "remove", "path": "/spec/schedulingGates"}]'
            federation.kubectl(
                worker, "patch", "pod", pod["metadata"]["name"], "-n", "default", "--type=json", "-p", remove
            )
        wait_complete(federation, "gated", timeout=60)
    finally:
        federation.kubectl(MANAGER, "delete", "job", "gated", "-n", "default", "--wait=false", check=False)


def _reports_cluster_queue_inactive(report: Obj | None) -> bool:
    status = (report or {}).get("status") or {}
    return any(q["name"] == CLUSTER_QUEUE and q.get("active") is False for q in status.get("clusterQueues") or ())


def _reports_local_queue_stopped(report: Obj | None) -> bool:
    status = (report or {}).get("status") or {}
    return any(q["name"] == LOCAL_QUEUE and q.get("stopped") is True for q in status.get("localQueues") or ())


MISSING_CHECK = json.dumps({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "e2e-nowhere"}]}}})
NO_CHECK = json.dumps({"spec": {"admissionChecksStrategy": None}})
STOPPED_QUEUES = {
    "clusterqueue": (
        "clusterqueue",
        CLUSTER_QUEUE,
        _reports_cluster_queue_inactive,
        "is inactive: ClusterQueue is stopped",
        (HOLD, RUN),
    ),
    "localqueue": (
        "localqueue",
        LOCAL_QUEUE,
        _reports_local_queue_stopped,
        f"LocalQueue default/{LOCAL_QUEUE} is stopped",
        (HOLD, RUN),
    ),
    # Kueue keeps a ClusterQueue naming a check that does not exist from admitting (AdmissionCheckNotFound); the agent
    # reserved quota for the copy and left it waiting on a check no one answers until the dispatch timeout
    "missing-check": (
        "clusterqueue",
        CLUSTER_QUEUE,
        _reports_cluster_queue_inactive,
        "is inactive: references missing AdmissionCheck(s): e2e-nowhere",
        (MISSING_CHECK, NO_CHECK),
    ),
}


@pytest.mark.parametrize("case", sorted(STOPPED_QUEUES))
def test_a_stopped_worker_queue_gets_no_copy_and_the_pending_workload_says_why(
    federation: Federation, case: str
) -> None:
    """A worker whose ClusterQueue or LocalQueue is stopped, or whose ClusterQueue names a missing admission check,
    says so in its capacity report: the manager sends it nothing (rather than a copy that waits there until the
    dispatch timeout), the pending Workload names the reason, and the Job is sent once the queue runs again."""
    kind, name, reported, reason, (stop, run) = STOPPED_QUEUES[case]
    job = f"on-hold-{case}"
    stopped: list[str] = []
    try:
        for worker in federation.workers:
            federation.kubectl(worker, "patch", kind, name, "-n", "default", "--type=merge", "-p", stop)
            stopped.append(worker)
        for worker in federation.workers:
            wait_for(
                functools.partial(get, federation, worker, "clustercapacity", "local", namespace=""),
                until=reported,
                timeout=20,
                what=f"{worker}'s capacity report showing its {kind} stopped",
            )
        submit(federation, job, cpu="1", seconds=1)
        workload = wait_for(
            lambda: workload_of(federation, job),
            until=lambda wl: reason in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what=f"the pending Workload naming the workers' stopped {kind}",
        )
        assert workload is not None
        assert not is_true(workload, "QuotaReserved")
        message = condition(workload, "QuotaReserved")["message"]  # type: ignore[index]
        for worker in federation.workers:
            assert f"{worker}: " in message or f"{worker}," in message, message
        _assert_no_copy(federation, workload)
    finally:
        for worker in stopped:
            federation.kubectl(worker, "patch", kind, name, "-n", "default", "--type=merge", "-p", run)
    wait_complete(federation, job, timeout=60)


def _reports_namespace_selected(selected: bool) -> Any:
    def check(report: Obj | None) -> bool:
        status = (report or {}).get("status") or {}
        return any(
            q["name"] == LOCAL_QUEUE and q.get("namespaceNotSelected", False) is not selected
            for q in status.get("localQueues") or ()
        )

    return check


def test_a_worker_queue_that_does_not_select_the_namespace_gets_no_copy_until_the_namespace_is_labelled(
    federation: Federation,
) -> None:
    """A worker whose ClusterQueue's namespaceSelector leaves out the Job's namespace would hold a copy Pending
    ("workload namespace doesn't match ClusterQueue selector") until the dispatch timeout. Its agent's report says
    so: the manager sends nothing, the pending Workload names the reason, and labelling the worker's namespace (the
    agent watches namespaces) lets the Job run."""
    label = "kfed-test/selected"
    selector = json.dumps({"spec": {"namespaceSelector": {"matchLabels": {label: "yes"}}}})
    changed: list[str] = []
    try:
        for worker in federation.workers:
            federation.kubectl(worker, "patch", "clusterqueue", CLUSTER_QUEUE, "--type=merge", "-p", selector)
            changed.append(worker)
        for worker in federation.workers:
            wait_for(
                functools.partial(get, federation, worker, "clustercapacity", "local", namespace=""),
                until=_reports_namespace_selected(False),
                timeout=20,
                what=f"{worker}'s capacity report showing default/{LOCAL_QUEUE} not selected",
            )
        submit(federation, "unselected", cpu="1", seconds=1)
        reason = f"ClusterQueue {CLUSTER_QUEUE} does not select namespace default"
        workload = wait_for(
            lambda: workload_of(federation, "unselected"),
            until=lambda wl: reason in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' namespace selectors",
        )
        assert workload is not None
        _assert_no_copy(federation, workload)
        for worker in federation.workers:
            federation.kubectl(worker, "label", "namespace", "default", f"{label}=yes")
        wait_complete(federation, "unselected", timeout=60)
    finally:
        for worker in changed:
            federation.kubectl(
                worker,
                "patch",
                "clusterqueue",
                CLUSTER_QUEUE,
                "--type=merge",
                "-p",
                json.dumps({"spec": {"namespaceSelector": {"matchLabels": None}}}),
            )
            federation.kubectl(worker, "label", "namespace", "default", f"{label}-", check=False)
    for worker in changed:
        wait_for(
            functools.partial(get, federation, worker, "clustercapacity", "local", namespace=""),
            until=_reports_namespace_selected(True),
            timeout=20,
            what=f"{worker}'s capacity report showing default/{LOCAL_QUEUE} selected again",
        )


def _flavored_queue(name: str, flavors: list[tuple[str, Obj, str, str]], *, manager: bool) -> list[Obj]:
    """ClusterQueue and LocalQueue ``name`` over ``flavors`` (flavor name, its spec, cpu and memory quota), with the
    ResourceFlavors; on the manager with kfed's check."""
    from e2e.rig.controllers import ADMISSION_CHECK

    cq_spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                    }
                    for flavor, _spec, cpu, memory in flavors
                ],
            }
        ],
    }
    if manager:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return [
        *(
            {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": spec}
            for f, spec, _, _ in flavors
        ),
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": cq_spec},
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterQueue": name},
        },
    ]


@contextlib.contextmanager
def _queued_job(
    federation: Federation,
    name: str,
    *,
    manager_flavors: list[tuple[str, Obj, str, str]],
    worker_flavors: list[tuple[str, Obj, str, str]],
    node_selector: Obj,
    memory: str = "1Gi",
    pod_spec: Obj | None = None,
    annotations: dict[str, str] | None = None,
) -> Iterator[None]:
    """The ``name`` queues (over those flavors) on every cluster and a Job ``name`` on them (``pod_spec``: more fields
    of its pod spec; ``annotations``: more of its pod template's); all deleted after."""
    clusters = [MANAGER, *federation.workers]
    for cluster in clusters:
        manager = cluster == MANAGER
        docs = _flavored_queue(name, manager_flavors if manager else worker_flavors, manager=manager)
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        )
    manifest = job_manifest(name, namespace="default", cpu="2", memory=memory, seconds=1, queue=name)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    manifest["spec"]["template"]["spec"].update(pod_spec or {})
    manifest["spec"]["template"]["metadata"]["annotations"].update(annotations or {})
    try:
        federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
        yield
    finally:
        federation.kubectl(MANAGER, "delete", "job", name, "--wait=true", "--timeout=60s", check=False)
        for cluster in clusters:
            for kind in ("localqueue", "clusterqueue"):
                federation.kubectl(cluster, "delete", kind, name, "-n", "default", "--wait=false", check=False)
            flavors = manager_flavors if cluster == MANAGER else worker_flavors
            for flavor, _spec, _cpu, _memory in flavors:
                federation.kubectl(cluster, "delete", "resourceflavor", flavor, "--wait=false", check=False)


@contextlib.contextmanager
def _limit_range(federation: Federation, clusters: list[str], name: str, *items: Obj) -> Iterator[None]:
    """A LimitRange ``name`` with ``items`` in namespace default on ``clusters``; deleted after."""
    manifest = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name}, "spec": {"limits": list(items)}}
    try:
        for cluster in clusters:
            federation.kubectl(cluster, "apply", "-n", "default", "-f", "-", input=json.dumps(manifest))
        yield
    finally:
        for cluster in clusters:
            federation.kubectl(cluster, "delete", "limitrange", name, "-n", "default", "--wait=false", check=False)


@contextlib.contextmanager
def _copies_ask_for_scratch(federation: Federation, job: str) -> Iterator[None]:
    """On every worker, a MutatingAdmissionPolicy that adds 1Gi of ephemeral-storage to the first container's requests
    of the Workload copies of Job ``job`` (a worker-side admission policy the manager cannot see); removed after."""
    name = f"kfed-test-{job}-scratch"
    prefix = f"job-{job}-"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["kueue.x-k8s.io"],
                        "apiVersions": ["v1beta2"],
                        "operations": ["CREATE"],
                        "resources": ["workloads"],
                    }
                ]
            },
            "matchConditions": [{"name": "this-job", "expression": f"object.metadata.name.startsWith('{prefix}')"}],
            "mutations": [
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": "[JSONPatch{op: 'add', path: "
                        "'/spec/podSets/0/template/spec/containers/0/resources/requests/ephemeral-storage', "
                        "value: '1Gi'}]"
                    },
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name},
    }
    probe = workload_manifest(f"{prefix}probe", queue=job)

    def mutated(cluster: str) -> bool:
        done = federation.kubectl(
            cluster, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe), check=False
        )
        if done.returncode != 0:
            return False
        requests = json.loads(done.stdout)["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
        return "ephemeral-storage" in requests.get("requests", {})

    try:
        for cluster in federation.workers:
            federation.kubectl(
                cluster,
                "apply",
                "-f",
                "-",
                input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]}),
            )
        for cluster in federation.workers:
            wait_for(
                functools.partial(mutated, cluster),
                until=bool,
                timeout=30,
                what=f"the scratch admission policy in effect on {cluster}",
            )
        yield
    finally:
        for cluster in federation.workers:
            for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
                federation.kubectl(cluster, "delete", kind, name, "--wait=false", check=False)


def test_a_copy_its_worker_does_not_admit_is_named_on_the_manager_with_the_workers_reason(
    federation: Federation,
) -> None:
    """The workers have an admission policy that adds ephemeral-storage, a resource their ClusterQueue does not cover,
    to the Workload copies' pods: the manager cannot see it, sends the copy, and it waits in the worker's queue.
    Within seconds the manager's MultiKueue check says why, in the worker's words, with an Event, rather than only
    'Dispatched' until the dispatch timeout."""
    with contextlib.ExitStack() as cleanup:
        cleanup.enter_context(_copies_ask_for_scratch(federation, "scratch"))
        cleanup.enter_context(
            _queued_job(
                federation,
                "scratch",
                manager_flavors=[("scratch", {}, "8", "16Gi")],
                worker_flavors=[("scratch", {}, "8", "16Gi")],
                node_selector={},
            )
        )
        said = "resource ephemeral-storage unavailable in ClusterQueue"
        workload = wait_for(
            lambda: workload_of(federation, "scratch"),
            until=lambda wl: any(
                said in str(c.get("message")) for c in (wl or {}).get("status", {}).get("admissionChecks") or ()
            ),
            timeout=45,
            what="the manager's MultiKueue check naming why the worker does not admit the copy",
        )
        assert workload is not None
        message = workload["status"]["admissionChecks"][0]["message"]
        assert message.startswith('not admitted yet in worker cluster "worker-'), message
        events = [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "WaitingOnWorker" and e["regarding"]["name"] == workload["metadata"]["name"]
        ]
        assert events, "a WaitingOnWorker Event on the Workload"
        assert said in events[0]["note"], events


def test_a_worker_whose_runtime_class_overhead_its_queue_lacks_gets_no_copy_and_the_job_says_why(
    federation: Federation,
) -> None:
    """The workers have a RuntimeClass whose pod overhead is a resource their ClusterQueue does not cover, and the
    manager has none: the agents report their RuntimeClasses, so the manager sends no copy and the pending Workload
    says why; once the workers' RuntimeClass has no overhead, the Job runs (before, the copy waited on a worker until
    the dispatch timeout, then on the next one)."""
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kfed-test-scratch"},
        "handler": "scratch",
        "overhead": {"podFixed": {"ephemeral-storage": "1Gi"}},
    }
    with contextlib.ExitStack() as cleanup:
        for cluster in federation.workers:
            cleanup.callback(
                federation.kubectl, cluster, "delete", "runtimeclass", "kfed-test-scratch", "--wait=false", check=False
            )
            federation.kubectl(cluster, "apply", "-f", "-", input=json.dumps(runtime_class))
        cleanup.enter_context(
            _queued_job(
                federation,
                "overhead",
                manager_flavors=[("overhead", {}, "8", "16Gi")],
                worker_flavors=[("overhead", {}, "8", "16Gi")],
                node_selector={},
                pod_spec={"runtimeClassName": "kfed-test-scratch"},
            )
        )
        said = (
            "ClusterQueue overhead has no quota for ephemeral-storage (the pods' requests with the overhead of "
            "RuntimeClass kfed-test-scratch there)"
        )
        workload = wait_for(
            lambda: workload_of(federation, "overhead"),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' RuntimeClass overhead",
        )
        assert workload is not None
        _assert_no_copy(federation, workload)
        for cluster in federation.workers:  # the RuntimeClass's overhead cannot change: it goes, and comes back bare
            federation.kubectl(cluster, "delete", "runtimeclass", "kfed-test-scratch", "--wait=true")
            federation.kubectl(cluster, "apply", "-f", "-", input=json.dumps({**runtime_class, "overhead": None}))
        wait_complete(federation, "overhead")


def test_a_worker_whose_namespace_limit_range_refuses_the_pods_gets_no_copy_until_it_is_lifted(
    federation: Federation,
) -> None:
    """The workers' namespace has a LimitRange whose max the Job's pods exceed (the manager's has none): their agents
    report it, so the manager sends no copy and the pending Workload says why; when the LimitRange goes, the Job
    runs (before, the copy waited on a worker until the dispatch timeout, then on the next one)."""
    with _limit_range(federation, list(federation.workers), "one-cpu-pods", {"type": "Pod", "max": {"cpu": "1"}}):
        submit(federation, "bounded", cpu="2", seconds=1)
        said = (
            "namespace default: resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec: "
            'Invalid value: ["cpu"]: requests must not be above the limitRange max'
        )
        workload = wait_for(
            lambda: workload_of(federation, "bounded"),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' LimitRange",
        )
        assert workload is not None
        _assert_no_copy(federation, workload)
    try:
        wait_complete(federation, "bounded")
    finally:
        federation.kubectl(MANAGER, "delete", "job", "bounded", "--wait=true", "--timeout=60s", check=False)


def test_a_worker_whose_namespace_limit_range_defaults_a_resource_its_queue_lacks_gets_no_copy_until_it_goes(
    federation: Federation,
) -> None:
    """The workers' namespace has a LimitRange whose default request is for a resource their ClusterQueue does not
    cover (the manager's has none): the Job copy's pods would ask for it there, so the manager sends no copy and the
    pending Workload says why; when the LimitRange goes, the Job runs (before, the copy waited in a worker's queue
    until the dispatch timeout, then in the next one's)."""
    scratch = {"type": "Container", "defaultRequest": {"ephemeral-storage": "1Gi"}}
    with _limit_range(federation, list(federation.workers), "scratch-space", scratch):
        submit(federation, "scratch-default", cpu="1", seconds=1)
        said = (
            "has no quota for ephemeral-storage (the pods' requests with the LimitRange defaults of namespace default"
        )
        workload = wait_for(
            lambda: workload_of(federation, "scratch-default"),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' LimitRange default",
        )
        assert workload is not None
        _assert_no_copy(federation, workload)
    try:
        wait_complete(federation, "scratch-default")
    finally:
        federation.kubectl(MANAGER, "delete", "job", "scratch-default", "--wait=true", "--timeout=60s", check=False)


def test_a_worker_queue_whose_flavors_each_lack_a_resource_gets_no_copy_and_says_why(federation: Federation) -> None:
    """The workers' ClusterQueue has two flavors in one resource group, one with the cpu and one with the memory the
    Job asks for, and none with both: the worker's flavor assignment could not admit it, so the manager sends no copy
    and the pending Workload says why (before, the copy waited there until the dispatch timeout)."""
    with _queued_job(
        federation,
        "split",
        manager_flavors=[("split-a", {}, "8", "16Gi")],
        worker_flavors=[("split-a", {}, "4", "1Gi"), ("split-b", {}, "1", "16Gi")],
        node_selector={},
        memory="2Gi",
    ):
        said = "ClusterQueue split: no one flavor has room for pod set main's 2 cpu, 2Gi memory together"
        workload = wait_for(
            lambda: workload_of(federation, "split"),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' flavors",
        )
        assert workload is not None
        _assert_no_copy(federation, workload)


def _charged_cpu(federation: Federation, manifest: Obj) -> str:
    """Create the Job ``manifest`` on the manager, wait for its Workload to reserve quota, and return the cpu charged
    (its first pod set's ``resourceUsage``) once the Job completed; the Job is deleted after."""
    name = manifest["metadata"]["name"]
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    try:
        workload = wait_for(
            lambda: workload_of(federation, name),
            until=lambda wl: is_true(wl, "QuotaReserved"),
            timeout=45,
            what=f"the Workload of Job {name} to reserve quota",
        )
        assert workload is not None
        usage = workload["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
        wait_complete(federation, name)
        return str(usage.get("cpu"))
    finally:
        federation.kubectl(MANAGER, "delete", "job", name, "--wait=true", "--timeout=60s", check=False)


def test_a_job_without_requests_is_charged_its_namespaces_limit_range_defaults(federation: Federation) -> None:
    """The manager's namespace has a LimitRange with default requests and the Job's container asks for nothing: its
    pods will get the defaults, so its quota is the defaults (as in Kueue), not nothing."""
    defaults = {"type": "Container", "defaultRequest": {"cpu": "1500m"}, "default": {"cpu": "2"}}
    with _limit_range(federation, [MANAGER], "defaults", defaults):
        manifest = job_manifest("defaulted", namespace="default", cpu="1", parallelism=2, seconds=1)
        manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
        assert _charged_cpu(federation, manifest) == "3"


def test_a_job_with_pod_level_resources_is_charged_them(federation: Federation) -> None:
    """Pod-level ``resources`` (KEP-2837) set what the pod takes of cpu and memory, whatever its containers ask: the
    quota charged is the pod-level figure, as the scheduler and Kueue count it."""
    manifest = job_manifest("pod-level", namespace="default", cpu="1", parallelism=2, seconds=1)
    manifest["spec"]["template"]["spec"]["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    assert _charged_cpu(federation, manifest) == "4"


def test_a_job_naming_a_runtime_class_is_charged_its_overhead(federation: Federation) -> None:
    """A RuntimeClass with a pod overhead (on every cluster, as its pods need it where they run): the pods get the
    overhead at creation, so the quota charged includes it, as in Kueue."""
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kfed-test-sandboxed"},
        "handler": "sandboxed",
        "overhead": {"podFixed": {"cpu": "500m"}},
    }
    clusters = [MANAGER, *federation.workers]
    manifest = job_manifest("sandboxed", namespace="default", cpu="1", parallelism=2, seconds=1)
    manifest["spec"]["template"]["spec"]["runtimeClassName"] = "kfed-test-sandboxed"
    try:
        for cluster in clusters:
            federation.kubectl(cluster, "apply", "-f", "-", input=json.dumps(runtime_class))
        assert _charged_cpu(federation, manifest) == "3"
    finally:
        for cluster in clusters:
            federation.kubectl(cluster, "delete", "runtimeclass", "kfed-test-sandboxed", "--wait=false", check=False)


def test_a_job_above_its_namespaces_limit_range_waits_with_the_reason_and_runs_once_it_is_lifted(
    federation: Federation,
) -> None:
    """A Job whose pods the manager's namespace LimitRange would refuse is not admitted (its pods could never be
    created) and says why; when the LimitRange goes, it runs."""
    with _limit_range(federation, [MANAGER], "small-pods", {"type": "Pod", "max": {"cpu": "1"}}):
        submit(federation, "oversized", cpu="2", seconds=1)
        said = "resources didn't satisfy LimitRange constraints"
        workload = wait_for(
            lambda: workload_of(federation, "oversized"),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the LimitRange",
        )
        assert workload is not None
        reserved = condition(workload, "QuotaReserved")
        assert reserved is not None
        assert "requests must not be above the limitRange max" in reserved["message"]
    try:
        wait_complete(federation, "oversized")
    finally:
        federation.kubectl(MANAGER, "delete", "job", "oversized", "--wait=true", "--timeout=60s", check=False)


POOL_A = {"nodeLabels": {"kfed-test/pool": "a"}}
TAINTED = {"nodeTaints": [{"key": "kfed-test/pool", "value": "a", "effect": "NoSchedule"}]}
RACK = {"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack"}
RULED_OUT: dict[str, tuple[Obj, Obj, dict[str, str], str]] = {
    "labels": (POOL_A, {"kfed-test/pool": "b"}, {}, "flavor ruled-out-labels doesn't match node affinity"),
    "taints": (TAINTED, {}, {}, "untolerated taint kfed-test/pool=a:NoSchedule in flavor ruled-out-taints"),
    # as in Kueue, only a flavor with a topologyName takes a pod set that asks for a topology
    "topology": ({}, {}, RACK, 'Flavor "ruled-out-topology" does not support TopologyAwareScheduling'),
}


@pytest.mark.parametrize("by", sorted(RULED_OUT))
def test_a_job_no_worker_flavor_can_take_by_its_nodes_gets_no_copy_and_says_why(
    federation: Federation, by: str
) -> None:
    """The workers' flavor selects nodes labelled ``kfed-test/pool: a``, or taints them, or has no topology, as their
    reports say; a Job asking for pool ``b``, or not tolerating the taint, or requiring a rack, fits the manager's
    flavor (no labels, no taints, its topology not judged on a manager) but no worker's: it is sent nowhere, and its
    Workload says so. (A Job requiring a rack used to be sent and run without one.)"""
    worker_flavor, node_selector, annotations, reason = RULED_OUT[by]
    name = f"ruled-out-{by}"
    with _queued_job(
        federation,
        name,
        manager_flavors=[(name, {}, "4", "16Gi")],
        worker_flavors=[(name, worker_flavor, "4", "16Gi")],
        node_selector=node_selector,
        annotations=annotations,
    ):
        said = f"ClusterQueue {name}: pod set main: {reason}"
        workload = wait_for(
            lambda: workload_of(federation, name),
            until=lambda wl: said in (condition(wl, "QuotaReserved") or {}).get("message", ""),
            timeout=30,
            what="the pending Workload naming the workers' flavors",
        )
        assert workload is not None
        assert not is_true(workload, "QuotaReserved")
        _assert_no_copy(federation, workload)
