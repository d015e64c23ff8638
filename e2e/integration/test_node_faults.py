"""The rig can fail its kwok nodes the ways the agent must handle: NotReady and back, NoExecute taints, deletion
and re-creation; and it installs a Topology with a TAS ResourceFlavor that matches the nodes' labels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import TAS_FLAVOR, TOPOLOGY, TOPOLOGY_LEVELS, apply_tas_queues
from e2e.rig import node_faults
from e2e.rig.federation import Federation
from e2e.waiting import wait_for

pytestmark = pytest.mark.integration

WORKER = "worker-1"


def _node(rig: Federation, name: str) -> dict[str, Any] | None:
    result = rig.kubectl(WORKER, "get", "node", name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def test_a_node_goes_not_ready_and_comes_back(rig: Federation) -> None:
    node = f"{WORKER}-b0-r0-h0"
    node_faults.make_not_ready(rig, WORKER, node)
    try:
        wait_for(
            lambda: node_faults.node_ready(rig, WORKER, node),
            until=lambda ready: ready is False,
            timeout=10,
            what=f"{node} NotReady",
        )
    finally:
        node_faults.make_ready(rig, WORKER, node)
    wait_for(
        lambda: node_faults.node_ready(rig, WORKER, node),
        until=lambda ready: ready is True,
        timeout=30,
        what=f"{node} Ready again",
    )


def test_a_node_is_tainted_deleted_and_restored(rig: Federation) -> None:
    node = f"{WORKER}-b0-r0-h1"
    node_faults.taint(rig, WORKER, node, "example.com/broken")
    taints = (_node(rig, node) or {}).get("spec", {}).get("taints")
    assert {"key": "example.com/broken", "value": "x", "effect": "NoExecute"} in taints
    node_faults.untaint(rig, WORKER, node, "example.com/broken")
    assert not (_node(rig, node) or {}).get("spec", {}).get("taints")
    node_faults.delete_node(rig, WORKER, node)
    assert _node(rig, node) is None
    node_faults.restore_node(rig, WORKER, node)
    wait_for(
        lambda: node_faults.node_ready(rig, WORKER, node),
        until=lambda ready: ready is True,
        timeout=30,
        what=f"{node} re-created and Ready",
    )


def test_tas_queues_install_a_topology_and_a_flavor_matching_the_nodes(rig: Federation) -> None:
    apply_tas_queues(rig)
    topology = json.loads(rig.kubectl(WORKER, "get", "topologies.kueue.x-k8s.io", TOPOLOGY, "-o", "json").stdout)
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(TOPOLOGY_LEVELS)
    flavor = json.loads(rig.kubectl(WORKER, "get", "resourceflavors.kueue.x-k8s.io", TAS_FLAVOR, "-o", "json").stdout)
    assert flavor["spec"]["topologyName"] == TOPOLOGY
    selector = ",".join(f"{key}={value}" for key, value in flavor["spec"]["nodeLabels"].items())
    nodes = json.loads(rig.kubectl(WORKER, "get", "nodes", "-l", selector, "-o", "json").stdout)["items"]
    assert len(nodes) == rig.spec.shape(WORKER).count
    for node in nodes:
        assert set(TOPOLOGY_LEVELS) <= node["metadata"]["labels"].keys()
