"""kfed itself on the rig: MultiKueue objects and kubeconfig Secrets on the manager, then kfed-manager and one
kfed-agent per worker as local processes (logs under ``DIR/logs/``), stopped with the rig.

The objects follow Kueue's MultiKueue setup: an AdmissionCheck with controllerName kueue.x-k8s.io/multikueue
pointing at a MultiKueueConfig that lists one MultiKueueCluster per worker, each reading its kubeconfig from a
Secret in the manager's namespace. The config and check come from ``e2e.queues.multikueue_check_objects``.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.rig.cluster import RigError
from e2e.rig.ports import free_port
from e2e.rig.processes import ProcessRecord, start_process

if TYPE_CHECKING:
    from e2e.rig.federation import Federation

KFED_NAMESPACE = "kfed-system"
KUBECONFIG_DIR = "multikueue-kubeconfigs"
"""Under the rig's directory: kfed-manager's --multikueue-kubeconfig-dir (its /etc/multikueue/kubeconfigs)."""
ADMISSION_CHECK = "kfed-multikueue"
MULTIKUEUE_CONFIG = "kfed"


def multikueue_objects(workers: list[str], kubeconfigs: dict[str, str]) -> list[dict[str, Any]]:
    """Namespace, Secrets, MultiKueueClusters, MultiKueueConfig and AdmissionCheck for the manager cluster."""
    from e2e.queues import multikueue_check_objects  # here, not at the top: e2e.queues imports ADMISSION_CHECK

    docs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KFED_NAMESPACE}}]
    for worker in workers:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{worker}-kubeconfig", "namespace": KFED_NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(kubeconfigs[worker].encode()).decode()},
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": worker},
                "spec": {
                    "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{worker}-kubeconfig"}}
                },
            }
        )
    docs += multikueue_check_objects(MULTIKUEUE_CONFIG, workers, check_name=ADMISSION_CHECK)
    return docs


def controller_script(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise RigError(f"{path} not found; install kfed into this environment (`make venv`)")
    return str(path)


def scratch_env(fed: Federation, process: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (or this process's environment) with TMPDIR in the rig's directory, one per kfed process: what a
    process leaves there is visible to tests and goes with the rig, even after a SIGKILL."""
    scratch = scratch_dir(fed, process)
    scratch.mkdir(parents=True, exist_ok=True)
    return {**(os.environ if env is None else env), "TMPDIR": str(scratch)}


def scratch_dir(fed: Federation, process: str) -> Path:
    return fed.directory / "tmp" / process


def start_controllers(fed: Federation) -> None:
    """Create the MultiKueue objects, start kfed-manager and the agents, and wait until all are ready.

    Each process is recorded in ``fed.controller_records`` the moment it starts, so a failure part-way (one that
    never became ready) still lets ``fed.down()`` stop everything that was started.
    """
    kubeconfigs = {w: fed.kubeconfig(w).read_text() for w in fed.workers}
    fed.kubectl(
        "manager",
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": multikueue_objects(fed.workers, kubeconfigs)}),
    )
    for worker in fed.workers:
        fed.kubectl(worker, "create", "namespace", KFED_NAMESPACE, check=False)
    launched: list[tuple[str, int, Any]] = []
    logs = fed.directory / "logs"
    common = _common_args()
    kubeconfig_dir = fed.directory / KUBECONFIG_DIR
    kubeconfig_dir.mkdir(parents=True, exist_ok=True)
    if fed.spec.kfed_manager:
        _start_manager(fed, launched, common, kubeconfig_dir)
    for worker in fed.workers:
        if fed.spec.agents is not None and worker not in fed.spec.agents:
            continue
        _start_agent(fed, worker, launched, common)
    for name, port, proc in launched:
        _wait_ready(name, port, proc, log=logs / f"{name}.log")
    if fed.spec.kfed_manager and fed.spec.agents is None:
        _wait_connected(fed, logs / "kfed-manager.log")


