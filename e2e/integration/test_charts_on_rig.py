"""Both charts installed with the toolchain's helm into the rig's clusters, and kfed run with nothing but the
charts' ServiceAccounts: a token of each (TokenRequest, `kubectl create token`) in a kubeconfig, no admin
certificate. The controllers run as local processes (the rig cannot run containers), so the Deployments are scaled
to 0; what is under test is that the installed RBAC lets each binary do its work, and nothing more.

- kfed-manager with the manager chart's ServiceAccount acquires its Lease, syncs every cache (ready), and connects
  to worker-1 through a kubeconfig Secret holding a token of the agent chart's `kfed-manager-access`
  ServiceAccount (its MultiKueueCluster turns Active), with no Forbidden in its log;
- kfed-agent with the agent chart's ServiceAccount acquires its Lease and publishes the ClusterCapacity, with no
  Forbidden in its log;
- `kubectl auth can-i` with those tokens: every rule of the charts' rule files is allowed, Secrets outside the
  release namespace, other Leases and deletes on the manager cluster are not.

This is the first step toward `e2e.rig up --from-charts` (issue 12, deliverable 4).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.charts import AGENT_CHART, MANAGER_CHART, RULE_FILES, helm, set_args
from e2e.queues import multikueue_check_objects
from e2e.rig.federation import MANAGER, REPO_ROOT, Federation
from e2e.waiting import wait_for

pytestmark = pytest.mark.integration

WORKER = "worker-1"
NAMESPACE = "kfed-system"
MANAGER_RELEASE = "kfed-manager"
AGENT_RELEASE = "kfed-agent"
ACCESS_ACCOUNT = "kfed-manager-access"
JOINED = "charts-worker-1"
"""The MultiKueueCluster (and its kubeconfig Secret) made from the manager-access token."""


@dataclass
class Installed:
    rig: Federation
    directory: Path

    def kubeconfig_for(self, cluster: str, service_account: str) -> Path:
        """A kubeconfig for the cluster holding only a fresh token of the ServiceAccount (no client certificate)."""
        token = self.rig.kubectl(
            cluster, "-n", NAMESPACE, "create", "token", service_account, "--duration=1h"
        ).stdout.strip()
        path = self.directory / f"{cluster}-{service_account}.yaml"
        path.write_text(token_kubeconfig(self.rig.kubeconfig(cluster), token, user=service_account))
        return path


def token_kubeconfig(admin_kubeconfig: Path, token: str, *, user: str) -> str:
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    assert cluster.get("certificate-authority-data"), "the rig's kubeconfigs embed the CA"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {k: cluster[k] for k in ("server", "certificate-authority-data")}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": user}}],
            "current-context": "c",
        }
    )


def _helm_install(rig: Federation, cluster: str, release: str, chart: Path, values: dict[str, Any]) -> None:
    helm(
        rig.bin_dir,
        "install",
        release,
        str(chart),
        f"--kubeconfig={rig.kubeconfig(cluster)}",
        f"--namespace={NAMESPACE}",
        "--create-namespace",
        "--skip-crds",  # the rig applied the same CRDs already
        "--wait",
        "--timeout=120s",
        *set_args(values),
    )


@pytest.fixture(scope="module")
def installed(rig: Federation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    from e2e.rig.ports import free_port

    # The rig applied the Job admission policy itself (from the same file): Helm must not try to own it too. The
    # visibility API stays on (the default) for its RBAC, on a free port: processes started from the rendered args
    # serve it (nothing routes the APIService to them here, see e2e/rig/from_charts.py for that).
    values = {"replicaCount": 0, "jobAdmissionPolicy.enabled": False, "visibility.port": free_port()}
    _helm_install(rig, MANAGER, MANAGER_RELEASE, MANAGER_CHART, values)
    try:
        _helm_install(rig, WORKER, AGENT_RELEASE, AGENT_CHART, {"replicaCount": 0, "clusterName": WORKER})
        try:
            yield Installed(rig, tmp_path_factory.mktemp("charts"))
        finally:
            helm(rig.bin_dir, "uninstall", AGENT_RELEASE, f"--kubeconfig={rig.kubeconfig(WORKER)}", f"-n={NAMESPACE}")
    finally:
        helm(rig.bin_dir, "uninstall", MANAGER_RELEASE, f"--kubeconfig={rig.kubeconfig(MANAGER)}", f"-n={NAMESPACE}")


@pytest.mark.parametrize(("cluster", "release"), [(MANAGER, MANAGER_RELEASE), (WORKER, AGENT_RELEASE)])
def test_every_object_of_the_release_exists(installed: Installed, cluster: str, release: str) -> None:
    rig = installed.rig
    manifest = helm(
        rig.bin_dir, "get", "manifest", release, f"--kubeconfig={rig.kubeconfig(cluster)}", f"-n={NAMESPACE}"
    )
    docs = [d for d in yaml.safe_load_all(manifest.stdout) if d]
    kinds = {d["kind"] for d in docs}
    expected = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"}
    expected |= {"Service", "PodDisruptionBudget"}
    assert expected <= kinds, kinds
    found = rig.kubectl(cluster, "get", "-f", "-", "-o", "json", input=manifest.stdout).stdout
    items = json.loads(found).get("items") or [json.loads(found)]
    assert sorted((i["kind"], i["metadata"]["name"]) for i in items) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in docs
    )


def can_i(rig: Federation, kubeconfig: Path, verb: str, resource: str, *scope: str) -> bool:
    """`kubectl auth can-i` as the token's ServiceAccount (its exit status is 0 for yes, 1 for no)."""
    cmd = [str(rig.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "auth", "can-i", verb, resource, *scope]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


def _rule_checks(prefix: str, chart: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(verb, resource[/name], scope args) for every grant of the chart's rule files starting with ``prefix``."""
    checks = []
    for rule_file in RULE_FILES:
        if rule_file.chart != chart or not rule_file.name.startswith(prefix):
            continue
        scope = ("-n", NAMESPACE) if rule_file.scope == "namespace" else ("-n", "some-user-namespace")
        for rule in rule_file.rules():
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    plural, _, sub = resource.partition("/")
                    ref = f"{plural}.{group}" if group else plural
                    for name in rule.get("resourceNames") or [""]:
                        target = f"{ref}/{name}" if name else ref
                        extra = ("--subresource", sub) if sub else ()
                        checks += [(verb, target, (*scope, *extra)) for verb in rule["verbs"]]
    return checks


def test_manager_token_can_do_its_rules_and_no_more(installed: Installed) -> None:
    rig = installed.rig
    kubeconfig = installed.kubeconfig_for(MANAGER, MANAGER_RELEASE)
    refused = [c for c in _rule_checks("manager-", MANAGER_CHART) if not can_i(rig, kubeconfig, c[0], c[1], *c[2])]
    assert not refused, refused
    # The visibility API's bindings to built-in roles: the front-proxy CA's ConfigMap, and SubjectAccessReviews.
    assert can_i(rig, kubeconfig, "get", "configmaps/extension-apiserver-authentication", "-n", "kube-system")
    assert can_i(rig, kubeconfig, "create", "subjectaccessreviews.authorization.k8s.io")
    for verb, resource, scope in [
        ("get", "configmaps/kube-root-ca.crt", ("-n", "kube-system")),
        ("get", "secrets", ("-n", "default")),
        ("list", "secrets", ("--all-namespaces",)),
        ("create", "secrets", ("-n", NAMESPACE)),
        ("get", "secrets", ("-n", NAMESPACE)),
        ("update", "leases.coordination.k8s.io/someone-else", ("-n", NAMESPACE)),
        ("create", "leases.coordination.k8s.io", ("-n", "default")),
        ("delete", "jobs.batch", ("-n", "default")),  # without retention it deletes no Job (Workloads: edited Jobs')
        ("deletecollection", "workloads.kueue.x-k8s.io", ("-n", "default")),
        ("create", "jobs.batch", ("-n", "default")),
        ("update", "clusterqueues.kueue.x-k8s.io", ()),
        ("create", "pods", ("-n", "default")),
        ("list", "nodes", ()),
    ]:
        assert not can_i(rig, kubeconfig, verb, resource, *scope), f"the manager may {verb} {resource} {scope}"


def test_agent_token_can_do_its_rules_and_no_more(installed: Installed) -> None:
    rig = installed.rig
    kubeconfig = installed.kubeconfig_for(WORKER, f"{AGENT_RELEASE}")
    refused = [c for c in _rule_checks("agent-", AGENT_CHART) if not can_i(rig, kubeconfig, c[0], c[1], *c[2])]
    assert not refused, refused
    for verb, resource, scope in [
        ("get", "secrets", ("-n", NAMESPACE)),
        ("list", "secrets", ("--all-namespaces",)),
        ("deletecollection", "workloads.kueue.x-k8s.io", ("-n", "default")),  # it creates those of local Jobs
        ("delete", "jobs.batch", ("-n", "default")),
        ("patch", "clustercapacities.kfed.io/other", ()),
        ("update", "leases.coordination.k8s.io/kfed-manager", ("-n", NAMESPACE)),
    ]:
        assert not can_i(rig, kubeconfig, verb, resource, *scope), f"the agent may {verb} {resource} {scope}"


def test_manager_access_token_on_the_worker_handles_copies_only(installed: Installed) -> None:
    rig = installed.rig
    kubeconfig = installed.kubeconfig_for(WORKER, ACCESS_ACCOUNT)
    refused = [c for c in _rule_checks("manager-access", AGENT_CHART) if not can_i(rig, kubeconfig, c[0], c[1], *c[2])]
    assert not refused, refused
    for verb, resource, scope in [
        ("patch", "workloads.kueue.x-k8s.io", ("-n", "default", "--subresource", "status")),
        ("update", "jobs.batch", ("-n", "default")),
        ("get", "secrets", ("-n", NAMESPACE)),
        ("patch", "clusterqueues.kueue.x-k8s.io", ()),
        ("create", "pods", ("-n", "default")),
    ]:
        assert not can_i(rig, kubeconfig, verb, resource, *scope), f"the manager may {verb} {resource} {scope}"


class Process:
    """A kfed console script as a local process with a log file and a TMPDIR of its own next to it; always stopped
    (SIGTERM, then SIGKILL)."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self.tmp = log_path.with_suffix(".tmp")
        self.tmp.mkdir(exist_ok=True)
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env={**os.environ, "TMPDIR": str(self.tmp)}
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def left_in_tmp(self) -> list[str]:
        """What the process left in its TMPDIR (after :meth:`stop`, nothing: its files go with it)."""
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*"))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return int(self.proc.returncode)


def lease_holder(rig: Federation, cluster: str, name: str) -> str:
    result = rig.kubectl(cluster, "-n", NAMESPACE, "get", "lease", name, "-o", "json", check=False)
    return str(json.loads(result.stdout)["spec"].get("holderIdentity") or "") if result.returncode == 0 else ""


def ready(process: Process) -> bool:
    """/readyz answered 200 (the port is in the process's first log line)."""
    import urllib.error
    import urllib.request

    port = None
    for line in process.log().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        port = record.get("health_port") or port
    if port is None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def forbidden_lines(process: Process) -> list[str]:
    from e2e.rig.from_charts import refused

    return [line for line in process.log().splitlines() if refused(line)]


def assert_no_forbidden(process: Process, name: str) -> None:
    forbidden = forbidden_lines(process)
    assert not forbidden, f"{name} was refused by RBAC:\n" + "\n".join(forbidden[:10])


@contextmanager
def explained(process: Process, name: str) -> Iterator[None]:
    """A wait that times out says what RBAC refused, if anything (the usual reason here)."""
    try:
        yield
    except AssertionError as err:
        refused = "\n".join(forbidden_lines(process)[:10]) or "(nothing refused in the log)"
        raise AssertionError(f"{err}\n{name} log, refused calls:\n{refused}") from err


def test_kfed_manager_runs_with_its_service_account_and_reaches_the_worker(installed: Installed) -> None:
    rig = installed.rig
    kubeconfig = installed.kubeconfig_for(MANAGER, MANAGER_RELEASE)
    venv = Path(REPO_ROOT / ".venv" / "bin")
    process = Process(
        [
            str(venv / "kfed-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            "--health-port=0",
            "--metrics-port=-1",
            "--bind-address=127.0.0.1",
        ],
        installed.directory / "kfed-manager.log",
    )
    secret = f"{JOINED}-kubeconfig"
    try:
        with explained(process, "kfed-manager"):
            identity_suffix = f"_{process.proc.pid}"
            wait_for(
                lambda: lease_holder(rig, MANAGER, "kfed-manager"),
                until=lambda holder: holder.endswith(identity_suffix),
                timeout=60,
                what="kfed-manager (chart ServiceAccount) to hold its Lease",
            )
            wait_for(lambda: ready(process), until=bool, timeout=60, what="kfed-manager's caches to sync (/readyz)")
            access = installed.kubeconfig_for(WORKER, ACCESS_ACCOUNT).read_text()
            join = [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": secret, "namespace": NAMESPACE},
                    "data": {"kubeconfig": base64.b64encode(access.encode()).decode()},
                },
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "MultiKueueCluster",
                    "metadata": {"name": JOINED},
                    "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
                },
            ]
            rig.kubectl(
                MANAGER, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": join})
            )

            def active() -> dict[str, Any]:
                out = rig.kubectl(MANAGER, "get", "multikueuecluster.kueue.x-k8s.io", JOINED, "-o", "json").stdout
                conditions = (json.loads(out).get("status") or {}).get("conditions") or []
                return next((c for c in conditions if c["type"] == "Active"), {})

            wait_for(
                active,
                until=lambda c: c.get("status") == "True",
                timeout=60,
                what=f"MultiKueueCluster {JOINED} Active through the kfed-manager-access token",
            )
            assert process.proc.poll() is None, process.log()[-3000:]
    finally:
        code = process.stop()
        rig.kubectl(MANAGER, "delete", "multikueuecluster.kueue.x-k8s.io", JOINED, "--ignore-not-found")
        rig.kubectl(MANAGER, "-n", NAMESPACE, "delete", "secret", secret, "--ignore-not-found")
    assert code == 0, process.log()[-3000:]
    assert_no_forbidden(process, "kfed-manager")


def test_kfed_agent_runs_with_its_service_account_and_publishes_capacity(installed: Installed) -> None:
    rig = installed.rig
    kubeconfig = installed.kubeconfig_for(WORKER, AGENT_RELEASE)
    # The agent must create the report itself (a previous test's agent may have left one).
    rig.kubectl(WORKER, "delete", "clustercapacities.kfed.io", "local", "--ignore-not-found")
    marker = uuid.uuid4().hex[:6]
    process = Process(
        [
            str(REPO_ROOT / ".venv" / "bin" / "kfed-agent"),
            f"--kubeconfig={kubeconfig}",
            f"--cluster-name={WORKER}",
            f"--namespace={NAMESPACE}",
            "--health-port=0",
            "--metrics-port=-1",
            "--bind-address=127.0.0.1",
        ],
        installed.directory / f"kfed-agent-{marker}.log",
    )
    try:
        with explained(process, "kfed-agent"):
            wait_for(
                lambda: lease_holder(rig, WORKER, "kfed-agent"),
                until=lambda holder: any(holder in line for line in process.log().splitlines() if holder),
                timeout=60,
                what="kfed-agent (chart ServiceAccount) to hold its Lease",
            )
            wait_for(lambda: ready(process), until=bool, timeout=60, what="kfed-agent's caches to sync (/readyz)")

            def report() -> dict[str, Any]:
                result = rig.kubectl(WORKER, "get", "clustercapacities.kfed.io", "local", "-o", "json", check=False)
                return json.loads(result.stdout) if result.returncode == 0 else {}

            wait_for(
                report,
                until=lambda cap: int((cap.get("status") or {}).get("generation") or 0) >= 1,
                timeout=60,
                what="the ClusterCapacity 'local' created and reported by the agent",
            )
            assert process.proc.poll() is None, process.log()[-3000:]
    finally:
        code = process.stop()
    assert code == 0, process.log()[-3000:]
    assert_no_forbidden(process, "kfed-agent")


def _apply(rig: Federation, cluster: str, objects: list[dict[str, Any]]) -> None:
    rig.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _get(rig: Federation, cluster: str, *args: str) -> dict[str, Any]:
    result = rig.kubectl(cluster, "get", *args, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else {}


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or ()}


def _start(kind: str, kubeconfig: Path, log: Path, *args: str) -> Process:
    return Process(
        [
            str(REPO_ROOT / ".venv" / "bin" / kind),
            f"--kubeconfig={kubeconfig}",
            f"--namespace={NAMESPACE}",
            "--health-port=0",
            "--metrics-port=-1",
            "--bind-address=127.0.0.1",
            *args,
        ],
        log,
    )


def test_a_job_runs_through_kfed_with_only_the_charts_service_accounts(installed: Installed) -> None:
    """A queued Job on the manager is dispatched to worker-1, run there and finished, with kfed-manager, kfed-agent
    and the manager's access to the worker all authenticated by the charts' ServiceAccount tokens: every write path
    of a dispatch (Workload create and status, remote copies create/delete, Job unsuspend and status mirror,
    queue status, Events) goes through the charts' RBAC."""
    rig = installed.rig
    tag = uuid.uuid4().hex[:6]
    name = f"charts-{tag}"
    namespace = f"charts-{tag}"
    secret = f"{name}-kubeconfig"
    access = installed.kubeconfig_for(WORKER, ACCESS_ACCOUNT).read_text()
    quota = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": name,
                    "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "8Gi"}],
                }
            ],
        }
    ]

    def queues(*, manager: bool) -> list[dict[str, Any]]:
        cq_spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": quota}
        if manager:
            cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name}]}
        return [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}},
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": cq_spec,
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "user-queue", "namespace": namespace},
                "spec": {"clusterQueue": name},
            },
        ]

    multikueue = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "namespace": NAMESPACE},
            "data": {"kubeconfig": base64.b64encode(access.encode()).decode()},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
        },
        *multikueue_check_objects(name, [name]),
    ]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trained", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "registry.example/train:1", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            }
        },
    }
    _apply(rig, WORKER, queues(manager=False))
    _apply(rig, MANAGER, queues(manager=True) + multikueue)
    manager = _start(
        "kfed-manager", installed.kubeconfig_for(MANAGER, MANAGER_RELEASE), installed.directory / f"m-{tag}.log"
    )
    agent = _start(
        "kfed-agent",
        installed.kubeconfig_for(WORKER, AGENT_RELEASE),
        installed.directory / f"a-{tag}.log",
        f"--cluster-name={WORKER}",
    )
    try:
        with explained(manager, "kfed-manager"), explained(agent, "kfed-agent"):
            wait_for(
                lambda: _conditions(_get(rig, MANAGER, "multikueuecluster.kueue.x-k8s.io", name)).get("Active"),
                until=lambda status: status == "True",
                timeout=60,
                what=f"MultiKueueCluster {name} Active",
            )
            _apply(rig, MANAGER, [job])
            finished = wait_for(
                lambda: _get(rig, MANAGER, "-n", namespace, "job", "trained"),
                until=lambda j: (j.get("status") or {}).get("succeeded") == 1,
                timeout=90,
                what="the Job to run on the worker and its final status to come back to the manager",
            )
            assert finished["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
            workloads = _get(rig, MANAGER, "-n", namespace, "workloads.kueue.x-k8s.io")["items"]
            assert len(workloads) == 1
            assert _conditions(workloads[0]).get("Finished") == "True"
            assert workloads[0]["status"].get("clusterName") == name
            wait_for(
                lambda: _get(rig, WORKER, "-n", namespace, "jobs,workloads.kueue.x-k8s.io")["items"],
                until=lambda remaining: remaining == [],
                timeout=60,
                what="the copies on the worker to be deleted by the manager",
            )
    finally:
        codes = {"kfed-manager": manager.stop(), "kfed-agent": agent.stop()}
        # The processes that would lift Kueue's resource-in-use finalizer (on ClusterQueues, ResourceFlavors and
        # AdmissionChecks) are gone: it is lifted here, as an operator uninstalling kfed (or Kueue) would.
        kept = [(c, k) for c in (MANAGER, WORKER) for k in ("clusterqueue", "resourceflavor")]
        for cluster, kind in [*kept, (MANAGER, "admissioncheck")]:
            rig.kubectl(cluster, "delete", f"{kind}.kueue.x-k8s.io", name, "--wait=false", "--ignore-not-found")
            lift = '{"metadata":{"finalizers":null}}'
            rig.kubectl(cluster, "patch", f"{kind}.kueue.x-k8s.io", name, "--type=merge", "-p", lift, check=False)
        for cluster in (MANAGER, WORKER):
            rig.kubectl(cluster, "delete", "namespace", namespace, "--wait=false", "--ignore-not-found")
        for kind in ("multikueueconfig", "multikueuecluster"):
            rig.kubectl(MANAGER, "delete", f"{kind}.kueue.x-k8s.io", name, "--ignore-not-found")
        rig.kubectl(MANAGER, "-n", NAMESPACE, "delete", "secret", secret, "--ignore-not-found")
    assert codes == {"kfed-manager": 0, "kfed-agent": 0}, manager.log()[-2000:] + agent.log()[-2000:]
    assert_no_forbidden(manager, "kfed-manager")
    assert_no_forbidden(agent, "kfed-agent")


def _kfed(*args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl kfed ...` (the plugin of this venv)."""
    plugin = str(REPO_ROOT / ".venv" / "bin" / "kubectl-kfed")
    return subprocess.run([plugin, *args], capture_output=True, text=True, timeout=120, check=False)


def test_add_worker_joins_through_the_manager_access_token_and_remove_worker_undoes_it(installed: Installed) -> None:
    """`kubectl kfed add-worker` with the operator's admin kubeconfigs: the manager (chart token) connects to the
    worker with a kubeconfig that holds only a token of `kfed-manager-access` and the worker's CA; running it again
    changes nothing but the token; `remove-worker` takes everything it made away again."""
    rig = installed.rig
    name = f"joined-{uuid.uuid4().hex[:6]}"
    config = f"{name}-config"
    manager = _start(
        "kfed-manager", installed.kubeconfig_for(MANAGER, MANAGER_RELEASE), installed.directory / f"{name}.log"
    )
    admin = str(rig.kubeconfig(MANAGER))
    add = [f"--kubeconfig={admin}", "add-worker", name, f"--worker-kubeconfig={rig.kubeconfig(WORKER)}"]
    add += ["--worker-context=worker-1", f"--multikueue-config={config}", "--wait=60"]
    try:
        with explained(manager, "kfed-manager"):
            first = _kfed(*add)
            assert first.returncode == 0, first.stdout + first.stderr
            assert f"{name}: Active=True" in first.stdout, first.stdout
            secret = _get(rig, MANAGER, "-n", NAMESPACE, "secret", f"{name}-kubeconfig")
            text = base64.b64decode(secret["data"]["kubeconfig"]).decode()
            joined = yaml.safe_load(text)
            admin_cluster = yaml.safe_load(rig.kubeconfig(WORKER).read_text())["clusters"][0]["cluster"]
            assert joined["clusters"][0]["cluster"] == {
                "server": admin_cluster["server"],
                "certificate-authority-data": admin_cluster["certificate-authority-data"],
            }
            assert list(joined["users"][0]["user"]) == ["token"], "a token and nothing else"
            path = installed.directory / f"{name}.kubeconfig"
            path.write_text(text)
            whoami = rig.kubectl(WORKER, f"--kubeconfig={path}", "auth", "whoami", "-o", "json").stdout
            assert json.loads(whoami)["status"]["userInfo"]["username"] == (
                f"system:serviceaccount:{NAMESPACE}:{ACCESS_ACCOUNT}"
            )
            assert _get(rig, MANAGER, "multikueueconfig.kueue.x-k8s.io", config)["spec"]["clusters"] == [name]
            again = _kfed(*add)
            assert again.returncode == 0, again.stdout + again.stderr
            assert f"multikueueconfig {config} already lists {name}" in again.stdout
            assert _get(rig, MANAGER, "multikueueconfig.kueue.x-k8s.io", config)["spec"]["clusters"] == [name]

            removed = _kfed(f"--kubeconfig={admin}", "remove-worker", name)
            assert removed.returncode == 0, removed.stdout + removed.stderr
            assert _get(rig, MANAGER, "multikueueconfig.kueue.x-k8s.io", config) == {}
            assert _get(rig, MANAGER, "multikueuecluster.kueue.x-k8s.io", name) == {}
            assert _get(rig, MANAGER, "-n", NAMESPACE, "secret", f"{name}-kubeconfig") == {}
            assert manager.proc.poll() is None, manager.log()[-3000:]
    finally:
        code = manager.stop()
        rig.kubectl(MANAGER, "delete", "multikueueconfig.kueue.x-k8s.io", config, "--ignore-not-found")
        rig.kubectl(MANAGER, "delete", "multikueuecluster.kueue.x-k8s.io", name, "--ignore-not-found")
        rig.kubectl(MANAGER, "-n", NAMESPACE, "delete", "secret", f"{name}-kubeconfig", "--ignore-not-found")
    assert code == 0, manager.log()[-3000:]
    assert_no_forbidden(manager, "kfed-manager")


def test_add_worker_says_what_is_missing(installed: Installed) -> None:
    admin = str(installed.rig.kubeconfig(MANAGER))
    worker = f"--worker-kubeconfig={installed.rig.kubeconfig(WORKER)}"
    no_account = _kfed(f"--kubeconfig={admin}", "add-worker", "w", worker, "--worker-namespace=nowhere", "--wait=0")
    assert no_account.returncode == 1
    assert "ServiceAccount nowhere/kfed-manager-access not found on the worker" in no_account.stderr
    no_context = _kfed(f"--kubeconfig={admin}", "add-worker", "w", worker, "--worker-context=nope", "--wait=0")
    assert no_context.returncode == 1
    assert "context 'nope' is not in the kubeconfig (contexts: worker-1)" in no_context.stderr


def test_kueues_configuration_file_in_the_charts_configmap_sets_the_managers_settings(installed: Installed) -> None:
    """managerConfig.controllerManagerConfigYaml (Kueue's chart value) becomes the ConfigMap the Deployment mounts
    and reads with --config: the process listens where the file says, leads, and names each field it ignores."""
    from e2e.rig import from_charts
    from e2e.rig.ports import free_port

    rig = installed.rig
    health = free_port()
    config = f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:{health}
metrics:
  bindAddress: 127.0.0.1:{free_port()}
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
clientConnection:
  qps: 50
  burst: 100
multiKueue:
  gcInterval: 20s
integrations:
  frameworks: ["batch/job", "ray.io/rayjob"]
"""
    upgrade = ["upgrade", MANAGER_RELEASE, str(MANAGER_CHART), f"--kubeconfig={rig.kubeconfig(MANAGER)}"]
    upgrade += [f"--namespace={NAMESPACE}", "--reuse-values", "--skip-crds", "--wait", "--timeout=120s"]
    helm(rig.bin_dir, *upgrade, *set_args({"managerConfig.controllerManagerConfigYaml": config}))
    release = from_charts.Release(MANAGER, MANAGER_RELEASE, MANAGER_CHART, "kfed-manager-config", health, {})
    process = None
    try:
        container = from_charts.rendered_container(rig, release)
        local = next(a for a in container["args"] if a.startswith("--config="))
        assert Path(local.removeprefix("--config=")).read_text() == config
        assert not [a for a in container["args"] if a.startswith(("--qps", "--burst", "--health-port"))]
        argv, _ = from_charts.process_argv(container, installed.kubeconfig_for(MANAGER, MANAGER_RELEASE))
        process = Process(argv, installed.directory / "kfed-manager-config.log")
        with explained(process, "kfed-manager"):
            wait_for(
                lambda: lease_holder(rig, MANAGER, "kfed-manager"),
                until=lambda holder: holder.endswith(f"_{process.proc.pid}"),
                timeout=60,
                what="kfed-manager started with the configuration file to lead",
            )
            wait_for(
                lambda: [json.loads(line) for line in process.log().splitlines() if "health_port" in line],
                until=lambda starts: any(s.get("health_port") == health for s in starts),
                timeout=30,
                what=f"kfed-manager to serve its probes on the file's port {health}",
            )
            ignored = {
                json.loads(line)["field"] for line in process.log().splitlines() if "config.field_not_applied" in line
            }
            assert ignored == {"webhook", "leaderElection.resourceName", "integrations.frameworks"}
    finally:
        code = process.stop() if process is not None else 0
        helm(rig.bin_dir, *upgrade, *set_args({"managerConfig.controllerManagerConfigYaml": ""}))
    assert code == 0, process.log()[-3000:] if process is not None else ""
    assert process is not None
    assert_no_forbidden(process, "kfed-manager")


def test_an_upgrade_keeps_the_visibility_certificate_and_the_apiservices_ca(installed: Installed) -> None:
    """The chart makes the visibility API's CA and certificate once: `helm upgrade` finds its Secret (lookup) and
    keeps the pair, so the APIService's caBundle and the certificate kfed-manager serves still match."""
    rig = installed.rig

    def current() -> tuple[dict[str, str], str]:
        secret = json.loads(
            rig.kubectl(
                MANAGER, "-n", NAMESPACE, "get", "secret", f"{MANAGER_RELEASE}-visibility-cert", "-o", "json"
            ).stdout
        )
        api_service = json.loads(
            rig.kubectl(MANAGER, "get", "apiservice", "v1beta2.visibility.kueue.x-k8s.io", "-o", "json").stdout
        )
        return secret["data"], api_service["spec"]["caBundle"]

    before, ca_bundle = current()
    assert set(before) == {"ca.crt", "tls.crt", "tls.key"}
    assert ca_bundle == before["ca.crt"]
    assert base64.b64decode(ca_bundle).startswith(b"-----BEGIN CERTIFICATE-----")
    upgrade = ["upgrade", MANAGER_RELEASE, str(MANAGER_CHART), f"--kubeconfig={rig.kubeconfig(MANAGER)}"]
    upgrade += [f"--namespace={NAMESPACE}", "--reuse-values", "--skip-crds", "--wait", "--timeout=120s"]
    helm(rig.bin_dir, *upgrade)
    assert current() == (before, ca_bundle)


def test_kfed_manager_keeps_its_own_visibility_certificate(installed: Installed) -> None:
    """visibility.certificate.generatedBy: kfed-manager (helm template, Argo CD, Flux): the chart renders the Secret
    empty and the APIService without caBundle; kfed-manager, with nothing but its ServiceAccount's token, fills the
    Secret with a CA and a certificate, writes that CA into the APIService, and serves the certificate, which the CA
    verifies for the name the aggregator checks (and no other). Started again, it keeps the pair. Stopped, it leaves
    no copy of the key in its TMPDIR."""
    import ssl

    from e2e.rig import from_charts
    from e2e.rig.ports import free_port
    from e2e.scenarios.helpers import visibility_get

    rig = installed.rig
    secret_name = f"{MANAGER_RELEASE}-visibility-managed-cert"
    port = free_port()
    upgrade = ["upgrade", MANAGER_RELEASE, str(MANAGER_CHART), f"--kubeconfig={rig.kubeconfig(MANAGER)}"]
    upgrade += [f"--namespace={NAMESPACE}", "--reuse-values", "--skip-crds", "--wait", "--timeout=120s"]
    helm(
        rig.bin_dir,
        *upgrade,
        *set_args({"visibility.certificate.generatedBy": "kfed-manager", "visibility.port": port}),
    )

    def secret_data() -> dict[str, str]:
        found = rig.kubectl(MANAGER, "-n", NAMESPACE, "get", "secret", secret_name, "-o", "json", check=False)
        return (json.loads(found.stdout).get("data") or {}) if found.returncode == 0 else {}

    def ca_bundle() -> str:
        api_service = rig.kubectl(MANAGER, "get", "apiservice", "v1beta2.visibility.kueue.x-k8s.io", "-o", "json")
        return str(json.loads(api_service.stdout)["spec"].get("caBundle") or "")

    assert secret_data() == {}, "the chart renders the Secret empty"
    assert ca_bundle() == "", "the chart renders no caBundle"
    release = from_charts.Release(MANAGER, MANAGER_RELEASE, MANAGER_CHART, "kfed-manager-own-cert", 0, {})
    container = from_charts.rendered_container(rig, release)
    argv, _ = from_charts.process_argv(container, installed.kubeconfig_for(MANAGER, MANAGER_RELEASE))
    service = f"{MANAGER_RELEASE}-visibility.{NAMESPACE}.svc"
    pairs = []
    try:
        for attempt in range(2):
            process = Process(argv, installed.directory / f"kfed-manager-own-cert-{attempt}.log")
            try:
                with explained(process, "kfed-manager"):
                    data = wait_for(
                        secret_data,
                        until=lambda d: (
                            set(d) == {"ca.crt", "ca.key", "tls.crt", "tls.key"} and ca_bundle() == d["ca.crt"]
                        ),
                        timeout=60,
                        what="kfed-manager to fill its Secret and write the CA into the APIService",
                    )
                    ca = base64.b64decode(data["ca.crt"])
                    wait_for(
                        partial(_served_by, rig, port, ca, service),
                        until=bool,
                        timeout=60,
                        what="kfed-manager to serve the Secret's certificate",
                    )
                    with pytest.raises(ssl.SSLCertVerificationError):
                        visibility_get(
                            rig, "/apis", port=port, cert="front-proxy-client", ca=ca, server_name="x.example"
                        )
                    pairs.append(data)
            finally:
                code = process.stop()
            assert code == 0, process.log()[-3000:]
            assert_no_forbidden(process, "kfed-manager")
            assert process.left_in_tmp() == [], "the serving key and certificate are removed when kfed-manager stops"
        assert pairs[0] == pairs[1], "a restart keeps the pair"
        assert [e["reason"] for e in _events_on(rig, secret_name)] == ["CertificateMade"], "one pair, made once"
        # An APIService that sends elsewhere (Kueue's, say) is not kfed-manager's to change: left alone, and said.
        elsewhere = {"spec": {"service": {"name": "someone-else"}}}
        rig.kubectl(
            MANAGER,
            "patch",
            "apiservice",
            "v1beta2.visibility.kueue.x-k8s.io",
            "--type=merge",
            "-p",
            json.dumps(elsewhere),
        )
        process = Process(argv, installed.directory / "kfed-manager-own-cert-elsewhere.log")
        try:
            warning = wait_for(
                lambda: [e for e in _events_on(rig, secret_name) if e["reason"] == "CertificateNotInPlace"],
                until=bool,
                timeout=60,
                what="a Warning Event on the Secret saying why the caBundle is not kfed-manager's to set",
            )[0]
            assert warning["type"] == "Warning"
            assert f"sends to Service {NAMESPACE}/someone-else" in warning["note"], warning["note"]
            assert ca_bundle() == pairs[0]["ca.crt"], "the APIService is left as it was"
        finally:
            process.stop()
    finally:
        # kfed-manager's writes made it the caBundle's field manager: Helm's server-side apply takes it back only with
        # --force-conflicts (the chart's README says so for this switch)
        helm(rig.bin_dir, *upgrade, "--force-conflicts", *set_args({"visibility.certificate.generatedBy": "chart"}))


VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def _events_on(rig: Federation, secret: str) -> list[dict[str, Any]]:
    """The events.k8s.io Events about the Secret, oldest first."""
    listed = json.loads(rig.kubectl(MANAGER, "-n", NAMESPACE, "get", "events.events.k8s.io", "-o", "json").stdout)
    about = [e for e in listed["items"] if (e.get("regarding") or {}).get("name") == secret]
    return sorted(about, key=lambda e: e["metadata"]["creationTimestamp"])


def _served_by(rig: Federation, port: int, ca: bytes, server_name: str) -> bool:
    """kfed-manager's visibility port presents a certificate ``ca`` verifies for ``server_name``."""
    import ssl

    from e2e.scenarios.helpers import visibility_get

    try:
        code, _ = visibility_get(rig, VISIBILITY, port=port, cert="front-proxy-client", ca=ca, server_name=server_name)
    except (ssl.SSLError, OSError):
        return False
    return code == 200
