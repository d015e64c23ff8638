"""federation.kube's KubeApi against a real kube-apiserver of the rig (no fake server anywhere).

CRUD and paging, the four patch types (merge, JSON, strategic merge, server-side apply with field managers and
conflicts), the status subresource of Kueue's Workload CRD, delete preconditions, typed errors built from the
apiserver's own answers (NotFound, AlreadyExists, Conflict, Invalid from OpenAPI and CEL rules, Forbidden,
Unauthorized, 429 from API Priority and Fairness, connection and TLS failures), events.k8s.io/v1 Events that
kubectl shows, and the call counter. Each test uses its own namespace; every wait has a deadline.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import anyio.to_thread
import pytest
import yaml

from e2e.integration.kube_support import MANAGER, WORKER, connect, kubectl
from e2e.rig.federation import Federation
from e2e.rig.ports import free_port
from federation.kube import resources as r
from federation.kube.api import FieldValidation, KubeApi, Obj, PatchType, Propagation, RetryPolicy
from federation.kube.clients import ClientOptions, ClusterClients, connect_kubeconfig_file, connect_kubeconfig_text
from federation.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    Unauthorized,
    Unavailable,
)

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

LABEL = "kfed.io/test"
FAST_RETRY = RetryPolicy(attempts=3, initial=0.05, maximum=0.1)


async def kubectl_json(rig: Federation, cluster: str, *args: str) -> Any:
    return json.loads(await kubectl(rig, cluster, *args, "-o", "json"))


async def eventually_ok(probe: Any, *, within: float, what: str) -> Any:
    """Await ``probe()`` until it stops raising; fail naming ``what`` and the last error after ``within`` s."""
    last: BaseException | None = None
    with anyio.move_on_after(within):
        while True:
            try:
                return await probe()
            except KubeError as exc:
                last = exc
            await anyio.sleep(0.2)
    raise AssertionError(f"timed out after {within}s waiting for {what}; last error: {last}")


def config_map(name: str, namespace: str, value: str = "1", **labels: str) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"v": value}}


def workload(name: str, namespace: str, **spec: Any) -> Obj:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": template}], **spec},
    }


def suspended_job(name: str, namespace: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "patches"}, "finalizers": ["kfed.io/a"]},
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def condition(type_: str, status: str, reason: str, message: str = "") -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }


def kubeconfig_with(rig: Federation, cluster: str, **changes: Any) -> str:
    """The rig's kubeconfig for ``cluster`` with the first cluster/user entries updated (server, CA, token...)."""
    config = yaml.safe_load(rig.kubeconfig(cluster).read_text())
    for key, value in changes.items():
        if key in ("server", "certificate-authority-data"):
            config["clusters"][0]["cluster"][key] = value
        else:
            config["users"][0]["user"] = value
    return yaml.safe_dump(config)


# -- CRUD, paging, preconditions, typed errors ---------------------------------------------------------------


