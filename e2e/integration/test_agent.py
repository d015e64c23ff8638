"""kfed-agent against a real worker apiserver: the manager's side of the protocol is played by kubectl.

The agent runs as a real subprocess (the console script) on worker-1. Each test creates its own namespace,
ResourceFlavor, ClusterQueue and LocalQueue, then the Workload copy and suspended Job copy the manager would
create (``federation.protocol``), and waits — with deadlines, never bare sleeps — for what the agent must do.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from e2e.rig.federation import REPO_ROOT, Federation
from federation.conditions import conditions_of

pytestmark = pytest.mark.integration

WORKER = "worker-1"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MANAGER_UID_LABEL = "kfed.io/manager-workload-uid"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
NODE_LABEL = ("kfed.io/kwok-node", "true")
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float = 30.0, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` and the last value at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {last!r}")


def holds_for(what: str, probe: Callable[[], bool], *, seconds: float, interval: float = 0.2) -> None:
    """Assert ``probe`` stays true for ``seconds`` (for "stays pending", "no more writes")."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe(), f"{what} stopped holding"
        time.sleep(interval)


@dataclass
class RunningAgent:
    process: subprocess.Popen[bytes]
    log_path: Path
    health_port: int

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    @contextlib.contextmanager
    def log_on_failure(self, lines: int = 80) -> Iterator[None]:
        """A failed assertion inside carries the last ``lines`` lines of the agent's log (what it decided)."""
        try:
            yield
        except AssertionError as err:
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
            raise AssertionError(f"{err}\n--- last {lines} lines of {self.log_path}:\n{tail}") from err

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()


def _listening_port(log_path: Path) -> int | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if '"agent.listening"' in line:
            return int(json.loads(line)["health_port"])
    return None


@pytest.fixture(scope="module")
def agent(rig: Federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    """The real kfed-agent on worker-1, stopped with SIGTERM (killed if it will not stop) whatever happens."""
    with running_agent(rig, tmp_path_factory.mktemp("agent") / "agent.log") as running:
        yield running


@contextlib.contextmanager
def running_agent(rig: Federation, log_path: Path, *flags: str) -> Iterator[RunningAgent]:
    """kfed-agent on worker-1 with ``flags`` added, ready; stopped with SIGTERM (killed if it will not stop), or
    only reaped when the test killed it with SIGKILL."""
    rig.kubectl(WORKER, "create", "namespace", "kfed-system", check=False)
    command = [
        str(REPO_ROOT / ".venv" / "bin" / "kfed-agent"),
        f"--kubeconfig={rig.kubeconfig(WORKER)}",
        f"--cluster-name={WORKER}",
        "--health-port=0",
        "--metrics-port=-1",
        "--bind-address=127.0.0.1",
        "--log-level=debug",
        *flags,
    ]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    try:
        port = wait_for("the agent to listen", lambda: process.poll() is None and _listening_port(log_path), timeout=20)
        running = RunningAgent(process, log_path, port)
        wait_for("the agent to be ready", lambda: running.get("/readyz")[0] == 200, timeout=30)
        yield running
        if process.poll() == -signal.SIGKILL:
            return  # the test killed it (a leader that must not release its Lease): nothing to stop
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, "kfed-agent must exit 0 on SIGTERM"
        print(f"\nkfed-agent stopped {time.monotonic() - stopping:.2f}s after SIGTERM")
        stopped = [line for line in running.log_lines() if line.get("event") == "agent.stopped"]
        assert stopped, "the agent logs its API call counts when it stops"
        print(f"\nkfed-agent API calls: {json.dumps(stopped[-1].get('api_calls'), indent=1)}")
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        if os.environ.get("KFED_SHOW_AGENT_LOG"):
            print(log_path.read_text())


# -- helpers playing the manager ----------------------------------------------------------------------------


def get_json(rig: Federation, *args: str) -> dict[str, Any] | None:
    result = rig.kubectl(WORKER, "get", *args, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def apply(rig: Federation, *objects: dict[str, Any]) -> None:
    rig.kubectl(
        WORKER,
        "apply",
        "--server-side",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
    )


def condition(obj: dict[str, Any] | None, condition_type: str) -> dict[str, Any] | None:
    for found in ((obj or {}).get("status") or {}).get("conditions") or ():
        if found.get("type") == condition_type:
            return dict(found)
    return None


def is_true(obj: dict[str, Any] | None, condition_type: str) -> bool:
    found = condition(obj, condition_type)
    return found is not None and found["status"] == "True"


@dataclass
class Queues:
    namespace: str
    flavor: str
    cluster_queue: str
    local_queue: str


def make_queues(rig: Federation, **cluster_queue_spec: Any) -> Queues:
    suffix = uuid.uuid4().hex[:6]
    q = Queues(f"agent-{suffix}", f"rf-{suffix}", f"cq-{suffix}", "lq")
    rig.kubectl(WORKER, "create", "namespace", q.namespace)
    apply(
        rig,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": q.flavor},
            "spec": {"nodeLabels": {NODE_LABEL[0]: NODE_LABEL[1]}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": q.cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": q.flavor, "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                    }
                ],
                **cluster_queue_spec,
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": q.local_queue, "namespace": q.namespace},
            "spec": {"clusterQueue": q.cluster_queue},
        },
    )
    return q


@pytest.fixture
def queues(rig: Federation) -> Queues:
    return make_queues(rig)


def dispatch(
    rig: Federation,
    namespace: str,
    name: str,
    *,
    queue: str,
    cpu: str,
    priority: int | None = None,
    preemption_gates: tuple[str, ...] = (),
    seconds: float | None = None,
) -> None:
    """Create the Workload copy and the suspended Job copy exactly as the manager does (with ``preemption_gates``,
    as a Kueue v0.20 manager does); ``seconds``: how long kwok keeps its pod running."""
    manager_uid = str(uuid.uuid4())
    labels = {ORIGIN_LABEL: "multikueue", MANAGER_UID_LABEL: manager_uid}
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
    }
    workload: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": pod_spec}}]},
    }
    if priority is not None:
        workload["spec"]["priority"] = priority
    if preemption_gates:
        workload["spec"]["preemptionGates"] = [{"name": gate} for gate in preemption_gates]
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {**labels, PREBUILT_LABEL: name}},
        "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": pod_spec}},
    }
    if seconds is not None:
        job["spec"]["template"]["metadata"] = {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}}
    rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(workload))
    rig.kubectl(WORKER, "create", "-f", "-", input=json.dumps(job))


