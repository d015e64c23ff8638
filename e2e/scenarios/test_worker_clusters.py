"""MultiKueueClusters with unusable kubeconfigs are inactive with a reason that says why (SCENARIOS F6, first part).

These clusters are not in the MultiKueueConfig the sample queues use, so the rest of the federation keeps working
while they are broken; fixing the Secret brings the cluster back. Reasons are Kueue's: ``InsecureKubeConfig`` for
a refused form, ``BadKubeConfig`` for a missing or malformed one or a Path kfed must not read.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import time
from typing import Any

import pytest
import yaml

from e2e.queues import named_queue_objects, routed_queue_objects, worker_quota
from e2e.rig.controllers import KFED_NAMESPACE, KUBECONFIG_DIR
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.ports import free_port
from e2e.scenarios.helpers import (
    condition,
    created_names_on_workers,
    get,
    items,
    running_on,
    submit,
    wait_complete,
    worker_of,
    workload_of,
)
from e2e.waiting import wait_for
from federation.quantity import parse_quantity

pytestmark = pytest.mark.e2e


def _apply_cluster(fed: Federation, name: str, kubeconfig: str | None, *, path: str | None = None) -> None:
    docs: list[dict[str, object]] = []
    if kubeconfig is not None:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{name}-kubeconfig", "namespace": KFED_NAMESPACE},
                "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
            }
        )
    docs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterSource": {
                    "kubeConfig": {"locationType": "Path", "location": path}
                    if path is not None
                    else {"locationType": "Secret", "location": f"{name}-kubeconfig"}
                }
            },
        }
    )
    fed.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))


def _active(fed: Federation, name: str) -> dict[str, object] | None:
    return condition(get(fed, MANAGER, "multikueuecluster", name, namespace=KFED_NAMESPACE), "Active")


def _wait_active(fed: Federation, name: str, *, status: str, says: str) -> None:
    wait_for(
        lambda: _active(fed, name),
        until=lambda c: c is not None and c["status"] == status and says in str(c["message"]),
        timeout=30,
        what=f"{name} Active={status} saying {says!r}",
    )


def _tampered(fed: Federation, change: str) -> str:
    config = yaml.safe_load(fed.kubeconfig("worker-1").read_text())
    user = config["users"][0]["user"]
    cluster = config["clusters"][0]["cluster"]
    if change == "exec":
        user.clear()
        user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/steal-credentials"}
    elif change == "token-file":
        user.clear()
        user["tokenFile"] = "/var/run/secrets/token"
    elif change == "insecure":
        cluster.pop("certificate-authority-data")
        cluster["insecure-skip-tls-verify"] = True
    elif change == "basic-auth":
        user.clear()
        user["username"] = "admin"
        user["password"] = "admin"
    return str(yaml.safe_dump(config))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("exec", "exec"),
        ("token-file", "tokenFile"),
        ("insecure", "insecure-skip-tls-verify"),
        ("basic-auth", "basic auth"),
    ],
)
def test_an_unsafe_kubeconfig_makes_the_cluster_inactive_with_the_reason(
    federation: Federation, change: str, says: str
) -> None:
    name = f"bad-{change}"
    _apply_cluster(federation, name, _tampered(federation, change))
    _wait_active(federation, name, status="False", says=says)
    active = _active(federation, name)
    assert active is not None
    assert active["reason"] == "InsecureKubeConfig"
    federation.kubectl(MANAGER, "delete", "multikueuecluster", name, "--wait=false")


def test_a_server_url_no_client_can_use_is_refused_and_keeps_no_other_worker_from_connecting(
    federation: Federation,
) -> None:
    """A kubeconfig whose server is no URL (a broken IPv6 address here) is ``BadKubeConfig`` with what is wrong, like
    any malformed one. kfed-manager reads every MultiKueueCluster's server when it starts, to tell which of several
    naming one API server it uses: that one bad Secret must not keep the other workers from connecting then (it
    did: their reconcile failed on it, over and over, with no word in any status)."""
    config = yaml.safe_load(federation.kubeconfig("worker-1").read_text())
    config["clusters"][0]["cluster"]["server"] = "https://[::1"
    _apply_cluster(federation, "bad-url", str(yaml.safe_dump(config)))
    try:
        _wait_active(federation, "bad-url", status="False", says="is not a valid URL: Invalid IPv6 URL")
        active = _active(federation, "bad-url")
        assert active is not None
        assert active["reason"] == "BadKubeConfig"
        with federation.stopped_controller("kfed-manager"):
            pass
        submit(federation, "after-bad-url", cpu="1", seconds=1)
        wait_complete(federation, "after-bad-url", timeout=120)
        _wait_active(federation, "bad-url", status="False", says="is not a valid URL")
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "bad-url", "--wait=false")


def test_a_path_kubeconfig_is_read_only_from_inside_the_configured_directory(federation: Federation) -> None:
    directory = federation.directory / KUBECONFIG_DIR
    # a usable kubeconfig, but outside the directory; of a server no other MultiKueueCluster names (a second name for
    # worker-1 would be refused: DuplicateServer)
    valid = federation.kubeconfig(MANAGER)
    (directory / "worker-1.yaml").write_text(valid.read_text())
    escape = directory / "escape.yaml"
    escape.unlink(missing_ok=True)
    escape.symlink_to(valid)
    refused = {
        "path-outside": (str(valid), "is outside"),
        "path-dotdot": (f"{directory}/../{KUBECONFIG_DIR}/worker-1.yaml", "contains '..'"),
        "path-passwd": (f"{directory}/../../../../../../etc/passwd", "contains '..'"),
        "path-symlink": (str(escape), "resolves to"),
    }
    for name, (path, _says) in refused.items():
        _apply_cluster(federation, name, None, path=path)
    _apply_cluster(federation, "path-inside", None, path=str(directory / "worker-1.yaml"))
    try:
        for name, (_path, says) in refused.items():
            _wait_active(federation, name, status="False", says=says)
            active = _active(federation, name)
            assert active is not None
            assert active["reason"] == "BadKubeConfig"
            assert str(directory) in str(active["message"])
        _wait_active(federation, "path-inside", status="True", says="Connected")
    finally:
        for name in [*refused, "path-inside"]:
            federation.kubectl(MANAGER, "delete", "multikueuecluster", name, "--wait=false", check=False)


def test_an_unreachable_worker_is_retried_with_a_backoff_our_own_status_writes_do_not_advance(
    federation: Federation,
) -> None:
    config = yaml.safe_load(federation.kubeconfig("worker-1").read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"  # nothing listens there
    delays: list[int] = []
    first_seen: dict[int, float] = {}

    def retry_delays() -> list[int]:
        message = str((_active(federation, "unreachable") or {}).get("message"))
        found = re.search(r"attempt (\d+) failed, next at \S+Z \(in (\d+)s\)", message)
        if found and (not delays or delays[-1] != int(found[2])):
            assert int(found[1]) == len(delays) + 1, f"attempts counted wrong: {message}"
            delays.append(int(found[2]))
            first_seen[int(found[2])] = time.monotonic()
        return delays

    _apply_cluster(federation, "unreachable", yaml.safe_dump(config))
    try:
        wait_for(retry_delays, until=lambda d: 20 in d, timeout=45, what="the third connection attempt (20s)")
        # Each failed attempt writes the condition; those writes must not count as attempts (Kueue: 5s, 10s, 20s...).
        assert delays == [5, 10, 20]
        assert first_seen[20] - first_seen[5] >= 14, first_seen
        active = _active(federation, "unreachable")
        assert active is not None
        assert (active["status"], active["reason"]) == ("False", "ClientConnectionFailed")
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "unreachable", "--wait=false", check=False)


def _no_rights_kubeconfig(fed: Federation, cluster: str) -> str:
    """A valid, secure kubeconfig whose user may not list anything kfed needs: the server answers, the watches fail.
    Of the manager's own apiserver, which no MultiKueueCluster names (a second name for worker-1 would be refused
    before any watch, DuplicateServer); ``cluster``'s refusals are expected, not a gap in the charts' RBAC."""
    fed.kubectl(MANAGER, "create", "serviceaccount", "kfed-no-rights", "-n", "default", check=False)
    token = fed.kubectl(MANAGER, "create", "token", "kfed-no-rights", "-n", "default").stdout.strip()
    config = yaml.safe_load(fed.kubeconfig(MANAGER).read_text())
    user = config["users"][0]["user"]
    user.clear()
    user["token"] = token
    fed.expected_forbidden.add(cluster)
    return str(yaml.safe_dump(config))


def test_a_worker_whose_watches_fail_is_inactive_with_the_reason(federation: Federation) -> None:
    _apply_cluster(federation, "no-rights", _no_rights_kubeconfig(federation, "no-rights"))
    try:
        _wait_active(federation, "no-rights", status="False", says="keeps failing")
        active = _active(federation, "no-rights")
        assert active is not None
        assert active["reason"] == "ClientConnectionFailed"
        assert "forbidden" in str(active["message"]).lower()
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "no-rights", "--wait=false", check=False)


def test_a_missing_secret_says_so_and_fixing_it_brings_the_cluster_back(federation: Federation) -> None:
    _apply_cluster(federation, "late", None)
    _wait_active(federation, "late", status="False", says=f"Secret {KFED_NAMESPACE}/late-kubeconfig not found")
    missing = _active(federation, "late")
    assert missing is not None
    assert missing["reason"] == "BadKubeConfig"
    # a server no other MultiKueueCluster names (a second name for worker-1 would be refused: DuplicateServer)
    _apply_cluster(federation, "late", federation.kubeconfig(MANAGER).read_text())
    _wait_active(federation, "late", status="True", says="Connected")
    federation.kubectl(MANAGER, "delete", "multikueuecluster", "late", "--wait=false")


def _reader_kubeconfig(fed: Federation, service_account: str) -> str:
    """A kubeconfig with the token of a new ServiceAccount of the manager cluster that may read what kfed watches on
    a worker (Workloads, Jobs, capacity reports): a server no MultiKueueCluster names yet."""
    rules = [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["kfed.io"], "resources": ["clustercapacities"], "verbs": ["get", "list", "watch"]},
    ]
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": service_account, "namespace": "default"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": service_account},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": service_account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": service_account},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": "default"}],
        },
    ]
    fed.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    token = fed.kubectl(MANAGER, "create", "token", service_account, "-n", "default").stdout.strip()
    config = yaml.safe_load(fed.kubeconfig(MANAGER).read_text())
    user = config["users"][0]["user"]
    user.clear()
    user["token"] = token
    return str(yaml.safe_dump(config))


def test_a_revoked_token_says_the_worker_refuses_the_credentials_and_a_new_one_brings_it_back(
    federation: Federation,
) -> None:
    """The worker's apiserver answers, with 401: the cluster is inactive with a message that says the credentials
    are refused (not that the worker does not answer), and a new token in the Secret brings it back."""
    federation.expected_forbidden.add("revoked")
    _apply_cluster(federation, "revoked", _reader_kubeconfig(federation, "kfed-revoked"))
    try:
        _wait_active(federation, "revoked", status="True", says="Connected")
        # Deleting the ServiceAccount revokes every token issued for it; the new one of the same name is another.
        federation.kubectl(MANAGER, "delete", "serviceaccount", "kfed-revoked", "-n", "default")
        _wait_active(federation, "revoked", status="False", says="refuses the kubeconfig's credentials: 401")
        active = _active(federation, "revoked")
        assert active is not None
        assert active["reason"] == "ClientConnectionFailed"
        assert "does not answer" not in str(active["message"]), active
        _apply_cluster(federation, "revoked", _reader_kubeconfig(federation, "kfed-revoked"))
        _wait_active(federation, "revoked", status="True", says="Connected")
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "revoked", "--wait=false", check=False)
        for kind in ("clusterrolebinding", "clusterrole"):
            federation.kubectl(MANAGER, "delete", kind, "kfed-revoked", "--ignore-not-found", check=False)
        federation.kubectl(
            MANAGER, "delete", "serviceaccount", "kfed-revoked", "-n", "default", "--ignore-not-found", check=False
        )
        federation.kubectl(
            MANAGER, "-n", KFED_NAMESPACE, "delete", "secret", "revoked-kubeconfig", "--ignore-not-found", check=False
        )


def test_kubectl_kfed_lists_the_workers_and_where_workloads_run(federation: Federation) -> None:
    import subprocess
    import sys
    from pathlib import Path

    plugin = str(Path(sys.executable).parent / "kubectl-kfed")
    config = str(federation.kubeconfig(MANAGER))
    workers = subprocess.run([plugin, "--kubeconfig", config, "workers"], capture_output=True, text=True, check=True)
    rows = {line.split()[0]: line.split()[1] for line in workers.stdout.splitlines()[1:]}
    assert rows["worker-1"] == "True"
    assert rows["worker-2"] == "True"
    workloads = subprocess.run(
        [plugin, "--kubeconfig", config, "workloads", "-A"], capture_output=True, text=True, check=True
    )
    assert workloads.stdout.splitlines()[0].split()[:5] == ["NAMESPACE", "NAME", "QUEUE", "STATE", "WORKER"]


def _secret_kubeconfig(fed: Federation, cluster: str) -> str:
    """The base64 kubeconfig of ``cluster``'s Secret (what kfed-manager connects with)."""
    secret = get(fed, MANAGER, "secret", f"{cluster}-kubeconfig", namespace=KFED_NAMESPACE)
    assert secret is not None
    return str(secret["data"]["kubeconfig"])


