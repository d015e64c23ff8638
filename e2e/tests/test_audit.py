import json

from e2e.rig.audit import client_of, count_writes


def _line(verb: str, resource: str, agent: str, *, sub: str = "", stage: str = "ResponseComplete") -> str:
    ref = {"resource": resource, "namespace": "default", "name": "x"}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {"stage": stage, "verb": verb, "objectRef": ref, "userAgent": agent, "responseStatus": {"code": 201}}
    )


def test_writes_are_counted_per_client_verb_and_resource() -> None:
    lines = [
        _line("create", "workloads", "kfed-manager/0.1.0"),
        _line("patch", "workloads", "kfed-manager/0.1.0", sub="status"),
        _line("patch", "workloads", "kfed-manager/0.1.0", sub="status", stage="RequestReceived"),
        _line("get", "workloads", "kfed-manager/0.1.0"),
        _line("create", "pods", "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/abc/job-controller"),
        "not json",
    ]
    counts = count_writes(lines)
    assert counts[("kfed-manager", "create", "workloads")] == 1
    assert counts[("kfed-manager", "patch", "workloads/status")] == 1
    assert counts[("kube-controller-manager", "create", "pods")] == 1
    assert sum(counts.values()) == 3


def test_client_names() -> None:
    assert client_of("kfed-agent/0.1.0") == "kfed-agent"
    assert client_of("") == "unknown"
