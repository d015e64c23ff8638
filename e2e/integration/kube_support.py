"""Helpers the real-apiserver tests of ``federation.kube`` share: kubectl from async code, and a client."""

from __future__ import annotations

import anyio.to_thread

from e2e.rig.federation import Federation
from federation.kube.api import KubeApi, RetryPolicy
from federation.kube.clients import ClientOptions, connect_kubeconfig_text

WORKER = "worker-1"
MANAGER = "manager"


async def kubectl(rig: Federation, cluster: str, *args: str, stdin: str | None = None) -> str:
    def run() -> str:
        return rig.kubectl(cluster, *args, input=stdin).stdout

    return await anyio.to_thread.run_sync(run)


async def connect(rig: Federation, cluster: str, *, retry: RetryPolicy | None = None) -> KubeApi:
    """A validated client from the rig's kubeconfig: its inline CA and client certificate are exactly what a worker
    Secret must hold, so this also shows the validator accepts a real, well-formed kubeconfig."""
    text = rig.kubeconfig(cluster).read_text()
    options = ClientOptions(request_timeout=15.0, retry=retry or RetryPolicy())
    return await connect_kubeconfig_text(text, cluster=cluster, options=options)