def capacity_of(rig: Federation, cluster_queue: str) -> dict[str, Any] | None:
    status = (get_json(rig, "clustercapacities.kfed.io", "local") or {}).get("status") or {}
    for entry in status.get("clusterQueues") or ():
        if entry["name"] == cluster_queue:
            return {"generation": status["generation"], **entry}
    return None


def cpu_of(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    found: dict[str, Any] = next(r for f in entry["flavors"] for r in f["resources"] if r["name"] == "cpu")
    return found


def event_reasons(rig: Federation, namespace: str, name: str) -> set[str]:
    events = get_json(rig, "events.events.k8s.io", "-n", namespace) or {"items": []}
    return {e["reason"] for e in events["items"] if e.get("regarding", {}).get("name") == name}


# -- tests --------------------------------------------------------------------------------------------------


def test_dispatched_workload_is_admitted_run_and_finished(rig: Federation, agent: RunningAgent, queues: Queues) -> None:
    ns, name = queues.namespace, "job-fits"
    wait_for("the capacity report to list the new ClusterQueue", lambda: capacity_of(rig, queues.cluster_queue))
    dispatch(rig, ns, name, queue=queues.local_queue, cpu="2", seconds=8)

    def workload_when(condition_types: tuple[str, ...]) -> dict[str, Any] | None:
        wl = get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns)
        return wl if wl is not None and all(is_true(wl, t) for t in condition_types) else None

    def report_when(cpu_field: str, value: str) -> dict[str, Any] | None:
        entry = capacity_of(rig, queues.cluster_queue)
        cpu = cpu_of(entry)
        return entry if cpu is not None and cpu[cpu_field] == value else None

    def unsuspended_job() -> dict[str, Any] | None:
        job = get_json(rig, "job", name, "-n", ns)
        return job if job is not None and job["spec"]["suspend"] is False else None

    workload = wait_for("QuotaReserved and Admitted", lambda: workload_when(("QuotaReserved", "Admitted")))
    assert workload["status"]["admission"] == {
        "clusterQueue": queues.cluster_queue,
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": queues.flavor}, "resourceUsage": {"cpu": "2"}, "count": 1}
        ],
    }
    reserved = condition(workload, "QuotaReserved") or {}
    assert (reserved["reason"], reserved["message"]) == (
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {queues.cluster_queue}",
    )
    assert (condition(workload, "Admitted") or {}).get("reason") == "Admitted"

    job = wait_for("the Job to be unsuspended", unsuspended_job)
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {NODE_LABEL[0]: NODE_LABEL[1]}

    running = wait_for("the report to show the usage", lambda: report_when("usage", "2"))

    def queue_status(reserving: int) -> dict[str, Any] | None:
        cq = get_json(rig, "clusterqueues.kueue.x-k8s.io", queues.cluster_queue)
        return cq if cq is not None and (cq.get("status") or {}).get("reservingWorkloads") == reserving else None

    # The queue status is written at most every 5 s, and the change held back is written when that time is up.
    wait_for("the ClusterQueue status to show the Workload", lambda: queue_status(1), timeout=8)
    assert cpu_of(running) == {"name": "cpu", "nominal": "4", "usage": "2", "free": "2"}
    report = get_json(rig, "clustercapacities.kfed.io", "local") or {}
    route = {"namespace": ns, "name": queues.local_queue, "clusterQueue": queues.cluster_queue}
    assert route in report["status"]["localQueues"]

    wait_for("the Job to complete", lambda: is_true(get_json(rig, "job", name, "-n", ns), "Complete"), timeout=60)
    # A kfed-manager copy is finished in the agent's memory at once (the manager deletes it without reading its
    # Finished), and on the apiserver only when it is still there after the 10 s grace, as here.
    after = wait_for("the report to show the quota free again", lambda: report_when("free", "4"), timeout=8)
    assert after["generation"] > running["generation"]
    assert not is_true(get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns), "Finished")
    finished = wait_for("Finished", lambda: workload_when(("Finished",)), timeout=20)
    assert (condition(finished, "Finished") or {}).get("reason") == "Succeeded"
    # A manager's copy gets no routine Events on the worker (the manager records those steps where users look).
    holds_for(
        "no QuotaReserved, Admitted, Started or Finished Event on the copy",
        lambda: not {"QuotaReserved", "Admitted", "Started", "Finished"} & event_reasons(rig, ns, name),
        seconds=2,
    )

    queue = wait_for("the ClusterQueue status to show it gone", lambda: queue_status(0), timeout=8)
    assert queue["status"]["admittedWorkloads"] == 0
    assert (condition(queue, "Active") or {}).get("status") == "True"