def _assert_refused_while_the_worker_runs_its_job_once(fed: Federation, refused: str, worker: str, job: str) -> None:
    """``refused`` reaches ``worker``'s server: it is inactive naming ``worker``, which goes on, and the Job it runs
    completes there, sent once and never taken back (its copy was never taken for a stray)."""
    _wait_active(fed, refused, status="False", says=f"MultiKueueCluster '{worker}' reaches")
    condition_of_refused = _active(fed, refused)
    assert condition_of_refused is not None
    assert condition_of_refused["reason"] == "DuplicateServer"
    used = _active(fed, worker)
    assert used is not None
    assert (used["status"], used["reason"]) == ("True", "Active")
    finished = wait_complete(fed, job, timeout=60)
    assert finished["status"]["succeeded"] == 1
    workload = workload_of(fed, job)
    assert workload is not None
    assert not (workload["status"].get("schedulingStats") or {}).get("evictions"), workload["status"]
    assert created_names_on_workers(fed, job) == [f"{worker}:default/{job}"]


@pytest.mark.parametrize("spelling", ["same", "localhost"])
def test_a_second_multikueuecluster_for_a_worker_is_refused_and_leaves_that_workers_copies_alone(
    federation: Federation, spelling: str
) -> None:
    """The kubeconfig of a worker pasted into another MultiKueueCluster: two names for one worker. Through the
    second, the copies the first holds looked like strays and were deleted, stopping the Jobs that ran there. Also
    when the second names the server another way (``localhost`` for ``127.0.0.1``): the copies seen through both
    tell that they reach one server (before, the running Job's copies were deleted and it ran again elsewhere)."""
    job = f"twin-{spelling}"
    submit(federation, job, cpu="1", seconds=12)
    worker = running_on(federation, job)
    kubeconfig = base64.b64decode(_secret_kubeconfig(federation, worker)).decode()
    if spelling == "localhost":
        assert "https://127.0.0.1:" in kubeconfig
        kubeconfig = kubeconfig.replace("https://127.0.0.1:", "https://localhost:")
    _apply_cluster(federation, "twin", kubeconfig)
    try:
        _assert_refused_while_the_worker_runs_its_job_once(federation, "twin", worker, job)
        # a kubeconfig naming another server makes it usable
        _apply_cluster(federation, "twin", federation.kubeconfig(MANAGER).read_text())
        _wait_active(federation, "twin", status="True", says="Connected")
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "twin", "--wait=false", check=False)


