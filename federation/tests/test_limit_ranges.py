from typing import Any

from federation.admission.api_state import QuotaStateBuilder
from federation.limit_ranges import by_namespace, summarize, violations, with_defaults, workload_violations
from federation.podspec import pod_requests
from federation.tests.api_builders import cluster_queue, flavor, local_queue, workload

Obj = dict[str, Any]


def limit_range(name: str, *items: Obj, namespace: str = "ns") -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"limits": list(items)}}


def container(**resources: Obj) -> Obj:
    return {"name": "c", "resources": resources}


DEFAULTS = {"type": "Container", "default": {"cpu": "2"}, "defaultRequest": {"cpu": "1", "memory": "1Gi"}}


def test_a_container_without_requests_gets_the_defaults_and_one_with_them_keeps_its_own() -> None:
    summary = summarize([limit_range("lr", DEFAULTS)])
    spec = {"containers": [container(), container(requests={"cpu": "3"}, limits={"cpu": "4"})]}
    defaulted = with_defaults(spec, summary)
    assert defaulted["containers"][0]["resources"] == {
        "limits": {"cpu": "2"},
        "requests": {"cpu": "1", "memory": "1Gi"},
    }
    assert defaulted["containers"][1]["resources"] == {
        "limits": {"cpu": "4"},
        "requests": {"cpu": "3", "memory": "1Gi"},
    }
    assert spec["containers"][0] == container(), "the pod spec given is not changed"
    assert pod_requests(defaulted) == {"cpu": 4000, "memory": 1024**3 * 2000}


def test_a_container_with_only_a_limit_requests_its_limit_not_the_default_request() -> None:
    """As the pod's own defaulting does before the LimitRanger sees it (Kueue v0.20 counts it so, #15023)."""
    summary = summarize([limit_range("lr", DEFAULTS)])
    defaulted = with_defaults({"containers": [container(limits={"cpu": "3"})]}, summary)
    assert defaulted["containers"][0]["resources"] == {
        "limits": {"cpu": "3"},
        "requests": {"cpu": "3", "memory": "1Gi"},
    }
    assert pod_requests(defaulted) == {"cpu": 3000, "memory": 1024**3 * 1000}
    bounded = summarize([limit_range("lr", {**DEFAULTS, "min": {"cpu": "2"}})])
    only_limit = with_defaults({"containers": [container(limits={"cpu": "3"})]}, bounded)
    assert violations(only_limit, bounded, path="spec") == [], "its limit is its request: above the min"