def reported_flavor(rig: Federation, flavor: str) -> dict[str, Any] | None:
    status = (get_json(rig, "clustercapacities.kfed.io", "local") or {}).get("status") or {}
    return next((dict(entry) for entry in status.get("flavors") or () if entry["name"] == flavor), None)


def test_capacity_report_carries_the_flavors_node_labels_and_tolerations(
    rig: Federation, agent: RunningAgent, queues: Queues
) -> None:
    """What the agent injects into a started Job's pod template, per flavor of a local ClusterQueue, is in the
    report (the manager creates Job copies already placed from it), and follows an edit of the ResourceFlavor."""
    first = wait_for("the flavor in the capacity report", lambda: reported_flavor(rig, queues.flavor))
    # "": a flavor without a topology, which takes no pod set asking for one (the manager's dispatch reads it)
    assert first == {"name": queues.flavor, "topologyName": "", "nodeLabels": {NODE_LABEL[0]: NODE_LABEL[1]}}
    toleration = {"key": "kfed.io/spot", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
    edited = {"spec": {"nodeLabels": {NODE_LABEL[0]: NODE_LABEL[1], "kfed.io/pool": "b"}, "tolerations": [toleration]}}
    rig.kubectl(
        WORKER, "patch", "resourceflavors.kueue.x-k8s.io", queues.flavor, "--type=merge", "-p", json.dumps(edited)
    )
    expected = {"name": queues.flavor, "topologyName": "", **edited["spec"]}
    after = wait_for(
        "the edited flavor in the capacity report",
        lambda: (found := reported_flavor(rig, queues.flavor)) == expected and found,
        timeout=10,
    )
    assert after == expected
    unused = f"unused-{uuid.uuid4().hex[:6]}"
    apply(rig, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": unused}})
    try:
        holds_for("a flavor no ClusterQueue names stays out", lambda: reported_flavor(rig, unused) is None, seconds=2)
    finally:
        rig.kubectl(WORKER, "delete", "resourceflavors.kueue.x-k8s.io", unused, "--wait=false", check=False)


def test_a_deleted_capacity_report_is_made_again_at_once(rig: Federation, agent: RunningAgent, queues: Queues) -> None:
    """The agent watches its ClusterCapacity: deleted by someone, it is created and filled again within seconds, not
    at the next heartbeat (30 s), so the manager does not go without the worker's report meanwhile."""
    wait_for("the flavor in the capacity report", lambda: reported_flavor(rig, queues.flavor))
    before = get_json(rig, "clustercapacities.kfed.io", "local") or {}
    rig.kubectl(WORKER, "delete", "clustercapacities.kfed.io", "local")

    def report_again() -> dict[str, Any] | None:
        """The new report, once it is filled (its flavors and the time are read from one and the same object)."""
        found = get_json(rig, "clustercapacities.kfed.io", "local")
        if found is None or found["metadata"]["uid"] == before["metadata"]["uid"]:
            return None
        flavors = (found.get("status") or {}).get("flavors") or ()
        return found if any(entry["name"] == queues.flavor for entry in flavors) else None

    again = wait_for("a new capacity report with the flavor in it", report_again, timeout=10)
    assert again["status"]["observedTime"]


def test_workload_too_big_for_the_quota_stays_pending_with_a_reason(
    rig: Federation, agent: RunningAgent, queues: Queues
) -> None:
    ns, name = queues.namespace, "job-too-big"
    dispatch(rig, ns, name, queue=queues.local_queue, cpu="8")
    pending = wait_for(
        "a pending condition",
        lambda: condition(get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns), "QuotaReserved"),
    )
    assert pending["status"] == "False"
    assert pending["reason"] == "ExceedsMaxQuota", "Kueue v0.20's reason"
    assert "insufficient quota for cpu in flavor" in pending["message"]
    assert (
        "previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)"
        in (pending["message"])
    )
    version = (get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns) or {})["metadata"]["resourceVersion"]

    def unchanged() -> bool:
        wl = get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns) or {}
        job = get_json(rig, "job", name, "-n", ns) or {}
        return bool(wl) and wl["metadata"]["resourceVersion"] == version and job["spec"]["suspend"] is True

    holds_for("the workload staying pending without further writes and its Job suspended", unchanged, seconds=3)
    assert "ExceedsMaxQuota" in event_reasons(rig, ns, name), "Kueue v0.20's Warning Event names the reason"


