import json

from e2e.rig.audit import calls, client_of, count_writes, job_of_pod, job_times


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


def _timed(verb: str, resource: str, name: str, agent: str, at: str, *, sub: str = "", code: int = 200) -> str:
    ref = {"resource": resource, "namespace": "default", "name": name}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": verb,
            "objectRef": ref,
            "userAgent": agent,
            "responseStatus": {"code": code},
            "requestReceivedTimestamp": f"2026-11-23T02:00:{at}Z",
        }
    )


def test_job_steps_come_from_the_submit_the_first_pod_status_and_the_last_job_status_write() -> None:
    lines = [
        _timed("create", "jobs", "b-0001", "kubectl/v1.36.3", "00.500000"),
        _timed("create", "jobs", "b-0002", "kubectl/v1.36.3", "01.000000", code=409),
        _timed("patch", "jobs", "b-0001", "kube-controller-manager/v1.36.3", "02.000000", sub="status"),
        _timed("patch", "pods", "b-0001-x7k2p", "kwok/v0.8.0", "03.250000", sub="status"),
        _timed("patch", "pods", "b-0001-x7k2p", "kwok/v0.8.0", "05.250000", sub="status"),
        _timed("update", "jobs", "b-0001", "kube-controller-manager/v1.36.3", "06.000000", sub="status"),
    ]
    here = job_times(lines)
    assert here.submitted == {"default/b-0001": here.submitted["default/b-0001"]}
    assert here.running["default/b-0001"] - here.submitted["default/b-0001"] == 2.75
    assert here.finished["default/b-0001"] - here.submitted["default/b-0001"] == 5.5
    elsewhere = job_times(lines, finish_here=False)
    assert elsewhere.finished == {}
    assert job_of_pod("b-0001-x7k2p") == "b-0001"


def test_the_time_the_apiserver_took_to_serve_each_submit_is_kept() -> None:
    served = json.loads(_timed("create", "jobs", "b-0001", "kubectl/v1.36.3", "00.500000"))
    served["stageTimestamp"] = "2026-11-23T02:00:00.569000Z"
    later = json.loads(_timed("create", "jobs", "b-0001", "kubectl/v1.36.3", "09.000000"))
    later["stageTimestamp"] = "2026-11-23T02:00:10.000000Z"  # a second create of the same name is not the submit
    times = job_times([json.dumps(served), json.dumps(later)])
    assert round(times.create_seconds["default/b-0001"], 3) == 0.069


def test_a_benchmark_times_its_own_burst_only() -> None:
    """The rig's admission-policy probe Job, created while the rig came up, must not start the burst's clock."""
    lines = [
        _timed("create", "jobs", "kfed-rig-policy-probe", "kubectl/v1.36.3", "00.500000"),
        _timed("create", "jobs", "b-0000", "kubectl/v1.36.3", "20.000000"),
        _timed("patch", "pods", "b-0000-x7k2p", "kwok/v0.8.0", "21.000000", sub="status"),
    ]
    burst = job_times(lines).only({"default/b-0000"})
    assert set(burst.submitted) == {"default/b-0000"}
    assert min(burst.submitted.values()) == burst.submitted["default/b-0000"]
    assert burst.running["default/b-0000"] - burst.submitted["default/b-0000"] == 1.0


def test_a_deletecollection_keeps_the_values_its_label_selector_names() -> None:
    uri = (
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads?labelSelector="
        "kueue.x-k8s.io%2Fmultikueue-origin%3Dmultikueue%2Ckfed.io%2Fmanager-workload-uid+in+%28u-1%2Cu-2%29"
    )
    event = {
        "stage": "ResponseComplete",
        "verb": "deletecollection",
        "requestURI": uri,
        "objectRef": {"resource": "workloads", "namespace": "default"},
        "userAgent": "kfed-manager/0.1.0",
        "responseStatus": {"code": 200},
    }
    plain = {**event, "verb": "list", "requestURI": "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=500"}
    found = list(calls([json.dumps(event), json.dumps(plain)]))
    assert [c.verb for c in found] == ["deletecollection", "list"]
    assert found[0].selected("kfed.io/manager-workload-uid") == {"u-1", "u-2"}
    assert found[0].selected("kueue.x-k8s.io/multikueue-origin") == set()  # an equality term, not a set
    assert found[0].selected("uid") == set()  # a label's name is matched whole
    assert found[1].selector == ""
    assert found[1].selected("kfed.io/manager-workload-uid") == set()