def test_a_kubeconfig_edited_to_reach_another_workers_server_is_refused_and_that_worker_goes_on(
    federation: Federation,
) -> None:
    submit(federation, "swap-running", cpu="1", seconds=12)
    worker = running_on(federation, "swap-running")
    other = next(name for name in federation.workers if name != worker)

    def set_kubeconfig(cluster: str, data: str) -> None:
        patch = json.dumps({"data": {"kubeconfig": data}})
        federation.kubectl(MANAGER, "-n", KFED_NAMESPACE, "patch", "secret", f"{cluster}-kubeconfig", "-p", patch)

    own = _secret_kubeconfig(federation, other)
    set_kubeconfig(other, _secret_kubeconfig(federation, worker))
    try:
        _assert_refused_while_the_worker_runs_its_job_once(federation, other, worker, "swap-running")
    finally:
        set_kubeconfig(other, own)
    _wait_active(federation, other, status="True", says="Connected")


def test_a_path_kubeconfig_that_changes_on_disk_reconnects_its_worker(federation: Federation) -> None:
    """A ``locationType: Path`` kubeconfig is usually a mounted Secret, which the kubelet rewrites in place (a rotated
    token): as in Kueue, which watches those files, the worker is reconnected with the new file, without waiting for
    the old connection to fail. (Here the new file's user may read nothing: a connection that kept the old file's
    credentials would stay Active.)"""
    path = federation.directory / KUBECONFIG_DIR / "path-rotated.yaml"

    def rewrite(text: str) -> None:  # the kubelet's way: the new content appears at once (a rename)
        path.with_suffix(".new").write_text(text)
        path.with_suffix(".new").rename(path)

    rewrite(federation.kubeconfig(MANAGER).read_text())
    _apply_cluster(federation, "path-rotated", None, path=str(path))
    try:
        # settled: the manager's apiserver has no capacity report, so its ClusterQueues are probed
        _wait_active(federation, "path-rotated", status="True", says="probed through the worker's ClusterQueue status")
        rewrite(_no_rights_kubeconfig(federation, "path-rotated"))
        _wait_active(federation, "path-rotated", status="False", says="keeps failing")
        rewrite(federation.kubeconfig(MANAGER).read_text())
        _wait_active(federation, "path-rotated", status="True", says="Connected")
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "path-rotated", "--wait=false", check=False)


