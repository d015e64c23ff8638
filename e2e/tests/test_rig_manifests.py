import yaml

from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION, render_stages
from e2e.rig.nodes import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL, NodeShape, node_manifests


def test_nodes_are_grouped_into_racks_and_blocks() -> None:
    nodes = node_manifests("worker-1", NodeShape(count=6, hosts_per_rack=2, racks_per_block=2))
    labels = [n["metadata"]["labels"] for n in nodes]
    assert [lab[RACK_LABEL] for lab in labels] == [
        "worker-1-b0-r0",
        "worker-1-b0-r0",
        "worker-1-b0-r1",
        "worker-1-b0-r1",
        "worker-1-b1-r0",
        "worker-1-b1-r0",
    ]
    assert {lab[BLOCK_LABEL] for lab in labels} == {"worker-1-b0", "worker-1-b1"}
    assert all(lab[HOSTNAME_LABEL] == n["metadata"]["name"] for lab, n in zip(labels, nodes, strict=True))
    assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "4"


def test_stages_parse_and_cover_nodes_and_pods() -> None:
    docs = list(yaml.safe_load_all(render_stages(job_seconds=2.5)))
    kinds = {(d["spec"]["resourceRef"]["kind"], d["metadata"]["name"]) for d in docs}
    assert {k for k, _ in kinds} == {"Node", "Pod"}
    complete = next(d for d in docs if d["metadata"]["name"] == "kfed-pod-job-complete")
    assert complete["spec"]["delay"]["durationMilliseconds"] == 2500
    assert "phase: Succeeded" in complete["spec"]["next"]["statusTemplate"]
    failing = next(d for d in docs if d["metadata"]["name"] == "kfed-pod-job-fail")
    assert failing["spec"]["delay"] == complete["spec"]["delay"]
    assert "phase: Failed" in failing["spec"]["next"]["statusTemplate"]
    assert f'index $.metadata.annotations "{EXIT_CODE_ANNOTATION}"' in failing["spec"]["next"]["statusTemplate"]
    selects = f'.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'
    (on_complete,) = [e for e in complete["spec"]["selector"]["matchExpressions"] if e["key"] == selects]
    (on_fail,) = [e for e in failing["spec"]["selector"]["matchExpressions"] if e["key"] == selects]
    assert (on_complete["operator"], on_fail["operator"]) == ("DoesNotExist", "Exists"), "one stage per pod"


def test_a_refused_call_is_told_from_a_port_or_a_timestamp() -> None:
    from e2e.rig.from_charts import refused

    assert refused('{"error": "403 Forbidden: workloads is forbidden: User ...", "event": "reconcile failed"}')
    assert refused('{"status": 403, "event": "x"}')
    assert not refused('{"health_port": 40333, "metrics_port": 40333, "event": "agent.listening"}')
    assert not refused('{"ts": "2026-11-23T02:57:55.403147Z", "event": "x"}')
    terminating = (
        '{"error": "403 Forbidden: events.events.k8s.io \\"x\\" is forbidden: unable to create new content in '
        'namespace doomed because it is being terminated", "event": "event.dropped"}'
    )
    assert not refused(terminating), "a namespace being deleted is not kfed's permissions"


def test_a_line_quoting_a_workers_refused_pod_creation_is_not_kfeds_refusal() -> None:
    from e2e.rig.from_charts import refused

    quoted = (
        '{"message": "Error creating: pods \\"a-\\" is forbidden: error looking up service account ns/x", '
        '"event": "agent.pods_not_created", "level": "warning"}'
    )
    assert not refused(quoted)
    assert refused(quoted.replace("agent.pods_not_created", "reconcile failed"))
