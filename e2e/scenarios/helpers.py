"""Reading a federation's state for scenario tests: Jobs, Workloads and remote copies, as JSON."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from e2e.queues import LOCAL_QUEUE, job_manifest, named_queue_objects
from e2e.rig.audit import created_names
from e2e.rig.federation import MANAGER, Federation
from e2e.waiting import wait_for

Obj = dict[str, Any]

DISPATCH_TIMEOUT = 20.0
"""kfed-manager's dispatch timeout in the shared federation (short, so the timeout scenario runs quickly)."""
WORKER_LOST_TIMEOUT = 15.0
"""kfed-manager's worker-lost timeout in the shared federation (Kueue's default is 15 min)."""
PODS_READY_TIMEOUT = 30.0
"""kfed-manager's waitForPodsReady timeout in the shared federation (Kueue's default is 5 min; off by default)."""
REQUEUE_BACKOFF_BASE = 4.0
REQUEUE_BACKOFF_LIMIT = 1
MANAGER_ARGS = (
    "--wait-for-pods-ready-timeout",
    str(PODS_READY_TIMEOUT),
    "--requeuing-backoff-base-seconds",
    str(REQUEUE_BACKOFF_BASE),
    "--requeuing-backoff-limit-count",
    str(REQUEUE_BACKOFF_LIMIT),
)
"""The shared federation's kfed-manager runs with Kueue's waitForPodsReady on, so every scenario also shows that
healthy Jobs are never evicted by it."""


def get(fed: Federation, cluster: str, kind: str, name: str, namespace: str = "default") -> Obj | None:
    result = fed.kubectl(cluster, "get", kind, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def items(fed: Federation, cluster: str, kind: str, *selector: str, namespace: str = "default") -> list[Obj]:
    out = fed.kubectl(cluster, "get", kind, "-n", namespace, *selector, "-o", "json").stdout
    return list(json.loads(out)["items"])


def submit(
    fed: Federation, name: str, *, cpu: str, parallelism: int = 1, seconds: float = 3, queue: str = LOCAL_QUEUE
) -> None:
    manifest = job_manifest(name, namespace="default", cpu=cpu, parallelism=parallelism, seconds=seconds, queue=queue)
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))


def wait_complete(fed: Federation, name: str, timeout: float = 90) -> Obj:
    """Wait until the manager Job ``name`` is finished and assert it completed; returns the Job."""
    job = wait_for(
        lambda: get(fed, MANAGER, "job", name),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=timeout,
        what=f"Job {name} to finish on the manager",
    )
    assert job is not None
    assert is_true(job, "Complete"), job.get("status")
    return job


def workload_of(fed: Federation, job: str) -> Obj | None:
    for wl in items(fed, MANAGER, "workloads.kueue.x-k8s.io"):
        if any(ref.get("name") == job for ref in wl["metadata"].get("ownerReferences") or ()):
            return wl
    return None


def condition(obj: Obj | None, kind: str) -> Obj | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == kind:
            return dict(cond)
    return None


