from typing import Any

from federation.admission.api_state import IgnoredObject, QuotaStateBuilder
from federation.tests.api_builders import cluster_queue, flavor, local_queue, workload


def _inputs(bad_flavor_version: str) -> dict[str, Any]:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "broken", "resourceVersion": bad_flavor_version},
        "spec": {"nodeLabels": "not-a-map"},
    }
    good = flavor("default")
    good["metadata"]["resourceVersion"] = "1"
    return {
        "flavors": [good, bad],
        "cluster_queues": [cluster_queue("cq", {"default": {"cpu": "4"}})],
        "cohorts": [],
        "local_queues": [local_queue("ns", "lq", "cq")],
        "namespaces": [{"metadata": {"name": "ns"}}],
        "workloads": [workload("w", cpu="1")],
    }


def test_a_malformed_flavor_is_reported_once_per_version_and_the_rest_still_schedules() -> None:
    builder = QuotaStateBuilder()
    state = builder.build(**_inputs("5"))
    assert [(i.kind, i.name) for i in builder.ignored] == [("ResourceFlavor", "broken")]
    assert isinstance(builder.ignored[0], IgnoredObject)
    assert "cq" in state.pending
    builder.build(**_inputs("5"))
    assert builder.ignored == [], "the same version is not reported again"
    builder.build(**_inputs("6"))
    assert [i.name for i in builder.ignored] == ["broken"], "a new version is read (and reported) again"


def test_a_pending_workload_is_parsed_again_only_when_its_spec_changes() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    raw = inputs["workloads"][0]
    raw["metadata"].update(uid="u-1", generation=1)
    first = builder.build(**inputs).pending["cq"][0][0]
    assert builder.build(**inputs).pending["cq"][0][0] is first, "an unchanged spec is not parsed again"
    changed = {**raw, "metadata": {**raw["metadata"], "generation": 2}, "spec": {**raw["spec"], "priority": 7}}
    again = builder.build(**{**inputs, "workloads": [changed]}).pending["cq"][0][0]
    assert again is not first
    assert again.priority == 7


def test_a_quota_holding_workload_is_read_again_only_when_it_changes() -> None:
    builder = QuotaStateBuilder()
    inputs = _inputs("5")
    raw = inputs["workloads"][0]
    raw["metadata"].update(uid="u-2", generation=1, resourceVersion="10")
    raw["status"] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}}],
        },
    }
    first = builder.build(**inputs).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert first is not None
    again = builder.build(**inputs).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert again is first, "an unchanged workload is not read again"
    evicted = {
        **raw,
        "metadata": {**raw["metadata"], "resourceVersion": "11"},
        "status": {
            **raw["status"],
            "conditions": [*raw["status"]["conditions"], {"type": "Evicted", "status": "True", "reason": "x"}],
        },
    }
    changed = builder.build(**{**inputs, "workloads": [evicted]}).snapshot.admitted(raw["metadata"]["namespace"] + "/w")
    assert changed is not None
    assert changed.evicted