async def test_create_get_list_replace_delete_with_paging_and_typed_errors(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        created = await api.create(r.CONFIG_MAPS, config_map("cm-0", namespace, group="even"))
        assert created["kind"] == "ConfigMap"
        assert created["metadata"]["uid"]
        for i in range(1, 7):
            await api.create(r.CONFIG_MAPS, config_map(f"cm-{i}", namespace, group="even" if i % 2 == 0 else "odd"))
        with pytest.raises(AlreadyExists) as exists:
            await api.create(r.CONFIG_MAPS, config_map("cm-0", namespace))
        assert exists.value.status == 409
        assert '"cm-0" already exists' in exists.value.message

        got = await api.get(r.CONFIG_MAPS, "cm-0", namespace=namespace)
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        assert got["data"] == {"v": "1"}

        api.counter.reset()
        listed = await api.list(r.CONFIG_MAPS, namespace=namespace, label_selector="group", page_size=3)
        assert [o["metadata"]["name"] for o in listed.items] == [f"cm-{i}" for i in range(7)]
        assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in listed.items)
        assert int(listed.resource_version) >= int(got["metadata"]["resourceVersion"])
        assert api.counter.snapshot() == {("list", "configmaps"): 3}  # 3 + 3 + 1 with limit=3 and continue
        odd = await api.list(r.CONFIG_MAPS, namespace=namespace, label_selector="group=odd")
        assert sorted(o["metadata"]["name"] for o in odd.items) == ["cm-1", "cm-3", "cm-5"]
        assert (await api.list(r.CONFIG_MAPS, namespace=f"{namespace}-absent")).items == []

        # Optimistic concurrency: a replace carrying an old resourceVersion is a Conflict.
        replaced = await api.replace(r.CONFIG_MAPS, {**got, "data": {"v": "2"}})
        assert replaced["data"] == {"v": "2"}
        assert replaced["metadata"]["resourceVersion"] != got["metadata"]["resourceVersion"]
        with pytest.raises(Conflict) as stale:
            await api.replace(r.CONFIG_MAPS, {**got, "data": {"v": "3"}})
        assert "the object has been modified" in stale.value.message
        assert (await api.get(r.CONFIG_MAPS, "cm-0", namespace=namespace))["data"] == {"v": "2"}

        with pytest.raises(NotFound) as missing:
            await api.get(r.CONFIG_MAPS, "absent", namespace=namespace)
        assert missing.value.status == 404
        assert missing.value.reason == "NotFound"
        assert await api.get_or_none(r.CONFIG_MAPS, "absent", namespace=namespace) is None

        # Delete preconditions: a uid or resourceVersion that no longer matches is a Conflict; nothing is deleted.
        with pytest.raises(Conflict, match="the UID in the precondition"):
            await api.delete(r.CONFIG_MAPS, "cm-0", namespace=namespace, uid=str(uuid.uuid4()))
        with pytest.raises(Conflict, match="the ResourceVersion in the precondition"):
            await api.delete(
                r.CONFIG_MAPS, "cm-0", namespace=namespace, resource_version=got["metadata"]["resourceVersion"]
            )
        assert await api.get_or_none(r.CONFIG_MAPS, "cm-0", namespace=namespace) is not None
        await api.delete(
            r.CONFIG_MAPS,
            "cm-0",
            namespace=namespace,
            uid=created["metadata"]["uid"],
            resource_version=replaced["metadata"]["resourceVersion"],
            propagation_policy=Propagation.BACKGROUND,
        )
        assert await api.get_or_none(r.CONFIG_MAPS, "cm-0", namespace=namespace) is None
        with pytest.raises(NotFound):
            await api.delete(r.CONFIG_MAPS, "cm-0", namespace=namespace)
        assert await api.delete(r.CONFIG_MAPS, "cm-0", namespace=namespace, missing_ok=True) is None