def start_manager(fed: Federation) -> None:
    """kfed-manager alone, on a rig started without it (``FederationSpec.kfed_manager=False``, e.g. where another
    MultiKueue manager ran first): its MultiKueue objects and Secrets applied, then the process, ready and connected
    to every worker."""
    kubeconfigs = {w: fed.kubeconfig(w).read_text() for w in fed.workers}
    objects = multikueue_objects(fed.workers, kubeconfigs)
    fed.kubectl("manager", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    kubeconfig_dir = fed.directory / KUBECONFIG_DIR
    kubeconfig_dir.mkdir(parents=True, exist_ok=True)
    launched: list[tuple[str, int, Any]] = []
    _start_manager(fed, launched, _common_args(), kubeconfig_dir)
    logs = fed.directory / "logs"
    for name, port, proc in launched:
        _wait_ready(name, port, proc, log=logs / f"{name}.log")
    _wait_connected(fed, logs / "kfed-manager.log")


def start_agent(fed: Federation, worker: str) -> None:
    """kfed-agent on ``worker``, a worker the rig started without one (``FederationSpec.agents``, e.g. one that ran
    stock Kueue first); returns once it is ready."""
    launched: list[tuple[str, int, Any]] = []
    fed.kubectl(worker, "create", "namespace", KFED_NAMESPACE, check=False)
    _start_agent(fed, worker, launched, _common_args())
    for name, port, proc in launched:
        _wait_ready(name, port, proc, log=fed.directory / "logs" / f"{name}.log")


def _start_agent(fed: Federation, worker: str, launched: list[tuple[str, int, Any]], common: list[str]) -> None:
    port = free_port()
    proc, record = start_process(
        f"kfed-agent-{worker}",
        [
            controller_script("kfed-agent"),
            "--kubeconfig",
            str(fed.kubeconfig(worker)),
            "--cluster-name",
            worker,
            "--health-port",
            str(port),
            *common,
            *fed.spec.agent_args,
        ],
        log_path=fed.directory / "logs" / f"kfed-agent-{worker}.log",
        die_with_parent=fed.die_with_parent,
        env=scratch_env(fed, f"kfed-agent-{worker}"),
    )
    launched.append((f"kfed-agent-{worker}", port, proc))
    fed.controller_records.append(record)


def _common_args() -> list[str]:
    return [
        "--log-format",
        "json",
        "--namespace",
        KFED_NAMESPACE,
        "--bind-address",
        "127.0.0.1",
        "--metrics-port",
        "-1",
    ]


def _start_manager(
    fed: Federation, launched: list[tuple[str, int, Any]], common: list[str], kubeconfig_dir: Path
) -> None:
    logs = fed.directory / "logs"
    port = free_port()
    proc, record = start_process(
        "kfed-manager",
        [
            controller_script("kfed-manager"),
            "--kubeconfig",
            str(fed.kubeconfig("manager")),
            "--health-port",
            str(port),
            "--gc-interval",
            "10",
            *(["--dispatch-timeout", str(fed.spec.dispatch_timeout)] if fed.spec.dispatch_timeout else []),
            *(["--worker-lost-timeout", str(fed.spec.worker_lost_timeout)] if fed.spec.worker_lost_timeout else []),
            *fed.spec.manager_args,
            "--multikueue-kubeconfig-dir",
            str(kubeconfig_dir),
            *common,
        ],
        log_path=logs / "kfed-manager.log",
        die_with_parent=fed.die_with_parent,
        env=scratch_env(fed, "kfed-manager"),
    )
    launched.append(("kfed-manager", port, proc))
    fed.controller_records.append(record)


@dataclass(frozen=True)
class Launch:
    """How a kfed process of the rig was started, to start it again or a second replica of it."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    health_port: int


def start_controllers_from_charts(fed: Federation) -> None:
    """kfed as the charts installed it (see e2e/rig/from_charts.py): the MultiKueueConfig and AdmissionCheck an
    operator writes, each worker joined with `kubectl kfed add-worker`, then every release's Deployment run as a
    local process with its ServiceAccount's token; returns once all are ready and every worker is connected."""
    from e2e.rig import from_charts

    for worker in fed.workers:  # the MultiKueueConfig is made by the first add-worker
        from_charts.add_worker(fed, worker, multikueue_config=MULTIKUEUE_CONFIG)
    objects = [o for o in multikueue_objects([], {}) if o["kind"] == "AdmissionCheck"]
    fed.kubectl("manager", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    logs = fed.directory / "logs"
    (fed.directory / KUBECONFIG_DIR).mkdir(parents=True, exist_ok=True)
    launched: list[tuple[str, int, Any]] = []
    for release in fed.releases:
        container = from_charts.rendered_container(fed, release)
        kubeconfig = from_charts.token_kubeconfig(fed, release.cluster, container["serviceAccountName"])
        argv, env = from_charts.process_argv(container, kubeconfig)
        env = scratch_env(fed, release.process, env)
        proc, record = start_process(
            release.process,
            argv,
            log_path=logs / f"{release.process}.log",
            die_with_parent=fed.die_with_parent,
            env=env,
        )
        fed.controller_records.append(record)
        fed.credentials[release.process] = kubeconfig
        fed.launches[release.process] = Launch(argv, env, logs / f"{release.process}.log", release.health_port)
        launched.append((release.process, release.health_port, proc))
    for name, port, proc in launched:
        _wait_ready(name, port, proc, log=logs / f"{name}.log")
    _wait_connected(fed, logs / "kfed-manager.log")


def start_manager_replica(
    fed: Federation, name: str, log: Path, *, port: int | None = None, visibility_port: int | None = None
) -> ProcessRecord:
    """Another kfed-manager replica from charts: the first one's command, args, env and token, its own ports (pods
    have a network each, local processes share one); returns once it answers /readyz 200 (a standby does)."""
    launch = fed.launches["kfed-manager"]
    port = port or free_port()
    argv = [*launch.argv, f"--health-port={port}", f"--metrics-port={free_port()}"]
    ports = {"--dashboard-port": free_port(), "--visibility-port": visibility_port or free_port()}
    for flag, free in ports.items():
        if any(arg.startswith(flag) for arg in launch.argv):
            argv.append(f"{flag}={free}")  # the first replica's is taken
    env = scratch_env(fed, name, launch.env)  # its own TMPDIR
    proc, record = start_process(name, argv, log_path=log, die_with_parent=fed.die_with_parent, env=env)
    _wait_ready(name, port, proc, log=log)
    return record


def lease_holder(fed: Federation, lease: str = "kfed-manager") -> str:
    """The Lease's holderIdentity (``host_pid`` for kfed), "" when none."""
    result = fed.kubectl("manager", "-n", KFED_NAMESPACE, "get", "lease", lease, "-o", "json", check=False)
    return str(json.loads(result.stdout)["spec"].get("holderIdentity") or "") if result.returncode == 0 else ""


def _wait_connected(fed: Federation, log: Path, *, timeout: float = 60) -> None:
    """Return once the manager reports every worker's MultiKueueCluster Active (so `up` means usable)."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = fed.kubectl("manager", "get", "multikueueclusters.kueue.x-k8s.io", "-o", "json").stdout
        states = {
            item["metadata"]["name"]: next(
                (c["status"] for c in (item.get("status") or {}).get("conditions") or () if c["type"] == "Active"), "?"
            )
            for item in json.loads(out)["items"]
        }
        if all(states.get(worker) == "True" for worker in fed.workers):
            return
        time.sleep(0.2)
    raise RigError(f"workers not connected after {timeout:.0f}s: {states}; see {log}:\n" + _tail(log))


def _wait_ready(name: str, port: int, proc: Any, *, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RigError(f"{name} exited with {proc.returncode}; see {log}:\n" + _tail(log))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as err:
            last = err.read().decode(errors="replace")
        except (urllib.error.URLError, OSError) as err:
            last = str(err)
        time.sleep(0.2)
    raise RigError(f"{name} not ready after {timeout:.0f}s ({last.strip()}); see {log}:\n" + _tail(log))


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
