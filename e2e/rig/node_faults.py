"""Node failures on demand for the rig's kwok nodes: NotReady (and back), taints, deletion (and back).

Why this module exists: the agent's node-failure handling must be shown on real nodes, through the same
signals a kubelet and the node lifecycle controller give. kwok plays kubelet only for nodes carrying
``kfed.io/kwok-node=true`` (``--manage-nodes-with-label-selector``), so:

* NotReady: drop that label (kwok stops heart-beating the node and leaves its pods alone), then report
  ``Ready=False`` in the node's status, as a kubelet that lost its runtime would;
* Ready again: put the label back; kwok's initialize stage reports ``Ready=True`` at once;
* taint / untaint: ``spec.taints`` (the taint-eviction controller evicts pods that do not tolerate NoExecute);
* delete / restore: delete the Node object, and re-create it from the rig's manifest.

Only the kwok label is touched: the ResourceFlavors of the rig select nodes by ``type: kwok``, so a NotReady
node stays a member of its flavor and its topology, as a real one would.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

from e2e.rig.nodes import KWOK_NODE_LABEL, node_manifests

if TYPE_CHECKING:
    from e2e.rig.federation import Federation


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_not_ready(fed: Federation, worker: str, node: str) -> None:
    """``node`` stops being managed by kwok and reports ``Ready=False`` (reason KubeletNotReady)."""
    fed.kubectl(worker, "label", "node", node, f"{KWOK_NODE_LABEL}-")
    now = _now()
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "container runtime is down (kfed rig)",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ]
        }
    }
    fed.kubectl(worker, "patch", "node", node, "--subresource=status", "-p", json.dumps(status))


def make_ready(fed: Federation, worker: str, node: str) -> None:
    """kwok manages ``node`` again and reports it ``Ready=True``."""
    fed.kubectl(worker, "label", "node", node, f"{KWOK_NODE_LABEL}=true", "--overwrite")


def taint(fed: Federation, worker: str, node: str, key: str, *, value: str = "x", effect: str = "NoExecute") -> None:
    fed.kubectl(worker, "taint", "node", node, f"{key}={value}:{effect}", "--overwrite")


def untaint(fed: Federation, worker: str, node: str, key: str, *, effect: str = "NoExecute") -> None:
    fed.kubectl(worker, "taint", "node", node, f"{key}:{effect}-", check=False)


def delete_node(fed: Federation, worker: str, *nodes: str) -> None:
    """Delete ``nodes`` in one request each, sent together (one kubectl call), so they fail at once."""
    fed.kubectl(worker, "delete", "node", *nodes, "--wait=true")


def restore_node(fed: Federation, worker: str, node: str) -> None:
    """Re-create a deleted node from the rig's manifest (no-op for a node that exists)."""
    manifest = next(m for m in node_manifests(worker, fed.spec.shape(worker)) if m["metadata"]["name"] == node)
    fed.kubectl(worker, "apply", "-f", "-", input=json.dumps(manifest))


def node_ready(fed: Federation, worker: str, node: str) -> bool | None:
    """True/False from the Ready condition; None when the node does not exist."""
    result = fed.kubectl(worker, "get", "node", node, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    for condition in json.loads(result.stdout)["status"].get("conditions") or ():
        if condition["type"] == "Ready":
            return bool(condition["status"] == "True")
    return False