async def test_delete_of_an_object_with_finalizers_leaves_it_terminating(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        obj = config_map("held", namespace)
        obj["metadata"]["finalizers"] = ["kfed.io/cleanup"]
        await api.create(r.CONFIG_MAPS, obj)
        pending = await api.delete(r.CONFIG_MAPS, "held", namespace=namespace)
        assert pending is not None
        assert pending["metadata"]["deletionTimestamp"]
        assert (await api.get(r.CONFIG_MAPS, "held", namespace=namespace))["metadata"]["deletionTimestamp"]
        await api.patch(r.CONFIG_MAPS, "held", {"metadata": {"finalizers": None}}, namespace=namespace)
        assert await api.get_or_none(r.CONFIG_MAPS, "held", namespace=namespace) is None


async def test_delete_collection_deletes_what_the_selector_names_in_one_request(
    rig: Federation, namespace: str
) -> None:
    """Kueue's Workload CRD: the Workloads whose label value is in the set go in one deletecollection, the others
    (another value, no label, another namespace's) stay; an empty selector is refused before any request."""
    api = await connect(rig, WORKER)
    async with api:
        other_namespace = f"{namespace}-other"
        await api.create(r.NAMESPACES, {"metadata": {"name": other_namespace}})
        try:
            for name, value in (("a", "one"), ("b", "two"), ("c", "three"), ("d", None)):
                wl = workload(name, namespace)
                wl["metadata"]["labels"] = {LABEL: value} if value else {}
                await api.create(r.WORKLOADS, wl)
            elsewhere = workload("a", other_namespace)
            elsewhere["metadata"]["labels"] = {LABEL: "one"}
            await api.create(r.WORKLOADS, elsewhere)
            api.counter.reset()

            deleted = await api.delete_collection(
                r.WORKLOADS,
                namespace=namespace,
                label_selector=f"{LABEL} in (one,two,absent)",
                propagation_policy=Propagation.BACKGROUND,
            )

            assert deleted == 2
            assert api.counter.snapshot() == {("deletecollection", r.WORKLOADS.label): 1}
            assert api.counter.writes() == 1
            left = await api.list(r.WORKLOADS, namespace=namespace)
            assert sorted(item["metadata"]["name"] for item in left.items) == ["c", "d"]
            assert await api.get_or_none(r.WORKLOADS, "a", namespace=other_namespace) is not None
            assert await api.delete_collection(r.WORKLOADS, namespace=namespace, label_selector=f"{LABEL}=none") == 0
            with pytest.raises(ValueError, match="label selector"):
                await api.delete_collection(r.WORKLOADS, namespace=namespace, label_selector=" ")
        finally:
            await api.delete(r.NAMESPACES, other_namespace, missing_ok=True)


# -- patches -------------------------------------------------------------------------------------------------


async def test_merge_json_and_strategic_merge_patches_on_a_job(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        await api.create(r.JOBS, suspended_job("patched", namespace))

        # Strategic merge: metadata.finalizers has patchStrategy "merge", so the list is extended.
        smp = await api.patch(
            r.JOBS,
            "patched",
            {"metadata": {"finalizers": ["kfed.io/b"]}},
            namespace=namespace,
            patch_type=PatchType.STRATEGIC,
        )
        assert sorted(smp["metadata"]["finalizers"]) == ["kfed.io/a", "kfed.io/b"]

        # JSON merge patch: lists are replaced; null deletes a key.
        merged = await api.patch(
            r.JOBS,
            "patched",
            {"metadata": {"finalizers": ["kfed.io/c"], "labels": {LABEL: None, "kfed.io/new": "yes"}}},
            namespace=namespace,
        )
        assert merged["metadata"]["finalizers"] == ["kfed.io/c"]
        assert merged["metadata"]["labels"] == {"kfed.io/new": "yes"}

        # JSON patch with a test op: applies when the test holds, Invalid (422) when it does not.
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/spec/parallelism", "value": 1},
            {"op": "replace", "path": "/spec/parallelism", "value": 3},
            {"op": "remove", "path": "/metadata/finalizers"},
        ]
        patched = await api.patch(r.JOBS, "patched", ops, namespace=namespace, patch_type=PatchType.JSON)
        assert patched["spec"]["parallelism"] == 3
        assert "finalizers" not in patched["metadata"]
        with pytest.raises(Invalid) as failed_test:
            await api.patch(r.JOBS, "patched", ops, namespace=namespace, patch_type=PatchType.JSON)
        assert failed_test.value.status == 422

        # Strategic merge is for built-in kinds only: the apiserver refuses it for a CRD (415).
        await api.create(r.WORKLOADS, workload("smp", namespace))
        with pytest.raises(KubeError) as unsupported:
            await api.patch(
                r.WORKLOADS, "smp", {"spec": {"active": False}}, namespace=namespace, patch_type=PatchType.STRATEGIC
            )
        assert unsupported.value.status == 415


async def test_a_merge_patch_guarded_by_uid_ignores_status_writes_but_not_a_recreated_object(
    rig: Federation, namespace: str
) -> None:
    # kfed-agent starts a Job with a uid-guarded merge patch: the Job controller's status writes in between must not
    # make it a Conflict (as a resourceVersion guard does), a Job re-created under the same name must refuse it.
    api = await connect(rig, WORKER)
    async with api:
        job = await api.create(r.JOBS, suspended_job("guarded", namespace))
        uid, version = job["metadata"]["uid"], job["metadata"]["resourceVersion"]
        await api.patch(r.JOBS, "guarded", {"metadata": {"labels": {"kfed.io/moved": "yes"}}}, namespace=namespace)
        with pytest.raises(Conflict):
            await api.patch(
                r.JOBS,
                "guarded",
                {"metadata": {"resourceVersion": version}, "spec": {"parallelism": 2}},
                namespace=namespace,
            )
        started = await api.patch(
            r.JOBS, "guarded", {"metadata": {"uid": uid}, "spec": {"parallelism": 2}}, namespace=namespace
        )
        assert started["spec"]["parallelism"] == 2
        with pytest.raises((Conflict, Invalid)):
            await api.patch(
                r.JOBS,
                "guarded",
                {"metadata": {"uid": str(uuid.uuid4())}, "spec": {"parallelism": 3}},
                namespace=namespace,
            )


async def test_requests_do_not_look_for_netrc_credentials(
    rig: Federation, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp looked for ~/.netrc (in a thread-pool hop) on every request without an auth header: a third of
    # kfed-manager's CPU and two thirds of kfed-agent's in a burst of Jobs.
    import aiohttp.client

    looked: list[int] = []
    real = aiohttp.client.netrc_from_env  # type: ignore[attr-defined]

    def counting() -> Any:
        looked.append(1)
        return real()

    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.setattr(aiohttp.client, "netrc_from_env", counting)
    api = await connect(rig, WORKER)
    async with api:
        for i in range(5):
            await api.create(r.CONFIG_MAPS, config_map(f"netrc-{i}", namespace))
        assert len((await api.list(r.CONFIG_MAPS, namespace=namespace)).items) >= 5
    assert looked == []


async def test_requests_skip_the_generated_clients_serialisation(
    rig: Federation, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ApiClient.call_api walked every body and parameter through sanitize_for_serialization and encoded it again:
    # a sixth of kfed-manager's CPU in a 300-Job burst. The transport sends through the session itself.
    from kubernetes_asyncio.client import ApiClient

    walked: list[int] = []
    real = ApiClient.sanitize_for_serialization

    def counting(self: Any, obj: Any) -> Any:
        walked.append(1)
        return real(self, obj)

    monkeypatch.setattr(ApiClient, "sanitize_for_serialization", counting)
    api = await connect(rig, WORKER)
    async with api:
        created = await api.create(r.CONFIG_MAPS, config_map("plain", namespace))
        patched = await api.patch(r.CONFIG_MAPS, "plain", {"data": {"v": "2"}}, namespace=namespace)
        assert patched["data"] == {"v": "2"}
        assert patched["metadata"]["uid"] == created["metadata"]["uid"]
        assert await api.delete(r.CONFIG_MAPS, "plain", namespace=namespace) is not None
    assert walked == []


async def test_server_side_apply_conflicts_without_force_and_takes_over_with_force(
    rig: Federation, namespace: str
) -> None:
    api = await connect(rig, WORKER)
    async with api:
        mine = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "applied", "namespace": namespace},
            "data": {"owned": "a", "shared": "a"},
        }
        first = await api.apply(r.CONFIG_MAPS, mine, field_manager="kfed-a")
        assert first["data"] == {"owned": "a", "shared": "a"}
        assert [m["manager"] for m in first["metadata"]["managedFields"]] == ["kfed-a"]

        theirs = {"metadata": {"name": "applied", "namespace": namespace}, "data": {"shared": "b"}}
        with pytest.raises(Conflict) as conflict:
            await api.apply(r.CONFIG_MAPS, theirs, field_manager="kfed-b")
        assert conflict.value.status == 409
        assert 'conflict with "kfed-a"' in conflict.value.message
        assert ".data.shared" in conflict.value.message
        assert (await api.get(r.CONFIG_MAPS, "applied", namespace=namespace))["data"]["shared"] == "a"

        forced = await api.apply(r.CONFIG_MAPS, theirs, field_manager="kfed-b", force=True)
        assert forced["data"] == {"owned": "a", "shared": "b"}
        owners = {m["manager"]: m["fieldsV1"]["f:data"] for m in forced["metadata"]["managedFields"]}
        assert owners == {"kfed-a": {"f:owned": {}}, "kfed-b": {"f:shared": {}}}

        # kfed-a applies again without the field it lost: nothing of kfed-b's is touched.
        again = await api.apply(r.CONFIG_MAPS, {**mine, "data": {"owned": "a2"}}, field_manager="kfed-a")
        assert again["data"] == {"owned": "a2", "shared": "b"}

        # And on a CRD (cluster-scoped ClusterQueue), through patch() with PatchType.APPLY.
        cq_name = f"{namespace}-cq"
        try:
            cq = await api.patch(
                r.CLUSTER_QUEUES,
                cq_name,
                {"spec": {"namespaceSelector": {}}},
                patch_type=PatchType.APPLY,
                field_manager="kfed-a",
            )
            assert cq["metadata"]["name"] == cq_name
            assert cq["kind"] == "ClusterQueue"
        finally:
            await api.delete(r.CLUSTER_QUEUES, cq_name, missing_ok=True)


# -- status subresource ----------------------------------------------------------------------------------------


async def test_status_subresource_of_a_workload_and_call_counts(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        sent = workload("w", namespace)
        sent["status"] = {"clusterName": "ignored-on-create"}
        api.counter.reset()
        created = await api.create(r.WORKLOADS, sent)
        assert "clusterName" not in (created.get("status") or {})  # status is not written through the main resource
        assert created["spec"]["active"] is True  # the CRD's default
        assert created["metadata"]["generation"] == 1

        pending = condition("QuotaReserved", "False", "Pending", "waiting for quota")
        patched = await api.patch_status(
            r.WORKLOADS, "w", {"status": {"conditions": [pending]}, "spec": {"active": False}}, namespace=namespace
        )
        assert patched["status"]["conditions"][0]["reason"] == "Pending"
        assert patched["spec"]["active"] is True  # spec changes sent to /status are ignored
        assert patched["metadata"]["generation"] == 1

        # replace_status: the whole status, optimistic concurrency; spec in the body is ignored here too.
        body = {**patched, "spec": {**patched["spec"], "queueName": "other"}}
        body["status"] = {**patched["status"], "clusterName": WORKER}
        replaced = await api.replace_status(r.WORKLOADS, body)
        assert replaced["status"]["clusterName"] == WORKER
        assert replaced["spec"]["queueName"] == "q"
        assert replaced["metadata"]["generation"] == 1
        with pytest.raises(Conflict):
            await api.replace_status(r.WORKLOADS, body)  # the resourceVersion in body is now stale

        # The CRD's CEL transition rule on status: clusterName is immutable once set.
        with pytest.raises(Invalid) as immutable:
            await api.patch_status(r.WORKLOADS, "w", {"status": {"clusterName": "worker-2"}}, namespace=namespace)
        assert immutable.value.status == 422
        assert "clusterName is immutable once set" in immutable.value.message

        # Server-side apply on the status subresource with a field manager.
        applied = await api.apply_status(
            r.WORKLOADS,
            {
                "apiVersion": r.WORKLOADS.api_version,
                "kind": "Workload",
                "metadata": {"name": "w", "namespace": namespace},
                "status": {"conditions": [condition("kfed.io/Dispatched", "True", "Dispatched", "to worker-1")]},
            },
            field_manager="kfed-status",
            force=True,
        )
        types = {c["type"] for c in applied["status"]["conditions"]}
        assert "kfed.io/Dispatched" in types
        assert any(
            m["manager"] == "kfed-status" and m.get("subresource") == "status"
            for m in applied["metadata"]["managedFields"]
        )

        await api.get(r.WORKLOADS, "w", namespace=namespace)
        snapshot = api.counter.snapshot()
        assert snapshot == {
            ("create", "workloads.kueue.x-k8s.io"): 1,
            ("patch", "workloads.kueue.x-k8s.io/status"): 3,
            ("update", "workloads.kueue.x-k8s.io/status"): 2,
            ("get", "workloads.kueue.x-k8s.io"): 1,
        }
        assert api.counter.writes() == 6
        assert api.counter.writes(resource="workloads.kueue.x-k8s.io/status") == 5
        assert api.counter.reads() == 1


# -- validation errors from the apiserver -------------------------------------------------------------------


async def test_invalid_objects_are_refused_with_the_apiservers_message(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER, retry=FAST_RETRY)
    async with api:
        api.counter.reset()
        # A CEL rule of the Workload CRD.
        no_priority = workload(
            "cel", namespace, priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "p"}
        )
        with pytest.raises(Invalid) as cel:
            await api.create(r.WORKLOADS, no_priority)
        assert cel.value.status == 422
        assert cel.value.reason == "Invalid"
        assert "priority should not be nil when priorityClassRef is set" in cel.value.message
        causes = cel.value.details.get("causes") or []
        assert any(c.get("field") == "spec" for c in causes), causes

        # An OpenAPI constraint, named by field path.
        negative = workload("neg", namespace)
        negative["spec"]["podSets"][0]["count"] = -1
        with pytest.raises(Invalid, match=r"spec\.podSets\[0\]\.count"):
            await api.create(r.WORKLOADS, negative)

        # An unknown field: refused by name with Strict field validation; silently pruned by the server default.
        unknown = workload("unknown", namespace, queueNmae="typo")
        with pytest.raises(Invalid, match=r'unknown field "spec\.queueNmae"'):
            await api.create(r.WORKLOADS, unknown, field_validation=FieldValidation.STRICT)
        pruned = await api.create(r.WORKLOADS, unknown)
        assert "queueNmae" not in pruned["spec"]

        # Built-in validation: a name that is not a DNS subdomain.
        with pytest.raises(Invalid, match=r"metadata\.name"):
            await api.create(r.CONFIG_MAPS, config_map("Not_A_Name", namespace))
        assert api.counter.writes() == 5  # Invalid is never retried


async def test_forbidden_and_unauthorized_come_from_rbac_and_authentication(rig: Federation, namespace: str) -> None:
    await kubectl(rig, WORKER, "-n", namespace, "create", "serviceaccount", "reader")
    token = (await kubectl(rig, WORKER, "-n", namespace, "create", "token", "reader", "--duration=10m")).strip()
    # An inline token and CA: a Secret-style kubeconfig, so connect_kubeconfig_text validates it.
    text = kubeconfig_with(rig, WORKER, user={"token": token})
    options = ClientOptions(retry=FAST_RETRY, request_timeout=15.0)
    async with await connect_kubeconfig_text(text, cluster=WORKER, options=options) as api:
        await kubectl(rig, WORKER, "-n", namespace, "create", "configmap", "x", "--from-literal=v=1")
        with pytest.raises(Forbidden) as denied:
            await api.get(r.CONFIG_MAPS, "x", namespace=namespace)
        assert denied.value.status == 403
        assert f"system:serviceaccount:{namespace}:reader" in denied.value.message
        assert api.counter.reads() == 1  # Forbidden is not retried

        await kubectl(
            rig, WORKER, "-n", namespace, "create", "rolebinding", "reader", "--clusterrole=view",
            f"--serviceaccount={namespace}:reader",
        )  # fmt: skip
        got = await eventually_ok(
            lambda: api.get(r.CONFIG_MAPS, "x", namespace=namespace), within=30, what="RBAC grant to take effect"
        )
        assert got["data"] == {"v": "1"}
        with pytest.raises(Forbidden):
            await api.create(r.CONFIG_MAPS, config_map("y", namespace))  # view does not allow writes

    bogus = kubeconfig_with(rig, WORKER, user={"token": "not-a-valid-token"})
    async with await connect_kubeconfig_text(bogus, cluster=WORKER, options=options) as api:
        with pytest.raises(Unauthorized) as unauthorized:
            await api.get(r.CONFIG_MAPS, "x", namespace=namespace)
        assert unauthorized.value.status == 401


async def test_too_many_requests_from_priority_and_fairness_are_typed_and_retried(
    rig: Federation, namespace: str
) -> None:
    # A priority level with no nominal concurrency (it still dispatches one request when none is running) and
    # Reject instead of queueing, for one ServiceAccount: the real apiserver answers concurrent requests of that
    # identity with 429 and a Retry-After header.
    await kubectl(rig, WORKER, "-n", namespace, "create", "serviceaccount", "throttled")
    await kubectl(
        rig, WORKER, "-n", namespace, "create", "rolebinding", "throttled", "--clusterrole=view",
        f"--serviceaccount={namespace}:throttled",
    )  # fmt: skip
    token = (await kubectl(rig, WORKER, "-n", namespace, "create", "token", "throttled", "--duration=10m")).strip()
    name = f"kfed-test-{namespace}"
    objects = [
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": name},
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 0,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": {"type": "Reject"},
                },
            },
        },
        {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "FlowSchema",
            "metadata": {"name": name},
            "spec": {
                "matchingPrecedence": 500,
                "priorityLevelConfiguration": {"name": name},
                "rules": [
                    {
                        "subjects": [
                            {"kind": "ServiceAccount", "serviceAccount": {"name": "throttled", "namespace": namespace}}
                        ],
                        "resourceRules": [
                            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
                        ],
                    }
                ],
            },
        },
    ]
    await kubectl(
        rig, WORKER, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    try:
        text = kubeconfig_with(rig, WORKER, user={"token": token})

        async def flood(api: KubeApi, requests: int = 40) -> list[Unavailable | None]:
            outcomes: list[Unavailable | None] = []

            async def one() -> None:
                try:
                    await api.list(r.CONFIG_MAPS, namespace=namespace)
                    outcomes.append(None)
                except Unavailable as exc:
                    outcomes.append(exc)

            async with anyio.create_task_group() as tg:
                for _ in range(requests):
                    tg.start_soon(one)
            return outcomes

        never = ClientOptions(retry=RetryPolicy.never(), qps=1000, burst=1000)
        async with await connect_kubeconfig_text(text, cluster=WORKER, options=never) as api:

            async def rejected() -> Unavailable:
                for outcome in await flood(api):
                    if outcome is not None:
                        return outcome
                raise KubeError("no request was rejected yet")

            exc = await eventually_ok(rejected, within=30, what="the FlowSchema to take effect")
            assert exc.status == 429
            assert exc.retry_after is not None
            assert exc.retry_after >= 1

        # 40 requests share one seat, and nothing keeps one from losing it many times in a row: on a loaded machine
        # the last of them lost it 20 times (4 s at most of Retry-After, capped at 0.2 s). 200 attempts (40 s) are
        # enough for every one to get through unless retrying does not work.
        retrying = ClientOptions(
            retry=RetryPolicy(attempts=200, initial=0.01, maximum=0.05, max_retry_after=0.2), qps=1000, burst=1000
        )
        async with await connect_kubeconfig_text(text, cluster=WORKER, options=retrying) as api:
            sent = 0
            with anyio.fail_after(60):
                # A loaded machine may serialize one burst enough that nothing is rejected: burst until one was.
                while api.counter.reads() == sent:
                    outcomes = await flood(api)
                    sent += 40
                    assert outcomes == [None] * 40  # every rejected attempt was retried until it got through
            assert api.counter.reads() > sent  # ... and every attempt was counted
    finally:
        await kubectl(rig, WORKER, "delete", "flowschema,prioritylevelconfiguration", name, "--ignore-not-found")


# -- connections ----------------------------------------------------------------------------------------------


async def test_connection_refused_and_wrong_ca_are_unavailable_and_clients_close_cleanly(rig: Federation) -> None:
    import gc
    import warnings

    options = ClientOptions(retry=FAST_RETRY, request_timeout=10.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with ClusterClients(options=options) as clients:
            refused = kubeconfig_with(rig, WORKER, server=f"https://127.0.0.1:{free_port()}")
            api = await clients.add_from_text("refused", refused)
            with pytest.raises(Unavailable):
                await api.get(r.NODES, "n")
            assert api.counter.reads() == 3  # retried: attempts=3

            manager_ca = yaml.safe_load(rig.kubeconfig(MANAGER).read_text())["clusters"][0]["cluster"][
                "certificate-authority-data"
            ]
            wrong_ca = kubeconfig_with(rig, WORKER, **{"certificate-authority-data": manager_ca})
            api = await clients.add_from_text("wrong-ca", wrong_ca)
            with pytest.raises(Unavailable, match="certificate verify failed"):
                await api.get(r.NODES, "n")

            good = await clients.add_from_text(WORKER, rig.kubeconfig(WORKER).read_text())
            version = await good.server_version()
            assert version["gitVersion"].startswith("v1.")
            assert sorted(clients) == sorted(["refused", "wrong-ca", WORKER])
            # Reconnecting a cluster replaces (and closes) its old client.
            await clients.add_from_text(WORKER, rig.kubeconfig(WORKER).read_text())
            assert len(clients) == 3
        del api, good
        gc.collect()
    assert not [w for w in caught if "Unclosed" in str(w.message)], [str(w.message) for w in caught]

    # A kubeconfig file with inline credentials works too (file references would be resolved next to it).
    async with await connect_kubeconfig_file(rig.kubeconfig(WORKER), cluster=WORKER) as api:
        assert (await api.get(r.NAMESPACES, "default"))["metadata"]["name"] == "default"


# -- events ----------------------------------------------------------------------------------------------------


async def test_events_are_accepted_and_shown_by_kubectl(rig: Federation, namespace: str) -> None:
    api = await connect(rig, WORKER)
    async with api:
        job = await api.create(
            r.JOBS, {**suspended_job("evented", namespace), "metadata": {"name": "evented", "namespace": namespace}}
        )
        event = await api.create_event(
            job,
            reason="Dispatched",
            note="sent to worker-1 " + "é" * 2000,  # over the 1 KiB limit: truncated, still accepted
            action="Dispatch",
            reporting_controller="kfed.io/manager",
            reporting_instance="kfed-manager-0",
            event_type="Normal",
        )
        assert event["metadata"]["namespace"] == namespace
        assert event["regarding"]["uid"] == job["metadata"]["uid"]

        # A Workload with the longest legal name: the Event's generated name must still be a legal name.
        long_name = "w" + "x" * 252
        wl = await api.create(r.WORKLOADS, workload(long_name, namespace))
        warning = await api.create_event(
            wl,
            reason="NoCapacity",
            note="no worker fits",
            action="Dispatch",
            reporting_controller="kfed.io/manager",
            reporting_instance="kfed-manager-0",
            event_type="Warning",
        )
        assert warning["regarding"]["name"] == long_name

        # A cluster-scoped object's Events go to "default".
        cq_name = f"{namespace}-cq"
        cq = await api.create(r.CLUSTER_QUEUES, {"metadata": {"name": cq_name}, "spec": {"namespaceSelector": {}}})
        try:
            cq_event = await api.create_event(
                cq,
                reason="Reconciled",
                note="ok",
                action="Reconcile",
                reporting_controller="kfed.io/manager",
                reporting_instance="kfed-manager-0",
            )
            assert cq_event["metadata"]["namespace"] == "default"
        finally:
            await api.delete(r.CLUSTER_QUEUES, cq_name, missing_ok=True)
            await api.delete(r.EVENTS, cq_event["metadata"]["name"], namespace="default", missing_ok=True)

    listed = await kubectl_json(rig, WORKER, "-n", namespace, "get", "events")
    # Keyed by reason too: the Job controller records its own Events (e.g. Suspended) about the same Job.
    by_object = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]): e for e in listed["items"]}
    dispatched = by_object[("Job", "evented", "Dispatched")]
    assert dispatched["type"] == "Normal"
    assert dispatched["reportingComponent"] == "kfed.io/manager"
    assert dispatched["message"].startswith("sent to worker-1")
    assert len(dispatched["message"].encode()) <= 1024
    assert by_object[("Workload", long_name, "NoCapacity")]["type"] == "Warning"
    described = await kubectl(rig, WORKER, "-n", namespace, "describe", "job", "evented")
    assert "Dispatched" in described
