"""kfed on the rig as users install it (`e2e.rig up --from-charts`): the charts installed with the toolchain's
helm, each controller run with exactly its rendered Deployment's command, args and env, authenticated only by a
token of the chart's ServiceAccount, and the manager reaching each worker only through the Secret that
`kubectl kfed add-worker` made. So the charts' RBAC is what every test that uses this mode exercises.

The rig cannot run containers, so each release is installed with ``replicaCount: 0`` and the rig plays the kubelet:
it reads the Deployment back from the release (``helm get manifest``), mints a token for its ServiceAccount
(TokenRequest, as the kubelet's projected volume does) and starts the container's command as a local process.
The process gets what in-cluster config would give it, a bearer token and the cluster's CA for the apiserver's
URL, as a kubeconfig (``--kubeconfig``, the one argument added: the in-cluster token path is fixed and shared).
Everything the rig needs different from the chart's defaults (ports, short timeouts, loopback binding) is passed
as chart values, so it shows in the rendered args like any user's settings.

The rig also plays the network for the manager's visibility API: the chart's APIService names a Service in front
of the pods, and a local process is behind none, so once the release is installed the rig patches that Service to
``type: ExternalName``, ``externalName: localhost`` (kube-aggregator then dials ``https://localhost:<the
APIService's port>``) and the APIService's ``spec.service.port`` to the process's ``--visibility-port``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from e2e.charts import AGENT_CHART, MANAGER_CHART, helm, set_args
from e2e.rig.cluster import RigError
from e2e.rig.ports import free_port

if TYPE_CHECKING:
    from e2e.rig.federation import Federation

NAMESPACE = "kfed-system"
MANAGER_RELEASE = "kfed-manager"
AGENT_RELEASE = "kfed-agent"
VISIBILITY_API_SERVICE = "v1beta2.visibility.kueue.x-k8s.io"
TOKEN_DURATION = "48h"
"""Longer than any test run; the processes never re-read their token (a pod's projected token is refreshed)."""


@dataclass(frozen=True)
class Release:
    cluster: str
    name: str
    chart: Path
    process: str
    """The rig's name of the process (``kfed-manager``, ``kfed-agent-worker-1``): log file and ProcessRecord."""
    health_port: int
    values: dict[str, Any]


def releases(fed: Federation) -> list[Release]:
    """The manager release and one agent release per worker, with the rig's values."""
    spec = fed.spec
    manager_args = ["--bind-address=127.0.0.1"]
    if spec.dispatch_timeout:
        manager_args.append(f"--dispatch-timeout={spec.dispatch_timeout}")
    manager_args += spec.manager_args
    manager_values: dict[str, Any] = {
        "replicaCount": 0,
        "manager.gcInterval": 10,
        "manager.multikueueKubeconfigDir": str(fed.directory / "multikueue-kubeconfigs"),
        "manager.extraArgs": manager_args,
        "dashboard.enabled": True,  # the browser test reads it (off in the chart's defaults)
        "dashboard.port": free_port(),
        "visibility.port": free_port(),  # on in the chart's defaults; reached through route_visibility
    }
    if spec.worker_lost_timeout:
        manager_values["manager.workerLostTimeout"] = spec.worker_lost_timeout
    out = [_release("manager", MANAGER_RELEASE, MANAGER_CHART, "kfed-manager", manager_values)]
    for worker in fed.workers:
        agent_args = ["--bind-address=127.0.0.1", *spec.agent_args]
        values = {"replicaCount": 0, "clusterName": worker, "agent.extraArgs": agent_args}
        out.append(_release(worker, AGENT_RELEASE, AGENT_CHART, f"kfed-agent-{worker}", values))
    return out


def _release(cluster: str, name: str, chart: Path, process: str, values: dict[str, Any]) -> Release:
    health = free_port()
    return Release(cluster, name, chart, process, health, {**values, "healthPort": health, "metricsPort": free_port()})


def install(fed: Federation, release: Release) -> None:
    helm(
        fed.bin_dir,
        "upgrade",
        "--install",
        release.name,
        str(release.chart),
        f"--kubeconfig={fed.kubeconfig(release.cluster)}",
        f"--namespace={NAMESPACE}",
        "--create-namespace",
        "--skip-crds",  # the rig applied the charts' CRDs already (server-side, as the chart README says to)
        "--wait",
        "--timeout=120s",
        *set_args(release.values),
    )
    if release.chart == MANAGER_CHART and release.values.get("visibility.enabled", True):
        route_visibility(fed, release)


def route_visibility(fed: Federation, release: Release) -> None:
    """Point the chart's visibility APIService at the local kfed-manager: its Service becomes an ExternalName of
    localhost (clusterIP, clusterIPs, ipFamilies and ipFamilyPolicy cleared, as validation requires of one; the
    selector too, no pods are behind it) and the APIService's port the process's ``--visibility-port``, since for
    an ExternalName Service the aggregator dials ``https://<externalName>:<spec.service.port>`` (kube-aggregator's
    ResolveCluster).

    A ``helm upgrade`` of the release applies the chart's Service and port again (server-side, so only with
    ``--force-conflicts``: these fields are now the rig's): call this again after it."""
    port = int(release.values["visibility.port"])
    api_service = f"apiservices.apiregistration.k8s.io/{VISIBILITY_API_SERVICE}"
    service = json.loads(fed.kubectl(release.cluster, "get", api_service, "-o=json").stdout)["spec"]["service"]
    external = {
        "type": "ExternalName",
        "externalName": "localhost",
        **dict.fromkeys(("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "selector")),
    }
    fed.kubectl(
        release.cluster,
        f"--namespace={service['namespace']}",
        "patch",
        "service",
        service["name"],
        "--type=merge",
        f"--patch={json.dumps({'spec': external})}",
    )
    port_patch = {"spec": {"service": {"port": port}}}
    fed.kubectl(release.cluster, "patch", api_service, "--type=merge", f"--patch={json.dumps(port_patch)}")


def rendered_container(fed: Federation, release: Release) -> dict[str, Any]:
    """The first container of the release's Deployment, as installed."""
    manifest = helm(
        fed.bin_dir,
        "get",
        "manifest",
        release.name,
        f"--kubeconfig={fed.kubeconfig(release.cluster)}",
        f"--namespace={NAMESPACE}",
    ).stdout
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    container["serviceAccountName"] = pod["serviceAccountName"]
    container["args"] = _mount_volumes(fed, release, pod, container, docs)
    return container


def _mount_volumes(
    fed: Federation, release: Release, pod: dict[str, Any], container: dict[str, Any], docs: list[dict[str, Any]]
) -> list[str]:
    """The kubelet's part for ConfigMap and Secret volumes (the configuration file, the visibility API's serving
    certificate): their keys written as files under the rig's directory (a Secret's decoded, mode 0600), and the
    container's args pointing there instead of at the mount path. A Secret the release did not render is read from
    the cluster, as the kubelet would."""
    args = [str(a) for a in container.get("args") or []]
    volumes = {v["name"]: v for v in pod.get("volumes") or ()}
    for mount in container.get("volumeMounts") or ():
        volume = volumes.get(mount["name"], {})
        files: dict[str, bytes] = {}
        if "configMap" in volume:
            name = volume["configMap"]["name"]
            config_map = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)
            files = {key: text.encode() for key, text in (config_map.get("data") or {}).items()}
        elif "secret" in volume:
            name = volume["secret"]["secretName"]
            secret = next((d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name), None)
            if secret is None:
                secret = json.loads(
                    fed.kubectl(release.cluster, "-n", NAMESPACE, "get", "secret", name, "-o", "json").stdout
                )
            files = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
        else:
            continue
        directory = fed.directory / "volumes" / release.process / mount["name"]
        directory.mkdir(parents=True, exist_ok=True)
        for key, content in files.items():
            path = directory / key
            path.write_bytes(content)
            if "secret" in volume:
                path.chmod(0o600)
        args = [a.replace(mount["mountPath"], str(directory)) for a in args]
    return args


def token_kubeconfig(fed: Federation, cluster: str, service_account: str, *, namespace: str = NAMESPACE) -> Path:
    """A kubeconfig with only a fresh TokenRequest token of the ServiceAccount and the cluster's CA (what
    in-cluster config reads from /var/run/secrets/kubernetes.io/serviceaccount), mode 0600."""
    token = fed.kubectl(
        cluster, "-n", namespace, "create", "token", service_account, f"--duration={TOKEN_DURATION}"
    ).stdout.strip()
    admin = yaml.safe_load(fed.kubeconfig(cluster).read_text())["clusters"][0]["cluster"]
    text = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": cluster, "cluster": {k: admin[k] for k in ("server", "certificate-authority-data")}}],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": service_account}}],
            "current-context": cluster,
        }
    )
    path = fed.directory / "credentials" / f"{cluster}-{service_account}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path


