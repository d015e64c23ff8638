"""One local Kubernetes cluster of real binaries: etcd, kube-apiserver, controller-manager, scheduler, kwok.

A cluster owns a directory (certs, data, logs, kubeconfig) and the processes it started; it knows how to wait
for each to be healthy, how to restart its apiserver (for watch-resilience tests), and how to stop.
"""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from e2e.rig import kubeconfig, pki
from e2e.rig.kwok_stages import render_stages
from e2e.rig.ports import free_port
from e2e.rig.processes import ProcessRecord, paused, start_process, stop_records

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
"""


class RigError(RuntimeError):
    """A cluster did not come up; the message names the process and its log."""


@dataclass
class ClusterPorts:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def allocate(cls) -> ClusterPorts:
        return cls(*(free_port() for _ in range(6)))


@dataclass
class ClusterOptions:
    """What differs between clusters of one rig."""

    name: str
    run_pods: bool = True
    """Start kube-scheduler and kwok (workers); the manager cluster never runs pods."""
    job_seconds: float = 5.0
    node_monitor_grace_seconds: int = 40
    shared_etcd: str | None = None
    """Client URL of another cluster's etcd to keep this cluster's objects in (under its own key prefix) instead
    of starting an etcd of its own: light clusters for rigs with many workers."""
    profiling: bool = False
    """Serve the apiserver's /debug/pprof (benchmarks that profile where the control plane's CPU goes)."""


@dataclass
class LocalCluster:
    options: ClusterOptions
    directory: Path
    bin_dir: Path
    die_with_parent: bool
    ports: ClusterPorts = field(default_factory=ClusterPorts.allocate)
    records: list[ProcessRecord] = field(default_factory=list)
    _popens: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _argv: dict[str, list[str]] = field(default_factory=dict)
    _pki: pki.ClusterPki | None = None

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.directory / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.directory / "logs" / "audit.log"

    def log_path(self, component: str) -> Path:
        return self.directory / "logs" / f"{component}.log"

    # -- start ---------------------------------------------------------------------------------------------

    def start_control_plane(self) -> None:
        """Start etcd and the apiserver without waiting, so several clusters boot at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._pki = pki.write_cluster_pki(self.directory / "pki", cluster=self.name)
        self._write_kubeconfigs()
        if self.options.shared_etcd is None:
            self._start("etcd", self._etcd_argv())
        self._start("kube-apiserver", self._apiserver_argv())

    def wait_apiserver(self, timeout: float = 90) -> None:
        self._wait_ready("kube-apiserver", f"{self.server}/readyz", timeout=timeout)

    def start_components(self) -> None:
        """Controller-manager always; scheduler and kwok only where pods run."""
        self._start("kube-controller-manager", self._controller_manager_argv())
        if self.options.run_pods:
            self._start("kube-scheduler", self._scheduler_argv())
            (self.directory / "kwok.yaml").write_text(render_stages(job_seconds=self.options.job_seconds))
            self._start("kwok", self._kwok_argv())

    def wait_components_healthy(self, timeout: float = 60) -> None:
        self._wait_ready(
            "kube-controller-manager", f"https://127.0.0.1:{self.ports.controller_manager}/healthz", timeout=timeout
        )
        if self.options.run_pods:
            self._wait_ready("kube-scheduler", f"https://127.0.0.1:{self.ports.scheduler}/healthz", timeout=timeout)
            self._wait_ready("kwok", f"http://127.0.0.1:{self.ports.kwok}/healthz", timeout=timeout)

    def _write_kubeconfigs(self) -> None:
        assert self._pki is not None
        ca = self._pki.ca_cert.read_bytes()
        for role, pair in self._pki.clients.items():
            text = kubeconfig.render_kubeconfig(cluster=self.name, server=self.server, ca_pem=ca, client=pair)
            kubeconfig.write_kubeconfig(self.directory / f"{role}.kubeconfig", text)

    def _start(self, component: str, argv: list[str]) -> None:
        self._argv[component] = argv
        proc, record = start_process(
            f"{self.name}/{component}", argv, log_path=self.log_path(component), die_with_parent=self.die_with_parent
        )
        self._popens[component] = proc
        self.records = [r for r in self.records if r.name != record.name] + [record]

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _etcd_argv(self) -> list[str]:
        p = self.ports
        return [
            self._bin("etcd"),
            f"--name={self.name}",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{p.etcd_client}",
            f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client}",
            f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
            f"--initial-cluster={self.name}=http://127.0.0.1:{p.etcd_peer}",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=2147483648",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        assert self._pki is not None
        k = self._pki
        policy = self.directory / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        return [
            self._bin("kube-apiserver"),
            *(
                [f"--etcd-servers={self.options.shared_etcd}", f"--etcd-prefix=/registry-{self.name}"]
                if self.options.shared_etcd
                else [f"--etcd-servers=http://127.0.0.1:{self.ports.etcd_client}"]
            ),
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.apiserver}",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={k.serving_cert}",
            f"--tls-private-key-file={k.serving_key}",
            f"--client-ca-file={k.ca_cert}",
            # The aggregator's front proxy (as kubeadm sets it up): aggregated API servers, kfed-manager's visibility
            # API among them, trust requests carrying this client cert and take the user from these headers.
            f"--requestheader-client-ca-file={k.front_proxy_ca_cert}",
            f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={k.front_proxy_client_cert}",
            f"--proxy-client-key-file={k.front_proxy_client_key}",
            f"--service-account-key-file={k.sa_pub}",
            f"--service-account-signing-key-file={k.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            f"--profiling={'true' if self.options.profiling else 'false'}",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-maxsize=200",
            f"--cert-dir={self.directory / 'pki'}",
        ]

    def _controller_manager_argv(self) -> list[str]:
        assert self._pki is not None
        return [
            self._bin("kube-controller-manager"),
            f"--kubeconfig={self.directory / 'controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={self.directory / 'controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={self.directory / 'controller-manager.kubeconfig'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.controller_manager}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={self._pki.sa_key}",
            f"--root-ca-file={self._pki.ca_cert}",
            f"--cluster-signing-cert-file={self._pki.ca_cert}",
            f"--cluster-signing-key-file={self._pki.ca_key}",
            f"--node-monitor-grace-period={self.options.node_monitor_grace_seconds}s",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--concurrent-job-syncs=10",
            "--profiling=false",
        ]

    def _scheduler_argv(self) -> list[str]:
        kc = self.directory / "scheduler.kubeconfig"
        return [
            self._bin("kube-scheduler"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports.scheduler}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def _kwok_argv(self) -> list[str]:
        return [
            self._bin("kwok"),
            f"--kubeconfig={self.kubeconfig_path}",
            f"--config={self.directory / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-label-selector=kfed.io/kwok-node=true",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{self.ports.kwok}",
            "--node-ip=10.0.0.1",
            "--cidr=10.244.0.0/16",
        ]

    # -- health ----------------------------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        assert self._pki is not None
        ctx = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # component health ports use self-signed serving certs
        admin = self.directory / "pki"
        ctx.load_cert_chain(str(admin / "admin.crt"), str(admin / "admin.key"))
        return ctx

    def _wait_ready(self, component: str, url: str, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        ctx = self._ssl_context() if url.startswith("https") else None
        last = "no answer"
        while time.monotonic() < deadline:
            proc = self._popens.get(component)
            if proc is not None and proc.poll() is not None:
                raise RigError(
                    f"{self.name}/{component} exited with {proc.returncode}; see {self.log_path(component)}:\n"
                    + _tail(self.log_path(component))
                )
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            time.sleep(0.2)
        raise RigError(
            f"{self.name}/{component} not healthy at {url} after {timeout:.0f}s ({last}); "
            f"see {self.log_path(component)}:\n{_tail(self.log_path(component))}"
        )

    # -- restart / stop --------------------------------------------------------------------------------------

    def restart_apiserver(self) -> None:
        record = next(r for r in self.records if r.name == f"{self.name}/kube-apiserver")
        stop_records([record])
        self._reap("kube-apiserver")
        self._start("kube-apiserver", self._argv["kube-apiserver"])
        self._wait_ready("kube-apiserver", f"{self.server}/readyz", timeout=90)

    def paused(self, component: str = "kube-apiserver") -> AbstractContextManager[None]:
        """Freeze one of this cluster's processes for a block (see ``processes.paused``)."""
        return paused(next(r for r in self.records if r.name == f"{self.name}/{component}"))

    def stop(self) -> list[str]:
        return stop_clusters([self])

    def reap(self) -> None:
        """Collect the exit status of every process this object started (after they were stopped)."""
        for component in list(self._popens):
            self._reap(component)

    def _reap(self, component: str) -> None:
        proc = self._popens.pop(component, None)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def stop_clusters(clusters: list[LocalCluster]) -> list[str]:
    """Stop every cluster's processes at once, etcd last: an apiserver whose etcd is still there exits in about a
    second, while stopping both together leaves each waiting on the other for the whole grace period."""
    records = [r for cluster in clusters for r in cluster.records]
    left = stop_records([r for r in records if not r.name.endswith("/etcd")])
    left += stop_records([r for r in records if r.name.endswith("/etcd")])
    for cluster in clusters:
        cluster.reap()
    return left


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
