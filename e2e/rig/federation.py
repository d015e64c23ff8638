"""A whole local federation: the manager cluster and N workers, their kwok nodes, kfed's CRDs, kubeconfigs.

This is the one place that knows the rig's directory layout:

    DIR/rig.json                  what is running (for `down`), servers, kubeconfig paths
    DIR/kubeconfigs/<name>.yaml   admin kubeconfigs with inline credentials (manager.yaml, worker-1.yaml, ...)
    DIR/clusters/<name>/          certs, etcd data, logs/ of each process, audit log

``up`` in the directory of a rig that was stopped starts a new federation: it first removes what the old one left
there (``RIG_ENTRIES``), since a control plane started on the old etcd data would carry the old rig's objects and
fight the new install (Helm's apply conflicts with the rig's own patches of the released objects).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from e2e.rig.cluster import ClusterOptions, LocalCluster, RigError, stop_clusters
from e2e.rig.nodes import NodeShape, node_manifests
from e2e.rig.processes import ProcessRecord, launch_spec, paused, start_process, stop_records

if TYPE_CHECKING:
    from e2e.rig.controllers import Launch
    from e2e.rig.from_charts import Release

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "charts" / "kfed-agent" / "crds"
PREREQUISITE_CRDS = Path(__file__).parent / "crds"
"""CRDs of other projects the workers need (the cluster autoscaler's ProvisioningRequest), applied like kfed's."""
JOB_POLICY = REPO_ROOT / "charts" / "kfed-manager" / "files" / "job-admission-policy.yaml"
AGENT_JOB_POLICY = REPO_ROOT / "charts" / "kfed-agent" / "files" / "job-admission-policy.yaml"
MANAGER = "manager"
RIG_ENTRIES = (
    "rig.json",
    "summary.json",
    "clusters",
    "credentials",
    "kubeconfigs",
    "logs",
    "multikueue-kubeconfigs",
    "volumes",
)
"""What the rig writes in its directory: a new ``up`` in a stopped rig's directory removes these, nothing else."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def worker_name(index: int) -> str:
    return f"worker-{index}"


@dataclass
class FederationSpec:
    workers: int = 2
    node_shapes: dict[str, NodeShape] = field(default_factory=dict)
    """Per worker name; workers not listed get ``default_shape``."""
    default_shape: NodeShape = field(default_factory=NodeShape)
    job_seconds: float = 5.0
    node_monitor_grace_seconds: int = 40
    controllers: bool = False
    """Also start kfed-manager and one kfed-agent per worker (with the MultiKueue objects they need)."""
    dispatch_timeout: float | None = None
    """kfed-manager's --dispatch-timeout (None: its default)."""
    worker_lost_timeout: float | None = None
    """kfed-manager's --worker-lost-timeout (None: its default, Kueue's 15 min)."""
    shared_etcd: bool = False
    """Workers keep their objects in the manager cluster's etcd (a key prefix each): lighter rigs of many workers."""
    kfed_manager: bool = True
    """With ``controllers``: run kfed-manager (False: the manager cluster is left to another MultiKueue manager)."""
    agents: tuple[str, ...] | None = None
    """With ``controllers``: the workers that run a kfed-agent (None: all; the others are left to another system)."""
    agent_args: tuple[str, ...] = ()
    """Extra command-line arguments of every kfed-agent (e.g. ``("--node-failure-delay", "5")``)."""
    manager_nodes: int = 0
    """kwok nodes (and a scheduler) on the manager cluster, for Jobs that Kueue would run there (no MultiKueue)."""
    manager_args: tuple[str, ...] = ()
    """More kfed-manager flags (e.g. waitForPodsReady's)."""
    from_charts: bool = False
    """With ``controllers``: install both charts with helm and run kfed as their Deployments say, with only their
    ServiceAccounts' tokens, the workers joined by `kubectl kfed add-worker` (see e2e/rig/from_charts.py)."""
    apiserver_profiling: bool = False
    """Every apiserver serves /debug/pprof (benchmarks: where the control plane's CPU goes)."""

    def shape(self, worker: str) -> NodeShape:
        return self.node_shapes.get(worker, self.default_shape)


class Federation:
    """Start, use and stop a rig. Use :func:`running` (context manager) so it is stopped also on failure."""

    def __init__(self, directory: Path, bin_dir: Path, spec: FederationSpec, *, die_with_parent: bool) -> None:
        self.directory = directory.resolve()
        self.bin_dir = bin_dir
        self.spec = spec
        self.die_with_parent = die_with_parent
        self.controller_records: list[ProcessRecord] = []
        self.releases: list[Release] = []
        """From charts: the Helm releases installed (one per cluster)."""
        self.credentials: dict[str, Path] = {}
        """Process name -> the kubeconfig it runs with, when not the admin one (from charts: its token)."""
        self.launches: dict[str, Launch] = {}
        """From charts: process name -> how it was started (command, args and env of the rendered Deployment)."""
        self.expected_forbidden: set[str] = set()
        self.expected_forbidden_calls: set[tuple[str, str]] = set()
        """(cluster, text): a refusal about that cluster whose log line holds the text is on purpose (a test took
        that one verb away), any other refusal about it still counts."""
        """MultiKueueClusters a test makes refuse kfed on purpose: their 403s are not RBAC faults of the charts."""
        names = [MANAGER] + [worker_name(i) for i in range(1, spec.workers + 1)]
        self.clusters: dict[str, LocalCluster] = {}
        for name in names:  # the manager first: with shared_etcd, its etcd is the workers' too
            manager = self.clusters.get(MANAGER)
            shared = (
                f"http://127.0.0.1:{manager.ports.etcd_client}" if spec.shared_etcd and manager is not None else None
            )
            self.clusters[name] = LocalCluster(
                options=ClusterOptions(
                    name=name,
                    run_pods=name != MANAGER or spec.manager_nodes > 0,
                    job_seconds=spec.job_seconds,
                    node_monitor_grace_seconds=spec.node_monitor_grace_seconds,
                    shared_etcd=shared,
                    profiling=spec.apiserver_profiling,
                ),
                directory=self.directory / "clusters" / name,
                bin_dir=bin_dir,
                die_with_parent=die_with_parent,
            )

    @property
    def workers(self) -> list[str]:
        return [name for name in self.clusters if name != MANAGER]

    def kubeconfig(self, cluster: str) -> Path:
        """The cluster's admin kubeconfig (system:masters): for tests and the operator, never for kfed from charts."""
        return self.directory / "kubeconfigs" / f"{cluster}.yaml"

    def controller_kubeconfig(self, process: str) -> Path:
        """The kubeconfig the kfed process ``process`` (``kfed-manager``, ``kfed-agent-worker-1``) runs with: its
        ServiceAccount token from charts, else the admin one. A second replica started by a test uses this."""
        if process in self.credentials:
            return self.credentials[process]
        return self.kubeconfig(MANAGER if process == "kfed-manager" else process.removeprefix("kfed-agent-"))

    def forbidden_in_logs(self) -> list[str]:
        """Every line of kfed's logs where the apiserver refused a call, except the clusters in
        ``expected_forbidden``: with charts, a refusal is a missing RBAC rule."""
        from e2e.rig.from_charts import forbidden_lines

        found = []
        for log in sorted((self.directory / "logs").glob("*.log")):
            found += [
                f"{log.name}: {line}"
                for line in forbidden_lines(
                    log, expected_clusters=self.expected_forbidden, expected_calls=self.expected_forbidden_calls
                )
            ]
        return found

    # -- lifecycle -------------------------------------------------------------------------------------------

    def up(self) -> float:
        """Start everything and return the seconds it took; on any failure stop what was started and raise."""
        started = time.monotonic()
        if (self.directory / "rig.json").exists() and any(r.alive() for r in read_state_records(self.directory)):
            raise RigError(f"a rig is already running in {self.directory}; run `python -m e2e.rig down` first")
        if (self.directory / "rig.json").exists():
            clear_stopped_rig(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            for cluster in self.clusters.values():
                cluster.start_control_plane()
                self._save_state()
            for cluster in self.clusters.values():
                cluster.wait_apiserver()
            for cluster in self.clusters.values():
                cluster.start_components()
                self._save_state()
                shutil.copyfile(cluster.kubeconfig_path, _ensure_parent(self.kubeconfig(cluster.name)))
            self._install_crds()
            if self.spec.controllers and self.spec.from_charts:
                self._install_charts()  # the manager chart brings the Job admission policy
            else:
                self._install_job_policy()
            self._wait_job_policy()
            if self.spec.controllers:
                self._wait_agent_job_policy()
            for name in self.workers:
                self.kubectl(name, "apply", "-f", "-", input=_yaml_stream(node_manifests(name, self.spec.shape(name))))
            if self.spec.manager_nodes:
                nodes = node_manifests(MANAGER, NodeShape(count=self.spec.manager_nodes))
                self.kubectl(MANAGER, "apply", "-f", "-", input=_yaml_stream(nodes))
            for cluster in self.clusters.values():
                cluster.wait_components_healthy()
            for name in self.clusters:
                if self.clusters[name].options.run_pods:
                    self.kubectl(name, "wait", "--for=condition=Ready", "node", "--all", "--timeout=90s")
            for name in self.clusters:
                self._wait_default_service_account(name)
            if self.spec.controllers:
                self.start_controllers()
        except BaseException:
            self.down()
            raise
        return time.monotonic() - started

    def start_controllers(self) -> None:
        from e2e.rig.controllers import start_controllers, start_controllers_from_charts

        try:
            if self.spec.from_charts:
                start_controllers_from_charts(self)
            else:
                start_controllers(self)
        finally:
            self._save_state()

    def stop_controllers(self) -> list[str]:
        left = stop_records(self.controller_records)
        self.controller_records = []
        self._save_state()
        return left

    def down(self) -> list[str]:
        """Stop kfed's processes, then every cluster's control plane together, etcd last (see ``stop_clusters``)."""
        left: list[str] = self.stop_controllers()
        left += stop_clusters(list(self.clusters.values()))
        self._save_state()
        return left

    def paused(self, cluster: str, component: str = "kube-apiserver") -> AbstractContextManager[None]:
        """``with fed.paused("worker-1"):`` the worker's apiserver is frozen (SIGSTOP) and resumes afterwards."""
        return self.clusters[cluster].paused(component)

    def paused_controller(self, name: str) -> AbstractContextManager[None]:
        """``with fed.paused_controller("kfed-agent-worker-1"):`` that kfed process is frozen for the block."""
        return paused(next(r for r in self.controller_records if r.name == name))

    @contextmanager
    def stopped_controller(self, name: str, *, kill: bool = False) -> Iterator[None]:
        """``with fed.stopped_controller("kfed-manager"):`` that kfed process is stopped (SIGTERM, or SIGKILL with
        ``kill``) for the block and started again afterwards with the same command line, environment and log, also
        when the block fails. The new process is not waited for: tests wait on what it does. Call it from a thread
        that outlives the rig: a process started with ``die_with_parent`` dies with the thread that started it."""
        index, record = next((i, r) for i, r in enumerate(self.controller_records) if r.name == name)
        spec = launch_spec(record)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
        stop_records([record])
        try:
            yield
        finally:
            _, fresh = start_process(
                name,
                spec.argv,
                env=spec.env,
                cwd=spec.cwd,
                log_path=self.directory / "logs" / f"{name}.log",
                die_with_parent=self.die_with_parent,
            )
            self.controller_records[index] = fresh
            self._save_state()

    def restart_apiserver(self, cluster: str) -> None:
        self.clusters[cluster].restart_apiserver()
        self._save_state()

    # -- helpers ---------------------------------------------------------------------------------------------

    def kubectl(
        self, cluster: str, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig(cluster)}", *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise RigError(f"kubectl on {cluster} failed ({result.returncode}): {' '.join(args)}\n{result.stderr}")
        return result

    def _install_crds(self) -> None:
        if not CRD_DIR.is_dir() or not any(CRD_DIR.glob("*.yaml")):
            raise RigError(f"no CRDs in {CRD_DIR}; run `make crds`")
        for name in self.clusters:
            self.kubectl(name, "apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
            self.kubectl(name, "apply", "--server-side", "--force-conflicts", "-f", str(PREREQUISITE_CRDS))
        for name in self.clusters:
            self.kubectl(name, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def _install_job_policy(self) -> None:
        """The manager's MutatingAdmissionPolicy and its (empty) params ConfigMap, as the chart installs them."""
        params: list[dict[str, object]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kfed-system"}},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kfed-local-queues", "namespace": "kfed-system"},
            },
        ]
        self.kubectl(MANAGER, "apply", "-f", "-", input=_yaml_stream(params))
        self.kubectl(MANAGER, "apply", "-f", str(JOB_POLICY))
        if self.spec.controllers:
            for worker in self.agent_workers:
                self.kubectl(worker, "apply", "-f", str(AGENT_JOB_POLICY))

    @property
    def agent_workers(self) -> list[str]:
        """The workers that run a kfed-agent (with ``controllers``)."""
        agents = self.spec.agents
        return [w for w in self.workers if agents is None or w in agents]

    def _install_charts(self) -> None:
        from e2e.rig import from_charts

        self.releases = from_charts.releases(self)
        for release in self.releases:
            from_charts.install(self, release)

    def _wait_agent_job_policy(self, timeout: float = 30) -> None:
        """Returns once a server-side dry run shows each agent's MutatingAdmissionPolicy in effect on its worker."""
        deadline = time.monotonic() + timeout
        for worker in self.agent_workers:
            self._wait_policy(worker, "{.spec.suspend}", "true", deadline, what="the kfed-agent job admission policy")

    def _wait_job_policy(self, timeout: float = 30) -> None:
        """Returns once a server-side dry run shows the manager's MutatingAdmissionPolicy in effect."""
        deadline = time.monotonic() + timeout
        self._wait_policy(
            MANAGER,
            "{.spec.managedBy}",
            "kueue.x-k8s.io/multikueue",
            deadline,
            what="the manager's job admission policy",
        )

    def _wait_policy(self, cluster: str, field: str, expected: str, deadline: float, *, what: str) -> None:
        """Until ``deadline`` (monotonic), dry-run a queued Job on ``cluster`` until its ``field`` (a jsonpath) reads
        ``expected``: the admission policy ``what`` is in effect there."""
        probe = yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "kfed-rig-policy-probe", "namespace": "default", "labels": {QUEUE_LABEL: "x"}},
                "spec": {
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
                },
            }
        )
        while True:
            result = self.kubectl(
                cluster, "create", "--dry-run=server", "-o", f"jsonpath={field}", "-f", "-", input=probe, check=False
            )
            if result.returncode == 0 and result.stdout.strip() == expected:
                return
            if time.monotonic() >= deadline:
                raise RigError(f"{what} did not take effect on {cluster} in time")
            time.sleep(0.25)

    def _wait_default_service_account(self, cluster: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.kubectl(cluster, "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0:
                return
            time.sleep(0.25)
        raise RigError(f"{cluster}: the default ServiceAccount never appeared (is kube-controller-manager running?)")

    def _save_state(self) -> None:
        records = [r.to_json() for c in self.clusters.values() for r in c.records]
        records += [r.to_json() for r in self.controller_records]
        state = {
            "clusters": {
                name: {"server": c.server, "kubeconfig": str(self.kubeconfig(name))}
                for name, c in self.clusters.items()
            },
            "processes": records,
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "rig.json").write_text(json.dumps(state, indent=2) + "\n")


def read_state_records(directory: Path) -> list[ProcessRecord]:
    try:
        state = json.loads((directory / "rig.json").read_text())
    except (OSError, ValueError):
        return []
    return [ProcessRecord.from_json(item) for item in state.get("processes", [])]


def clear_stopped_rig(directory: Path) -> None:
    """Remove what a stopped rig left in ``directory`` (``RIG_ENTRIES``), so the next ``up`` starts afresh."""
    for entry in RIG_ENTRIES:
        path = directory / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def stop_directory(directory: Path) -> list[str]:
    """Stop every process recorded in ``directory/rig.json`` (the `down` command); returns names left alive.

    kfed's processes and the control planes go first, etcd last (see ``stop_clusters``).
    """
    records = read_state_records(directory)
    left = stop_records([r for r in records if not r.name.endswith("/etcd")])
    return left + stop_records([r for r in records if r.name.endswith("/etcd")])


@contextmanager
def running(directory: Path, bin_dir: Path, spec: FederationSpec) -> Iterator[Federation]:
    """A rig for the duration of a block, stopped on the way out whatever happens (used by tests)."""
    fed = Federation(directory, bin_dir, spec, die_with_parent=True)
    fed.up()
    try:
        yield fed
    finally:
        fed.down()


def _ensure_parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _yaml_stream(docs: list[dict[str, object]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)