def _write_report(federation: Federation, worker: str, status: dict[str, Any]) -> None:
    """Write ``worker``'s ClusterCapacity status as its agent would (the agent frozen, so it does not write over it)."""
    federation.kubectl(
        worker,
        "patch",
        "clustercapacities.kfed.io",
        "local",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def test_a_worker_whose_clock_is_behind_the_managers_is_not_taken_for_stale(federation: Federation) -> None:
    """A kfed-agent dates its report by its own clock. Here worker-1's clock is ten minutes behind the manager's: its
    report is written so by hand, its agent frozen. kfed-manager ages a report from when a new one arrives, by its
    own clock, so worker-1 is still weighed: a Job too big for either worker waits for its size on both. Before,
    worker-1 read as "capacity report is 600s old" and got no Job at all while the clocks disagreed."""
    report = get(federation, "worker-1", "clustercapacities.kfed.io", "local")
    assert report is not None
    status = report["status"]
    status["generation"] = int(status["generation"]) + 1
    behind = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    status["observedTime"] = behind.strftime("%Y-%m-%dT%H:%M:%SZ")
    with federation.paused_controller("kfed-agent-worker-1"):
        _write_report(federation, "worker-1", status)
        # more than either worker's quota, within the manager's (their sum)
        largest = max(int(parse_quantity(worker_quota(federation.spec.shape(w))[0])) for w in federation.workers)
        submit(federation, "clock-behind", cpu=str(largest // 1000 + 1))
        waiting = wait_for(
            lambda: workload_of(federation, "clock-behind"),
            until=lambda w: bool(
                re.search(
                    r"worker-1(, worker-2)?: insufficient cpu",
                    str((condition(w, "QuotaReserved") or {}).get("message")),
                )
            ),
            timeout=60,
            what="worker-1 weighed by its capacity, not taken for stale",
        )
        assert "capacity report is" not in str(condition(waiting, "QuotaReserved")), waiting
        federation.kubectl(MANAGER, "delete", "job", "clock-behind", "--wait=false")


def test_a_capacity_report_kfed_manager_cannot_read_is_not_used_and_says_so(federation: Federation) -> None:
    """worker-1's ClusterCapacity is overwritten (its agent frozen) with a quantity the schema lets through but no
    quantity arithmetic can hold (``1e400``), as a kfed-agent of another version might write. kfed-manager neither
    keeps dispatching by the report it had before nor goes silent: worker-1 gets nothing while its report cannot be
    read, its ``Active`` message, an Event and the Jobs that wait say why, and the agent's next report brings it
    back."""
    report = get(federation, "worker-1", "clustercapacities.kfed.io", "local")
    assert report is not None
    status = report["status"]
    status["clusterQueues"][0]["flavors"][0]["resources"][0]["free"] = "1e400"
    with federation.paused_controller("kfed-agent-worker-1"):
        _write_report(federation, "worker-1", status)
        _wait_active(federation, "worker-1", status="True", says="not used: its ClusterCapacity report cannot be read")
        events = [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "CapacityReportUnreadable"
        ]
        assert events, "a Warning Event on the MultiKueueCluster"
        assert "1e400" in str(events[0].get("note")), events[0]
        submit(federation, "unread-report", cpu="1", seconds=1)
        wait_complete(federation, "unread-report", timeout=60)
        assert worker_of(federation, "unread-report") in (None, "worker-2")
    # the agent publishes again (a change of its capacity, at the latest its periodic refresh): worker-1 is back
    wait_for(
        lambda: _active(federation, "worker-1"),
        until=lambda c: c is not None and c["status"] == "True" and "not used" not in str(c["message"]),
        timeout=45,
        what="worker-1's report read again once its agent publishes (heartbeat: 30 s)",
    )


SELF_QUEUE = "self-queue"


def test_a_multikueuecluster_reaching_the_manager_itself_is_inactive_from_its_first_copy_on(
    federation: Federation,
) -> None:
    """The manager cluster's own kubeconfig put into a MultiKueueCluster, first in a MultiKueueConfig that packs
    (BestFit), so the manager's own ClusterQueue, probed through it, looks the best fit: a copy there would take the
    name of the object it copies. The first Job sent there finds its own Job under its copy's name; from then on the
    cluster is inactive, reason ``ManagerCluster``, the Job runs on the worker, and later Jobs are never sent there.
    Before, every Job was sent there first and taken back."""
    worker = federation.workers[0]
    _apply_cluster(federation, "manager-itself", federation.kubeconfig(MANAGER).read_text())
    worker_objects = named_queue_objects(SELF_QUEUE, cpu="8", manager=False)
    manager_objects = routed_queue_objects(SELF_QUEUE, ["manager-itself", worker], cpu="4")
    manager_objects[0]["metadata"]["annotations"] = {"kfed.io/dispatch-policy": "BestFit"}
    for cluster, objects in ((worker, worker_objects), (MANAGER, manager_objects)):
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )
    jobs = ["self-first", "self-second", "self-third"]
    try:
        _wait_active(federation, "manager-itself", status="True", says="probed through the worker's ClusterQueue")
        submit(federation, jobs[0], cpu="1", seconds=1, queue=SELF_QUEUE)
        _wait_active(federation, "manager-itself", status="False", says="reaches the manager cluster itself")
        inactive = _active(federation, "manager-itself")
        assert inactive is not None
        assert inactive["reason"] == "ManagerCluster"
        assert f"Job default/{jobs[0]} there is the manager's own" in str(inactive["message"])
        wait_complete(federation, jobs[0])
        assert worker_of(federation, jobs[0]) == worker
        for name in jobs[1:]:
            submit(federation, name, cpu="1", seconds=1, queue=SELF_QUEUE)
        for name in jobs[1:]:
            wait_complete(federation, name)
            workload = workload_of(federation, name)
            assert workload is not None
            assert workload["status"]["clusterName"] == worker
            assert not (workload["status"].get("schedulingStats") or {}).get("evictions"), "never sent there"
    finally:
        for name in jobs:
            federation.kubectl(MANAGER, "delete", "job", name, "--wait=false", "--ignore-not-found", check=False)
        for obj in reversed(manager_objects):
            kind, name = obj["kind"].lower(), obj["metadata"]["name"]
            federation.kubectl(MANAGER, "delete", kind, name, "-n", "default", "--wait=false", "--ignore-not-found")
        for obj in reversed(worker_objects):
            kind, name = obj["kind"].lower(), obj["metadata"]["name"]
            federation.kubectl(worker, "delete", kind, name, "-n", "default", "--wait=false", "--ignore-not-found")
        federation.kubectl(MANAGER, "delete", "multikueuecluster", "manager-itself", "--wait=false", check=False)
        federation.kubectl(
            MANAGER, "-n", KFED_NAMESPACE, "delete", "secret", "manager-itself-kubeconfig", "--ignore-not-found"
        )


def test_a_renamed_multikueuecluster_leaves_the_copies_its_old_name_sent_running(federation: Federation) -> None:
    """A worker's MultiKueueCluster renamed (a new one with its spec, the old one deleted, the MultiKueueConfig
    edited): through the new name, the copies the old name sent were taken for strays and deleted at once, stopping
    the Job that ran there. Now they are left alone, since the old name was last connected to the same server: the
    workload waits for its worker as for one that cannot be used (``WorkerUnreachable``), and completes."""
    job = "renamed-running"
    submit(federation, job, cpu="1", seconds=20)
    worker = running_on(federation, job)
    renamed = f"{worker}-renamed"
    config = get(federation, MANAGER, "multikueueconfig", "kfed")
    original = get(federation, MANAGER, "multikueuecluster", worker)
    assert config is not None
    assert original is not None
    copy_before = get(federation, worker, "job", job)
    assert copy_before is not None

    def cluster(name: str) -> dict[str, Any]:
        return {
            "apiVersion": original["apiVersion"],
            "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": original["spec"],
        }

    clusters = list(config["spec"]["clusters"])
    renamed_list = [renamed if name == worker else name for name in clusters]
    try:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", worker)
        federation.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps(cluster(renamed)))
        patch = json.dumps({"spec": {"clusters": renamed_list}})
        federation.kubectl(MANAGER, "patch", "multikueueconfig", "kfed", "--type=merge", "-p", patch)
        _wait_active(federation, renamed, status="True", says="Connected")
        wait_for(
            lambda: [
                e
                for e in items(federation, MANAGER, "events.events.k8s.io")
                if e.get("reason") == "WorkerUnreachable"
                and (e.get("regarding") or {}).get("kind") == "Workload"
                and f"(no MultiKueueCluster {worker})" in str(e.get("note"))
            ],
            until=bool,
            timeout=30,
            what=f"the workload told it waits for {worker}",
        )
        copy_now = get(federation, worker, "job", job)
        assert copy_now is not None, "the copy its old name sent was deleted through the new name"
        assert copy_now["metadata"]["uid"] == copy_before["metadata"]["uid"]
        assert not copy_now["metadata"].get("deletionTimestamp")
        wait_complete(federation, job, timeout=120)
    finally:
        federation.kubectl(MANAGER, "delete", "multikueuecluster", renamed, "--ignore-not-found")
        federation.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps(cluster(worker)))
        patch = json.dumps({"spec": {"clusters": clusters}})
        federation.kubectl(MANAGER, "patch", "multikueueconfig", "kfed", "--type=merge", "-p", patch)
        _wait_active(federation, worker, status="True", says="Connected")
