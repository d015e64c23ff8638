"""Stock Kueue MultiKueue on the rig, for the compare bench: the system kfed is measured against.

Kueue v0.19.1 (built from its Go module by ``e2e.toolchain.kueue``) runs as one local process per cluster, as
``KUEUE-REFERENCE.md`` describes: leader election off, internal cert management off, no webhook configurations
registered (so the manager's Jobs carry ``suspend: true`` and ``managedBy`` themselves), only ``batch/job``,
``VisibilityOnDemand`` off. Its CRDs replace kfed's on every cluster. The manager's Kueue gets the same
AdmissionCheck, MultiKueueConfig, MultiKueueClusters and kubeconfig Secrets as kfed (in ``kueue-system``), and the
same queues, so the Jobs and the quota are the same. As deployed, Kueue authenticates with ServiceAccount tokens:
its own one in each cluster, and in the MultiKueueClusters' Secrets the kubeconfigs Kueue's
create-multikueue-kubeconfig.sh makes (``e2e.interop``), as kfed runs from its charts.

Three variants: ``kueue`` with its shipped client settings, ``kueue-qps`` with kfed's QPS/burst on its own
cluster's client (``clientConnection``), which is all v0.19.1 lets one set: its MultiKueue clients to the workers keep
client-go's 5 QPS / burst 10. ``kueue-equal-qps`` is ``kueue-qps`` built with those clients at kfed's limits too
(``e2e.toolchain.kueue.remote_qps_patch``, a one-line change to its source, built on demand): equal limits.

Without internal cert management Kueue reads its metrics certificate from the fixed path /etc/kueue/metrics/certs;
a throwaway self-signed pair is written there when missing (this needs write access to /etc).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from e2e.interop import kueue_manager_kubeconfig
from e2e.queues import apply_sample_queues
from e2e.rig.cluster import RigError
from e2e.rig.controllers import multikueue_objects
from e2e.rig.pki import CertificateAuthority
from e2e.rig.ports import free_port
from e2e.rig.processes import ProcessRecord, start_process, stop_records

if TYPE_CHECKING:
    from e2e.bench.compare_bench import System
    from e2e.rig.federation import Federation

NAMESPACE = "kueue-system"
KUEUE_SA = "kueue-controller-manager"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
KFED_QPS, KFED_BURST = 300.0, 500


def _pair(directory: Path, name: str) -> None:
    ca = CertificateAuthority(f"kfed-bench-{name}")
    pair = ca.issue(name, server_names=("127.0.0.1", "localhost"))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)


def configuration(*, webhook_port: int, health_port: int, cert_dir: Path, qps: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    if qps:
        config["clientConnection"] = {"qps": KFED_QPS, "burst": KFED_BURST}
    return config


class StockKueue:
    def __init__(self, *, qps: bool, remote_qps: bool = False) -> None:
        self.qps = qps
        self.remote_qps = remote_qps
        self.records: list[ProcessRecord] = []

    def setup(self, fed: Federation) -> None:
        # kfed's Job admission policy is kfed's, not Kueue's: the Jobs below carry managedBy and suspend themselves.
        fed.kubectl(
            "manager", "delete", "mutatingadmissionpolicybinding", "kfed-queued-jobs-managed-by-multikueue", check=False
        )
        install_kueue_crds(fed, list(fed.clusters))
        kubeconfigs = {w: kueue_manager_kubeconfig(fed, w) for w in fed.workers}
        objects = [o for o in multikueue_objects(fed.workers, kubeconfigs) if o["kind"] != "Namespace"]
        for obj in objects:
            if obj["kind"] == "Secret":
                obj["metadata"]["namespace"] = NAMESPACE
        fed.kubectl(
            "manager", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )
        apply_sample_queues(fed)
        self.records += launch_kueue(fed, list(fed.clusters), qps=self.qps, remote_qps=self.remote_qps)
        _wait_active(fed)

    def teardown(self, fed: Federation) -> None:
        stop_records(self.records)
        self.records = []


def install_kueue_crds(fed: Federation, clusters: list[str]) -> None:
    """Kueue v0.19.1's CRDs in place of kfed's on ``clusters``, and its namespace there."""
    from e2e.toolchain.kueue import ensure_kueue

    _binary, crds = ensure_kueue()
    for cluster in clusters:
        fed.kubectl(cluster, "apply", "--server-side", "--force-conflicts", "-f", str(crds))
        fed.kubectl(cluster, "create", "namespace", NAMESPACE, check=False)
    for cluster in clusters:
        fed.kubectl(cluster, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


def in_cluster_kubeconfig(fed: Federation, cluster: str) -> Path:
    """What Kueue's Deployment authenticates with in a cluster: a token of its ServiceAccount
    ``kueue-controller-manager``, here bound to ``cluster-admin`` (Kueue's own ClusterRole is nearly as wide), so
    each of its requests costs the apiserver what a deployed Kueue's does: a cached token review, not the
    verification of an admin client certificate."""
    from e2e.rig.from_charts import token_kubeconfig

    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": KUEUE_SA, "namespace": NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{KUEUE_SA}-bench"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": KUEUE_SA, "namespace": NAMESPACE}],
        },
    ]
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return token_kubeconfig(fed, cluster, KUEUE_SA, namespace=NAMESPACE)


def launch_kueue(
    fed: Federation, clusters: list[str], *, qps: bool = False, remote_qps: bool = False, log_level: str = "info"
) -> list[ProcessRecord]:
    """Start stock Kueue on each of ``clusters`` (its CRDs installed) and wait until each is ready. The processes
    are returned as soon as they start, also when one never gets ready: the caller stops them. ``remote_qps``: the
    build whose worker clients have kfed's limits."""
    from e2e.toolchain.kueue import ensure_kueue, ensure_kueue_remote_qps

    binary = ensure_kueue_remote_qps(KFED_QPS, KFED_BURST) if remote_qps else ensure_kueue()[0]
    if not (METRICS_CERTS / "tls.crt").exists():
        _pair(METRICS_CERTS, "kueue-metrics")
    records: list[ProcessRecord] = []
    launched = []
    try:
        for cluster in clusters:
            directory = fed.directory / "kueue" / cluster
            cert_dir = directory / "webhook-certs"
            _pair(cert_dir, f"kueue-{cluster}")
            health = free_port()
            config = configuration(webhook_port=free_port(), health_port=health, cert_dir=cert_dir, qps=qps)
            (directory / "config.yaml").write_text(yaml.safe_dump(config))
            proc, record = start_process(
                f"kueue-{cluster}",
                [
                    str(binary),
                    f"--config={directory / 'config.yaml'}",
                    f"--kubeconfig={in_cluster_kubeconfig(fed, cluster)}",
                    f"--zap-log-level={log_level}",
                ],
                log_path=directory / "kueue.log",
                die_with_parent=fed.die_with_parent,
            )
            records.append(record)
            launched.append((cluster, health, proc, directory / "kueue.log"))
        for cluster, port, proc, log in launched:
            _wait_ready(f"kueue on {cluster}", port, proc, log)
    except BaseException:
        stop_records(records)
        raise
    return records


def _wait_ready(name: str, port: int, proc: Any, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RigError(f"{name} exited with {proc.returncode}; see {log}:\n" + _tail(log))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise RigError(f"{name} not ready after {timeout:.0f}s; see {log}:\n" + _tail(log))


def _wait_active(fed: Federation, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        out = fed.kubectl(
            "manager",
            "get",
            "admissionchecks.kueue.x-k8s.io,multikueueclusters.kueue.x-k8s.io",
            "-o",
            'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Active")].status} {end}',
        ).stdout
        states = dict(item.split("=", 1) for item in out.split())
        if states and all(v == "True" for v in states.values()):
            return
        time.sleep(1)
    raise RigError(f"stock Kueue's MultiKueue objects not Active after {timeout:.0f}s: {out}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def suspended(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without Kueue's webhook, the Jobs say themselves what it would have set."""
    out: list[dict[str, Any]] = json.loads(json.dumps(manifests))
    for manifest in out:
        manifest["spec"]["suspend"] = True
        manifest["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    return out


def systems(submit: Callable[[Federation, list[dict[str, Any]]], None]) -> dict[str, System]:
    from e2e.bench.compare_bench import System
    from e2e.rig.federation import MANAGER

    found: dict[str, System] = {}
    for name, qps, remote_qps in (("kueue", False, False), ("kueue-qps", True, False), ("kueue-equal-qps", True, True)):
        stock = StockKueue(qps=qps, remote_qps=remote_qps)
        found[name] = System(
            name,
            False,
            stock.setup,
            lambda fed, manifests: submit(fed, suspended(manifests)),
            lambda fed: [MANAGER],
            teardown=stock.teardown,
            extra_records=lambda stock=stock: list(stock.records),  # type: ignore[misc]
        )
    return found