def process_argv(container: dict[str, Any], kubeconfig: Path) -> tuple[list[str], dict[str, str]]:
    """The container's command + args as a local process (the command is this venv's console script) and its env."""
    command = list(container.get("command") or [])
    if not command:
        raise RigError(f"container {container.get('name')} has no command (the image's entrypoint is not known here)")
    script = Path(sys.executable).parent / command[0]
    if not script.exists():
        raise RigError(f"{script} not found; install kfed into this environment (`make venv`)")
    env = dict(os.environ)
    for item in container.get("env") or ():
        if "value" not in item:
            raise RigError(f"env {item['name']}: only plain values can be reproduced outside a pod")
        env[item["name"]] = str(item["value"])
    argv = [str(script), *command[1:], *(container.get("args") or []), f"--kubeconfig={kubeconfig}"]
    return argv, env


def add_worker(fed: Federation, worker: str, *, multikueue_config: str) -> None:
    """`kubectl kfed add-worker` as an operator runs it, with the rig's admin kubeconfigs."""
    plugin = Path(sys.executable).parent / "kubectl-kfed"
    cmd = [
        str(plugin),
        f"--kubeconfig={fed.kubeconfig('manager')}",
        "add-worker",
        worker,
        f"--worker-kubeconfig={fed.kubeconfig(worker)}",
        f"--multikueue-config={multikueue_config}",
        f"--namespace={NAMESPACE}",
        "--wait=0",  # the manager is not started yet
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RigError(f"kubectl kfed add-worker {worker} failed:\n{result.stdout}\n{result.stderr}")


_STATUS_403 = re.compile(r'"(?:status|code)":\s*403\b')


QUOTING_EVENTS = frozenset({"agent.pods_not_created", "pods unschedulable on the worker"})
"""kfed's log lines that quote a worker's Job controller, whose pod creation that cluster refused (e.g. a
ServiceAccount missing there): not a call of kfed's."""


def refused(line: str) -> bool:
    """A log line about a call the apiserver refused: "Forbidden" in the error, or a status/code field of 403 (not
    merely "403" inside a port number or a timestamp). A create refused because its namespace is being deleted
    (the apiserver's 403 ``NamespaceTerminating``) is not a refusal of kfed's permissions, nor is a line that quotes
    another component's refusal (``QUOTING_EVENTS``)."""
    if "because it is being terminated" in line:
        return False
    if any(f'"event": "{event}"' in line for event in QUOTING_EVENTS):
        return False
    return "forbidden" in line.lower() or bool(_STATUS_403.search(line))


def forbidden_lines(
    log: Path, *, expected_clusters: set[str], expected_calls: Collection[tuple[str, str]] = ()
) -> list[str]:
    """Lines of a kfed log where the apiserver refused a call (403 / Forbidden), except those about clusters a test
    made refuse on purpose (``expected_clusters``: MultiKueueCluster names) and those about a cluster that hold a
    text a test expects there (``expected_calls``: (cluster, text), e.g. a verb it took away)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if not refused(line):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = {}
        about = {str(record.get(k)) for k in ("cluster", "worker", "name") if isinstance(record, dict) and k in record}
        if about & expected_clusters or any(c in about and text in line for c, text in expected_calls):
            continue
        found.append(line)
    return found


def admission_check() -> dict[str, Any]:
    """The MultiKueue AdmissionCheck an operator writes, naming the MultiKueueConfig add-worker fills."""
    from e2e.rig.controllers import multikueue_objects

    return next(o for o in multikueue_objects([], {}) if o["kind"] == "AdmissionCheck")


def main(argv: list[str]) -> int:
    """`python -m e2e.rig.from_charts objects [--manager]`: the objects an operator applies after the charts (the
    AdmissionCheck and the sample queues), as a List, for e2e/kind/up.sh."""
    import argparse

    from e2e.queues import queue_objects

    parser = argparse.ArgumentParser(prog="python -m e2e.rig.from_charts")
    parser.add_argument("command", choices=["objects"])
    parser.add_argument("--manager", action="store_true", help="the manager cluster's (else a worker's)")
    parser.add_argument("--cpu", default="8")
    parser.add_argument("--memory", default="16Gi")
    args = parser.parse_args(argv)
    items = [admission_check()] if args.manager else []
    items += queue_objects(namespace="default", cpu=args.cpu, memory=args.memory, manager=args.manager)
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
