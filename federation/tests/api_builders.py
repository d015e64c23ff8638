"""Raw Kueue API objects for decision tests (manager and agent), as a watch cache would hold them."""

from __future__ import annotations

from typing import Any

from federation.admission.api_quotas import cohort_spec, flavor_info, queue_info
from federation.admission.api_state import QuotaState, build_quota_state, local_queue_info
from federation.limit_ranges import by_namespace

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"


def flavor(name: str, **spec: Any) -> Obj:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str, quotas: dict[str, dict[str, Any]], *, cohort: str | None = None, selector: Obj | None = None, **spec: Any
) -> Obj:
    """``quotas``: flavor → resource → nominal quota (or a dict with nominalQuota/borrowingLimit/...)."""
    resources = sorted({resource for per_flavor in quotas.values() for resource in per_flavor})
    body: Obj = {
        "namespaceSelector": {} if selector is None else selector,
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [
                            {"name": r, **(q if isinstance(q, dict) else {"nominalQuota": q})}
                            for r, q in sorted(per_flavor.items())
                        ],
                    }
                    for flavor_name, per_flavor in quotas.items()
                ],
            }
        ],
        **spec,
    }
    if cohort:
        body["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name, "generation": 1}, "spec": body}


def local_queue(namespace: str, name: str, cq: str, **spec: Any) -> Obj:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"clusterQueue": cq, **spec},
    }


def workload(
    name: str,
    *,
    cpu: str = "1",
    count: int = 1,
    queue: str = "lq",
    namespace: str = "ns",
    priority: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
    status: Obj | None = None,
    **pod_spec: Any,
) -> Obj:
    spec: Obj = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": count,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **pod_spec}
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    obj: Obj = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def admitted_status(cq: str, flavor_name: str, cpu: str, *, finished: bool = False) -> Obj:
    conditions = [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:01Z",
        },
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:01Z",
        },
    ]
    if finished:
        conditions.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:09Z",
            }
        )
    return {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": flavor_name}, "resourceUsage": {"cpu": cpu}, "count": 1}
            ],
        },
        "conditions": conditions,
    }


def state(
    *,
    flavors: list[Obj],
    queues: list[Obj],
    local_queues: list[Obj],
    workloads: list[Obj],
    cohorts: list[Obj] = (),  # type: ignore[assignment]
    namespaces: dict[str, dict[str, str]] | None = None,
    now_seconds: float | None = None,
    limit_ranges: list[Obj] = (),  # type: ignore[assignment]
) -> QuotaState:
    infos = [flavor_info(f) for f in flavors]
    return build_quota_state(
        flavors={info.spec.name: info for info in infos},
        queues={q["metadata"]["name"]: queue_info(q) for q in queues},
        cohorts=[cohort_spec(c) for c in cohorts],
        local_queues=[local_queue_info(lq) for lq in local_queues],
        namespace_labels=namespaces if namespaces is not None else {"ns": {}},
        workloads=workloads,
        now_seconds=now_seconds,
        limit_ranges=by_namespace(limit_ranges),
    )


def two_borrowing_queues() -> QuotaState:
    """ClusterQueues ``a``, ``b`` and ``lender`` of 10 cpu each in one cohort: ``a`` already borrows 4 of the
    cohort's 30 cpu, ``b`` borrows nothing; 6 cpu are left, room for one of the 4-cpu heads ``a-next`` (older) and
    ``b-next``. Fair sharing admits ``b-next``, FIFO ``a-next``."""
    return state(
        flavors=[flavor("default")],
        queues=[cluster_queue(name, {"default": {"cpu": "10"}}, cohort="c") for name in ("a", "b", "lender")],
        local_queues=[local_queue("ns", "lq-a", "a"), local_queue("ns", "lq-b", "b")],
        workloads=[
            workload("a-running", cpu="14", queue="lq-a", status=admitted_status("a", "default", "14")),
            workload("b-running", cpu="10", queue="lq-b", status=admitted_status("b", "default", "10")),
            workload("a-next", cpu="4", queue="lq-a", created="2026-01-01T00:00:05Z"),
            workload("b-next", cpu="4", queue="lq-b", created="2026-01-01T00:00:06Z"),
        ],
    )