def test_init_containers_get_the_defaults_too_and_a_spec_needing_none_is_returned_as_is() -> None:
    summary = summarize([limit_range("lr", DEFAULTS)])
    spec = {
        "initContainers": [container()],
        "containers": [container(requests={"cpu": "1", "memory": "1"}, limits={"cpu": "1"})],
    }
    defaulted = with_defaults(spec, summary)
    assert defaulted["initContainers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert defaulted["containers"] is spec["containers"]
    assert with_defaults(spec, None) is spec
    assert with_defaults(spec, summarize([limit_range("lr", {"type": "Pod", "max": {"cpu": "9"}})])) is spec


def test_several_limit_ranges_keep_the_lowest_max_the_highest_min_and_the_first_default_by_name() -> None:
    summary = summarize(
        [
            limit_range(
                "b", {"type": "Container", "max": {"cpu": "4"}, "min": {"cpu": "100m"}, "default": {"cpu": "3"}}
            ),
            limit_range(
                "a", {"type": "Container", "max": {"cpu": "8"}, "min": {"cpu": "200m"}, "default": {"cpu": "1"}}
            ),
            limit_range("c", {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}),
        ]
    )
    assert summary is not None
    assert summary.container_max == (("cpu", 4000),)
    assert summary.container_min == (("cpu", 200),)
    assert summary.default_limits == (("cpu", "1"),)
    assert summarize([limit_range("c", {"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}})]) is None


def test_a_container_or_pod_outside_the_bounds_is_named_as_kueue_words_it() -> None:
    summary = summarize(
        [
            limit_range(
                "lr",
                {"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}},
                {"type": "Pod", "max": {"cpu": "2500m"}},
            )
        ]
    )
    spec = {
        "containers": [
            container(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "4"}),
            container(requests={"cpu": "2", "memory": "1Gi"}),
        ]
    }
    assert violations(spec, summary, path="spec") == [
        'spec.containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max',
        'spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',
    ]
    no_memory = {"containers": [container(requests={"cpu": "1"})]}
    assert violations(no_memory, summary, path="spec") == [
        'spec.containers[0]: Invalid value: ["memory"]: requests must not be below the limitRange min'
    ]
    assert violations({"containers": [container(requests={"cpu": "1", "memory": "1Gi"})]}, summary, path="s") == []


def test_a_workload_is_checked_with_its_defaults_laid_in() -> None:
    summary = summarize([limit_range("lr", {"type": "Container", "max": {"cpu": "2"}, "default": {"cpu": "4"}})])
    raw = workload("w", cpu="1")
    assert workload_violations(raw, summary) == (
        "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: "
        'Invalid value: ["cpu"]: requests must not be above the limitRange max'
    ), "the default limit (4) is above the max even though the request (1) is not"
    assert workload_violations(raw, None) == ""


def test_limit_ranges_are_summarized_per_namespace() -> None:
    found = by_namespace([limit_range("a", DEFAULTS, namespace="x"), limit_range("b", DEFAULTS, namespace="y")])
    assert sorted(found) == ["x", "y"]
    assert by_namespace([limit_range("p", {"type": "PersistentVolumeClaim"})]) == {}


def _inputs(*limit_ranges: Obj, workloads: list[Obj]) -> dict[str, Any]:
    return {
        "flavors": [flavor("default")],
        "cluster_queues": [cluster_queue("cq", {"default": {"cpu": "4", "memory": "8Gi"}})],
        "cohorts": [],
        "local_queues": [local_queue("ns", "lq", "cq")],
        "namespaces": [{"metadata": {"name": "ns"}}],
        "limit_ranges": list(limit_ranges),
        "workloads": workloads,
    }


def _no_requests(name: str) -> Obj:
    raw = workload(name)
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {}
    raw["metadata"]["uid"] = f"uid-{name}"
    return raw


def test_quota_counts_a_pending_pod_set_with_its_namespaces_defaults_and_again_when_they_change() -> None:
    builder = QuotaStateBuilder()
    raw = _no_requests("w")
    plain = builder.build(**_inputs(workloads=[raw])).pending["cq"][0][0]
    assert plain.pod_sets[0].requests == {}
    defaulted = builder.build(**_inputs(limit_range("lr", DEFAULTS), workloads=[raw])).pending["cq"][0][0]
    assert defaulted.pod_sets[0].requests == {"cpu": 1000, "memory": 1024**3 * 1000}
    other = {"type": "Container", "defaultRequest": {"cpu": "2"}}
    changed = builder.build(**_inputs(limit_range("lr", other), workloads=[raw])).pending["cq"][0][0]
    assert changed.pod_sets[0].requests == {"cpu": 2000}


def test_a_pending_workload_outside_its_namespaces_limit_range_is_blocked_with_the_reason() -> None:
    builder = QuotaStateBuilder()
    state = builder.build(
        **_inputs(limit_range("lr", {"type": "Pod", "max": {"cpu": "500m"}}), workloads=[workload("big", cpu="1")])
    )
    assert state.pending.get("cq", []) == []
    assert [(b.reason, b.message) for b in state.blocked] == [
        (
            "Misconfigured",
            "resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec: "
            'Invalid value: ["cpu"]: requests must not be above the limitRange max',
        )
    ]
    other_namespace = builder.build(
        **_inputs(
            limit_range("lr", {"type": "Pod", "max": {"cpu": "500m"}}, namespace="elsewhere"),
            workloads=[workload("big", cpu="1")],
        )
    )
    assert [w.key for w, _ in other_namespace.pending["cq"]] == ["ns/big"]


def test_a_default_limit_below_the_containers_own_request_is_named_before_the_bounds() -> None:
    summary = summarize([limit_range("lr", {"type": "Container", "default": {"cpu": "1"}, "max": {"cpu": "1"}})])
    raw = workload("w", cpu="2")
    assert workload_violations(raw, summary) == (
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: "
        'Invalid value: ["cpu"]: requests must not exceed its limits'
    )


def test_quota_counts_a_pending_pod_set_with_its_runtime_class_overhead() -> None:
    builder = QuotaStateBuilder()
    raw = workload("w", cpu="1", runtimeClassName="kata")
    raw["metadata"]["uid"] = "uid-w"
    kata = {"metadata": {"name": "kata"}, "handler": "kata", "overhead": {"podFixed": {"cpu": "500m"}}}
    plain = builder.build(**_inputs(workloads=[raw])).pending["cq"][0][0]
    assert plain.pod_sets[0].requests == {"cpu": 1000}
    charged = builder.build(**{**_inputs(workloads=[raw]), "runtime_classes": [kata]}).pending["cq"][0][0]
    assert charged.pod_sets[0].requests == {"cpu": 1500}


def test_a_summary_survives_the_capacity_report_and_a_signature_tells_pod_shapes_apart() -> None:
    from federation.limit_ranges import limit_range_entry, limit_range_from_entry, resources_signature

    summary = summarize(
        [limit_range("lr", {**DEFAULTS, "max": {"cpu": "4", "memory": "8Gi"}}, {"type": "Pod", "min": {"cpu": "1"}})]
    )
    assert summary is not None
    assert limit_range_from_entry(limit_range_entry(summary)) == summary
    assert resources_signature(workload("a", cpu="1")) == resources_signature(workload("b", cpu="1"))
    assert resources_signature(workload("a", cpu="1")) != resources_signature(workload("a", cpu="2"))