def test_missing_local_queue_is_reported(rig: Federation, agent: RunningAgent, queues: Queues) -> None:
    ns, name = queues.namespace, "job-no-queue"
    dispatch(rig, ns, name, queue="missing-lq", cpu="1")
    pending = wait_for(
        "an inadmissible condition",
        lambda: condition(get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns), "QuotaReserved"),
    )
    assert (pending["status"], pending["reason"]) == ("False", "Misconfigured"), "Kueue v0.20's reason"
    assert pending["message"] == "LocalQueue missing-lq doesn't exist"


def test_health_endpoints_and_metrics(agent: RunningAgent) -> None:
    assert agent.get("/healthz") == (200, "ok")
    status, body = agent.get("/metrics")
    assert status == 200
    assert "kueue_admitted_workloads_total" in body


MULTIKUEUE_GATE = "kueue.x-k8s.io/multikueue"


def test_a_gated_copy_preempts_nothing_until_its_manager_opens_the_gate(rig: Federation, agent: RunningAgent) -> None:
    """Kueue v0.20's orchestrated preemption, the manager played by kubectl: the copy waits with
    BlockedOnPreemptionGates while the gate is closed; once opened, the lower-priority Workload is preempted (its Job
    suspended, its quota released) and the gated one is admitted and started."""
    q = make_queues(rig, preemption={"withinClusterQueue": "LowerPriority"})
    ns = q.namespace
    wait_for("the capacity report to list the new ClusterQueue", lambda: capacity_of(rig, q.cluster_queue))

    def workload(name: str) -> dict[str, Any] | None:
        return get_json(rig, "workloads.kueue.x-k8s.io", name, "-n", ns)

    def job(name: str) -> dict[str, Any] | None:
        return get_json(rig, "job", name, "-n", ns)

    dispatch(rig, ns, "low", queue=q.local_queue, cpu="3", priority=0)
    wait_for("low admitted", lambda: is_true(workload("low"), "Admitted"))
    wait_for("low's pod active", lambda: ((job("low") or {}).get("status") or {}).get("active"), timeout=60)

    dispatch(rig, ns, "high", queue=q.local_queue, cpu="3", priority=100, preemption_gates=(MULTIKUEUE_GATE,))
    blocked = wait_for("high blocked on its gate", lambda: condition(workload("high"), "BlockedOnPreemptionGates"))
    assert (blocked["status"], blocked["reason"]) == ("True", "PreemptionGated")
    assert blocked["message"] == "Workload requires preemption, but it's gated"
    reserved = condition(workload("high"), "QuotaReserved") or {}
    assert (reserved.get("status"), reserved.get("reason")) == ("False", "AdmissionGated")
    holds_for(
        "low untouched while the gate is closed",
        lambda: (
            is_true(workload("low"), "Admitted")
            and not is_true(workload("low"), "Evicted")
            and (job("low") or {}).get("spec", {}).get("suspend") is False
        ),
        seconds=3,
    )

    opened = {"name": MULTIKUEUE_GATE, "position": "Open", "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
    rig.kubectl(
        WORKER,
        "patch",
        "workloads.kueue.x-k8s.io",
        "high",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"preemptionGates": [opened]}}),
    )
    with agent.log_on_failure():  # timed out here twice: the overlay showed a stale answer (worker_agent.overlay)
        evicted = wait_for("low preempted", lambda: condition(workload("low"), "Evicted"), timeout=30)
        assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
        assert (condition(workload("low"), "Preempted") or {}).get("reason") == "InClusterQueue"
        try:
            wait_for("high admitted", lambda: is_true(workload("high"), "Admitted"), timeout=60)
        except AssertionError as err:  # what low's stop and release waited on
            low_job = job("low") or {}
            pods = (get_json(rig, "pods", "-n", ns) or {}).get("items") or ()
            seen = [
                (p["metadata"]["name"], p["metadata"].get("deletionTimestamp"), p.get("status", {}).get("phase"))
                for p in pods
            ]
            low_conditions = [(c["type"], c["status"], c.get("reason")) for c in conditions_of(workload("low") or {})]
            raise AssertionError(
                f"{err}\nlow's Job: suspend={low_job.get('spec', {}).get('suspend')} status={low_job.get('status')}"
                f"\npods: {seen}\nlow's conditions: {low_conditions}"
            ) from err
    assert (job("low") or {})["spec"]["suspend"] is True
    low_after = workload("low") or {}
    assert not is_true(low_after, "QuotaReserved")
    assert (condition(low_after, "Requeued") or {}).get("reason") == "Preempted"
    blocked = condition(workload("high"), "BlockedOnPreemptionGates") or {}
    assert (blocked.get("status"), blocked.get("reason")) == ("False", "QuotaReserved")
    wait_for("high's Job started", lambda: (job("high") or {}).get("spec", {}).get("suspend") is False, timeout=30)