def is_true(obj: Obj | None, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found["status"] == "True"


def wait_pending(fed: Federation, job: str, timeout: float = 60) -> Obj:
    """Wait until the scheduler has looked at Job ``job``'s Workload (it has a ``QuotaReserved`` condition) and
    assert it holds no quota; returns the Workload."""
    workload = wait_for(
        lambda: workload_of(fed, job),
        until=lambda wl: wl is not None and condition(wl, "QuotaReserved") is not None,
        timeout=timeout,
        what=f"{job}'s Workload to be found pending",
    )
    assert workload is not None
    assert not is_true(workload, "QuotaReserved"), workload.get("status")
    return workload


def running_on(fed: Federation, job: str) -> str:
    """Wait until ``job`` runs on a worker (admitted there, its pods mirrored as active); return the worker."""
    wait_for(
        lambda: get(fed, MANAGER, "job", job),
        until=lambda j: int(((j or {}).get("status") or {}).get("active", 0)) > 0,
        timeout=60,
        what=f"{job} running",
    )
    worker = worker_of(fed, job)
    assert worker in fed.workers
    return str(worker)


def worker_of(fed: Federation, job: str) -> str | None:
    wl = workload_of(fed, job)
    return ((wl or {}).get("status") or {}).get("clusterName")


def remote_copies(fed: Federation, job: str, *, live_only: bool = False) -> dict[str, list[str]]:
    """Per worker, which of the Job's copies exist there ("job", "workload"); with ``live_only``, copies already
    being deleted (``deletionTimestamp`` set) are left out."""
    found: dict[str, list[str]] = {}
    wl = workload_of(fed, job)
    for worker in fed.workers:
        copies = [("job", get(fed, worker, "job", job))]
        if wl is not None:
            copies.append(("workload", get(fed, worker, "workloads.kueue.x-k8s.io", wl["metadata"]["name"])))
        kinds = [
            kind
            for kind, obj in copies
            if obj is not None and not (live_only and obj["metadata"].get("deletionTimestamp"))
        ]
        if kinds:
            found[worker] = kinds
    return found


def created_names_on_workers(fed: Federation, job: str) -> list[str]:
    """Every successful create of the Job ``job`` on any worker by kfed-manager (its copies), per the audit logs."""
    return [
        f"{worker}:{name}"
        for worker in fed.workers
        for name in created_names(fed.clusters[worker].audit_log, resource="jobs", client="kfed-manager")
        if name == f"default/{job}"
    ]


def visibility_port(fed: Federation) -> int:
    """The shared federation's kfed-manager visibility port (its chart value)."""
    return int(next(r for r in fed.releases if r.cluster == MANAGER).values["visibility.port"])


class _LocalHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 whose certificate is checked for the host name given (the aggregator dials the Service,
    which the rig points at the local process, and checks ``<service>.<namespace>.svc``)."""

    def __init__(self, host: str, port: int, *, context: ssl.SSLContext, timeout: float) -> None:
        super().__init__(host, port, context=context, timeout=timeout)
        self._verifying = context

    def connect(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        self.sock = self._verifying.wrap_socket(sock, server_hostname=self.host)


def visibility_connection(
    fed: Federation,
    *,
    port: int | None = None,
    cert: str | None = None,
    timeout: float = 10,
    ca: bytes | None = None,
    server_name: str | None = None,
) -> http.client.HTTPSConnection:
    """An HTTPS connection to a kfed-manager's visibility port (see :func:`visibility_get`), not yet opened."""
    if port is None:
        port = visibility_port(fed)
    context = ssl.create_default_context(cadata=ca.decode()) if ca is not None else ssl.create_default_context()
    if ca is None:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        pki = Path(fed.clusters[MANAGER].directory) / "pki"
        context.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
    if server_name is None:
        return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    return _LocalHTTPSConnection(server_name, port, context=context, timeout=timeout)


def visibility_get(
    fed: Federation,
    path: str,
    *,
    port: int | None = None,
    cert: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10,
    ca: bytes | None = None,
    server_name: str | None = None,
) -> tuple[int, Any]:
    """GET from a kfed-manager's visibility port straight (the shared federation's, unless ``port``), as the
    apiserver's aggregator would but with a chosen client certificate from the manager cluster's rig PKI
    (``front-proxy-client`` or ``admin``); returns the status and the JSON body. With ``ca`` the server's
    certificate is verified against it for ``server_name``, as the aggregator does with the APIService's caBundle;
    without, it is not checked."""
    conn = visibility_connection(fed, port=port, cert=cert, timeout=timeout, ca=ca, server_name=server_name)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


@contextmanager
def pending_jobs(fed: Federation, queue: str, jobs: Sequence[str], *, viewer: str) -> Iterator[None]:
    """A ClusterQueue and LocalQueue ``queue`` with no quota on the manager, so its Jobs stay pending; ``jobs``
    created in that order in it; the user ``viewer`` bound to the built-in view role in ``default``. All of it is
    deleted again on the way out."""
    objects = named_queue_objects(queue, cpu="0", manager=True)
    fed.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    fed.kubectl(MANAGER, "create", "rolebinding", viewer, "--clusterrole=view", f"--user={viewer}", "-n", "default")
    try:
        for name in jobs:
            manifest = job_manifest(name, namespace="default", cpu="1", seconds=2, queue=queue)
            fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
        for name in jobs:
            wait_pending(fed, name)
        yield
    finally:
        fed.kubectl(MANAGER, "delete", "job", *jobs, "-n", "default", "--ignore-not-found")
        wait_for(  # their Workloads go with them (garbage collector), before a later test reuses the names
            lambda: [name for name in jobs if workload_of(fed, name) is not None],
            until=lambda left: not left,
            timeout=60,
            what=f"the Workloads of {', '.join(jobs)} to be deleted with their Jobs",
        )
        fed.kubectl(MANAGER, "delete", "rolebinding", viewer, "-n", "default", "--ignore-not-found")
        fed.kubectl(MANAGER, "delete", "localqueue", queue, "-n", "default", "--ignore-not-found")
        fed.kubectl(MANAGER, "delete", "clusterqueue", queue, "--ignore-not-found", "--wait=false")
