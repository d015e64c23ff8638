"""Kueue's visibility API, served by kfed-manager through the manager cluster's apiserver, as Kueue serves it.

A user who ran ``kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/...`` (or kueuectl, or KueueViz)
against Kueue gets the same answer from kfed: the chart registers the APIService, the apiserver's aggregator proxies
to kfed-manager with its front-proxy certificate, and kfed-manager asks the apiserver (SubjectAccessReview) whether
the user may read. Users are impersonated with ``kubectl --as``, so the apiserver names them to kfed exactly as it
would name a real user. Only the chart's RBAC is in play: kfed-manager runs with its ServiceAccount's token.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    condition,
    get,
    pending_jobs,
    visibility_connection,
    visibility_get,
    visibility_port,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "visibility"
BASE = "/apis/visibility.kueue.x-k8s.io/v1beta2"
APISERVICE = "v1beta2.visibility.kueue.x-k8s.io"
VIEWER = "visibility-viewer"
JOBS = ("vis-a", "vis-b", "vis-c")


def _raw(fed: Federation, path: str, *, user: str | None = None) -> tuple[int, Any]:
    """(0, body) on success, else (1, kubectl's error text)."""
    args = ["get", "--raw", path, *([f"--as={user}"] if user else [])]
    result = fed.kubectl(MANAGER, *args, check=False)
    if result.returncode != 0:
        return 1, result.stderr
    return 0, json.loads(result.stdout)


def _rows(summary: Any) -> list[tuple[str, int, int, str]]:
    """(the Job owning the workload, position in the ClusterQueue, in the LocalQueue, LocalQueue) per item."""
    return [
        (
            i["metadata"]["ownerReferences"][0]["name"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
            i["localQueueName"],
        )
        for i in summary["items"]
    ]


@pytest.fixture
def pending_queue(federation: Federation) -> Iterator[None]:
    with pending_jobs(federation, QUEUE, JOBS, viewer=VIEWER):
        yield


def test_pending_workloads_are_served_through_the_apiserver_with_kueues_positions(
    federation: Federation, pending_queue: Any
) -> None:
    available = wait_for(
        lambda: condition(get(federation, MANAGER, "apiservice", APISERVICE), "Available"),
        until=lambda c: c is not None and c["status"] == "True",
        timeout=60,
        what=f"APIService {APISERVICE} to be Available",
    )
    assert available is not None
    code, resources = _raw(federation, BASE)
    assert code == 0, resources
    assert {r["name"] for r in resources["resources"]} >= {
        "clusterqueues/pendingworkloads",
        "localqueues/pendingworkloads",
    }

    expected = [("vis-a", 0, 0, QUEUE), ("vis-b", 1, 1, QUEUE), ("vis-c", 2, 2, QUEUE)]
    cq_path = f"{BASE}/clusterqueues/{QUEUE}/pendingworkloads"
    code, summary = wait_for(
        lambda: _raw(federation, cq_path),
        until=lambda answer: answer[0] == 0 and len(answer[1]["items"]) == len(JOBS),
        timeout=30,
        what="the ClusterQueue's three pending workloads in the visibility API",
    )
    assert summary["kind"] == "PendingWorkloadsSummary"
    assert _rows(summary) == expected
    assert all(i["metadata"]["name"].startswith("job-vis-") for i in summary["items"])
    assert all(i["metadata"]["namespace"] == "default" for i in summary["items"])

    lq_path = f"{BASE}/namespaces/default/localqueues/{QUEUE}/pendingworkloads"
    code, window = _raw(federation, f"{lq_path}?offset=1&limit=1")
    assert code == 0, window
    assert _rows(window) == [("vis-b", 1, 1, QUEUE)]

    # The built-in view role, bound in the namespace, covers the LocalQueue (the chart aggregates it), not the
    # ClusterQueue nor another namespace. The apiserver refuses with its own 403 before proxying; what it does
    # proxy, kfed-manager authorizes again (the next test calls it directly).
    code, mine = _raw(federation, lq_path, user=VIEWER)
    assert code == 0, mine
    assert _rows(mine) == expected
    code, error = _raw(federation, cq_path, user=VIEWER)
    assert code == 1
    assert "forbidden" in error.lower(), error
    assert f'User "{VIEWER}" cannot get resource "clusterqueues/pendingworkloads"' in error, error
    code, error = _raw(federation, f"{BASE}/namespaces/kube-system/localqueues/{QUEUE}/pendingworkloads", user=VIEWER)
    assert code == 1
    assert "forbidden" in error.lower(), error

    code, error = _raw(federation, f"{BASE}/clusterqueues/no-such-queue/pendingworkloads")
    assert code == 1
    assert "not found" in error.lower(), error


def test_kfed_manager_answers_only_the_front_proxy_and_authorizes_each_user(
    federation: Federation, pending_queue: Any
) -> None:
    path = f"{BASE}/namespaces/default/localqueues/{QUEUE}/pendingworkloads"
    code, body = visibility_get(federation, path)
    assert code == 401, body
    assert body["reason"] == "Unauthorized"
    assert "client certificate" in body["message"]
    with pytest.raises((ssl.SSLError, ConnectionError)):  # signed by the cluster CA, not the front proxy's
        visibility_get(federation, path, cert="admin", headers={"X-Remote-User": "kfed-rig-admin"})
    code, body = visibility_get(federation, path, cert="front-proxy-client")
    assert code == 401, body
    assert body["message"] == "the front proxy named no user"
    code, body = visibility_get(federation, path, cert="front-proxy-client", headers={"X-Remote-User": "nobody"})
    assert code == 403, body
    assert 'User "nobody" cannot get resource "localqueues/pendingworkloads"' in body["message"]
    code, body = visibility_get(
        federation, path, cert="front-proxy-client", headers={"X-Remote-User": VIEWER, "X-Remote-Group": "x"}
    )
    assert code == 200, body
    assert [row[0] for row in _rows(body)] == list(JOBS)


def test_the_apiserver_verifies_kfed_managers_certificate_with_the_charts_ca(federation: Federation) -> None:
    """The APIService carries the CA the chart made (no insecureSkipTLSVerify), and kfed-manager, reading the
    chart's Secret through --visibility-cert-dir, presents a certificate that CA signed for the name the aggregator
    checks, ``<service>.<namespace>.svc``; for any other name the handshake fails. (The APIService turning Available
    and every request through the apiserver above are the aggregator making the same check.)"""
    api_service = get(federation, MANAGER, "apiservice", APISERVICE)
    assert api_service is not None
    spec = api_service["spec"]
    assert not spec.get("insecureSkipTLSVerify"), spec
    ca = base64.b64decode(spec["caBundle"])
    service = f"{spec['service']['name']}.{spec['service']['namespace']}.svc"
    code, body = visibility_get(federation, BASE, cert="front-proxy-client", ca=ca, server_name=service)
    assert code == 200, body
    with pytest.raises(ssl.SSLCertVerificationError):
        visibility_get(federation, BASE, cert="front-proxy-client", ca=ca, server_name="elsewhere.example")


def test_a_stalled_connection_does_not_hold_up_other_requests(federation: Federation) -> None:
    """Each connection is served on its own: clients that connect and never send (the server gives them 10 s to
    finish a handshake) do not delay a request made meanwhile, which gets its answer within 5 s."""
    port = visibility_port(federation)
    stalled = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
    try:
        code, body = visibility_get(federation, BASE, cert="front-proxy-client", timeout=5)
        assert code == 200, body
        assert body["kind"] == "APIResourceList"
    finally:
        for sock in stalled:
            sock.close()


def test_a_connection_serves_one_request_after_another_until_the_client_closes_it(federation: Federation) -> None:
    """HTTP/1.1 keep-alive, as the aggregator uses it: the second and third requests come over the first one's
    connection (no new TLS handshake); a request saying ``Connection: close`` is answered and its connection
    closed by the server."""
    conn = visibility_connection(federation, cert="front-proxy-client")
    try:
        sockets = []
        for _ in range(3):
            conn.request("GET", BASE)
            response = conn.getresponse()
            assert response.status == 200
            assert json.loads(response.read())["kind"] == "APIResourceList"
            assert response.getheader("Connection") is None, response.getheaders()
            sockets.append(conn.sock)
        assert sockets[0] is not None
        assert all(sock is sockets[0] for sock in sockets), "each request came over a new connection"
    finally:
        conn.close()
    closing = visibility_connection(federation, cert="front-proxy-client", timeout=5)
    closing.connect()  # the raw TLS socket: read until the server closes it (a timeout if it never does)
    try:
        sock = closing.sock
        assert sock is not None
        sock.sendall(f"GET {BASE} HTTP/1.1\r\nHost: kfed\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        head = received.split(b"\r\n\r\n", 1)[0].decode()
        assert head.startswith("HTTP/1.1 200 "), head
        assert "Connection: close" in head.split("\r\n"), head
    finally:
        closing.close()