def _tas_flavors(rig: Federation) -> list[str]:
    flavors = (get_json(rig, "resourceflavors.kueue.x-k8s.io") or {}).get("items") or ()
    return [f["metadata"]["name"] for f in flavors if (f.get("spec") or {}).get("topologyName")]


def _logged(agent: RunningAgent, event: str) -> int:
    return sum(1 for line in agent.log_lines() if line.get("event") == event)


def test_node_and_pod_watches_run_only_while_a_flavor_names_a_topology(rig: Federation, agent: RunningAgent) -> None:
    """Without a TAS ResourceFlavor the agent lists and watches no Node and no bound Pod (every pod change in the
    cluster would cost the apiserver a watch event for nothing); a flavor naming a topology starts them and the
    topology's domains appear in the capacity report, counted from the nodes; deleting the flavor stops them."""
    assert not _tas_flavors(rig), "precondition: this test starts with no ResourceFlavor naming a topology"
    assert not [
        line
        for line in agent.log_lines()
        if line.get("event") == "kube.cache.listed" and line.get("resource") == "nodes"
    ], "no Node list without a TAS flavor"
    started, stopped = _logged(agent, "tas.cluster_watches_started"), _logged(agent, "tas.cluster_watches_stopped")
    from e2e.queues import topology_object

    suffix = uuid.uuid4().hex[:6]
    topology, flavor = f"watch-topo-{suffix}", f"watch-tas-{suffix}"
    apply(
        rig,
        topology_object(topology),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": dict([NODE_LABEL]), "topologyName": topology},
        },
    )
    try:

        def reported_nodes() -> int | None:
            status = (get_json(rig, "clustercapacities.kfed.io", "local") or {}).get("status") or {}
            for entry in status.get("topologies") or ():
                if entry.get("name") == flavor:
                    return sum(int(d.get("nodes") or 0) for d in entry["topologySummary"] if len(d["levelValues"]) == 1)
            return None

        nodes = wait_for("the TAS flavor's topology in the capacity report", reported_nodes, timeout=30)
        assert nodes == rig.spec.shape(WORKER).count, "every kwok node counted, read from the Node watch"
        assert _logged(agent, "tas.cluster_watches_started") == started + 1
    finally:
        rig.kubectl(WORKER, "delete", "resourceflavors.kueue.x-k8s.io", flavor, "--wait=false", check=False)
        rig.kubectl(WORKER, "delete", "topologies.kueue.x-k8s.io", topology, "--wait=false", check=False)
    wait_for(
        "the watches stopped with the last TAS flavor",
        lambda: _logged(agent, "tas.cluster_watches_stopped") == stopped + 1,
        timeout=30,
    )
    wait_for("the topology gone from the capacity report", lambda: reported_nodes() is None, timeout=30)
