from federation.podspec import pod_requests, runtime_overheads, total_requests, with_runtime_overhead


def _c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: str) -> dict[str, object]:
    resources: dict[str, object] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def test_containers_add_up_and_limits_stand_in_for_missing_requests() -> None:
    spec = {"containers": [_c({"cpu": "500m"}), _c(limits={"cpu": "1", "memory": "1Gi"})]}
    assert pod_requests(spec) == {"cpu": 1500, "memory": 1024**3 * 1000}


def test_init_containers_count_at_their_peak_and_sidecars_add() -> None:
    spec = {
        "containers": [_c({"cpu": "1"})],
        "initContainers": [_c({"cpu": "3"}), _c({"cpu": "250m"}, restartPolicy="Always"), _c({"cpu": "2"})],
        "overhead": {"cpu": "100m"},
    }
    # main 1 + sidecar 0.25 = 1.25; init peak: max(3, 2 + 0.25) = 3 -> 3 + overhead 0.1
    assert pod_requests(spec) == {"cpu": 3100}


def test_total_multiplies_by_count() -> None:
    spec = {"containers": [_c({"cpu": "2", "nvidia.com/gpu": "1"})]}
    assert total_requests([(spec, 3)]) == {"cpu": 6000, "nvidia.com/gpu": 3000}


def test_pod_level_resources_replace_the_containers_sum_for_cpu_memory_and_hugepages() -> None:
    spec = {
        "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi", "hugepages-2Mi": "1Gi"}},
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
        ],
        "overhead": {"cpu": "250m"},
    }
    assert pod_requests(spec) == {
        "cpu": 4250,
        "memory": 8 * 1024**3 * 1000,
        "hugepages-2Mi": 1024**3 * 1000,
        "nvidia.com/gpu": 1000,
    }
    assert pod_requests({"resources": {}, "containers": spec["containers"]})["cpu"] == 2000
    below = {"resources": {"limits": {"cpu": "1500m"}}, "containers": spec["containers"]}
    assert pod_requests(below)["cpu"] == 2000, "never less than the containers' own requests (Kueue v0.20)"


def test_a_runtime_class_overhead_is_laid_in_only_where_the_pod_sets_none() -> None:
    overheads = runtime_overheads(
        [
            {
                "metadata": {"name": "kata"},
                "handler": "kata",
                "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
            },
            {"metadata": {"name": "runc"}, "handler": "runc"},
        ]
    )
    assert overheads == (("kata", (("cpu", "250m"), ("memory", "160Mi"))),)
    spec = {"runtimeClassName": "kata", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    assert pod_requests(with_runtime_overhead(spec, overheads)) == {"cpu": 1250, "memory": 160 * 1024**2 * 1000}
    own = {**spec, "overhead": {"cpu": "1"}}
    assert with_runtime_overhead(own, overheads) is own, "an overhead the pod sets is its own"
    unknown = {**spec, "runtimeClassName": "gvisor"}
    assert with_runtime_overhead(unknown, overheads) is unknown
