"""One topology snapshot per TAS ResourceFlavor, kept current from Node and Pod events (no I/O).

Why this module exists: placement, the capacity summary and node-failure replacement all read free capacity per
node and per domain. Rebuilding it from every Node and Pod on each pass would cost a full scan per pass; instead
the agent's watches feed each event into the snapshots here (``federation.topology.TopologySnapshot`` keeps the
per-domain aggregates incremental). A snapshot is rebuilt from the watch caches only when its flavor or Topology
changes (created, deleted, re-created, levels or node labels changed), so a re-created Topology starts from the
nodes and pods as they are now: no double booking, nothing leaked (Kueue #8748, #12545).

Usage in a snapshot = requests of every bound, non-terminal pod on the node (TAS or not, ``pods: 1`` each) plus,
per admitted TAS workload, the pods its assignment places on a node that are not bound there yet ("assumed", under
the key ``namespace/name/podset``). The assumed part is recomputed from the workloads on every admission pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.topology import TopologySnapshot
from worker_agent.decisions.tas_objects import (
    FlavorTopology,
    node_matches,
    node_spec,
    pod_key,
    pod_usage,
)

Obj = Mapping[str, Any]


class TopologyIndex:
    def __init__(self) -> None:
        self.flavors: dict[str, FlavorTopology] = {}
        self.levels: dict[str, tuple[str, ...]] = {}
        """Topology name → levels."""
        self.snapshots: dict[str, TopologySnapshot] = {}
        """TAS flavor name → snapshot of its nodes (only flavors whose Topology exists)."""
        self._config: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {}
        self._assumed: dict[str, dict[str, Mapping[str, Mapping[str, int]]]] = {}
        self.rebuilds = 0

    # -- configuration ----------------------------------------------------------------------------------------

    def configure(
        self,
        flavors: Iterable[FlavorTopology],
        topologies: Mapping[str, tuple[str, ...]],
        *,
        nodes: Iterable[Obj],
        pods: Iterable[Obj],
    ) -> list[str]:
        """Bring the set of snapshots in line with the flavors and Topologies; returns the flavors rebuilt."""
        self.flavors = {flavor.name: flavor for flavor in flavors}
        self.levels = dict(topologies)
        wanted: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {}
        for flavor in self.flavors.values():
            levels = self.levels.get(flavor.topology)
            if levels:
                wanted[flavor.name] = (levels, tuple(sorted(flavor.node_labels.items())))
        for name in list(self.snapshots):
            if name not in wanted:
                del self.snapshots[name]
                self._config.pop(name, None)
                self._assumed.pop(name, None)
        rebuilt = [name for name, config in wanted.items() if self._config.get(name) != config]
        if not rebuilt:
            return []
        node_list, pod_list = list(nodes), list(pods)
        for name in rebuilt:
            levels, _ = wanted[name]
            snapshot = TopologySnapshot(levels)
            flavor = self.flavors[name]
            for node in node_list:
                if node_matches(node, flavor.node_labels):
                    snapshot.upsert_node(node_spec(node))
            for pod in pod_list:
                usage = pod_usage(pod)
                if usage is not None:
                    snapshot.bind_pod(pod_key(pod), usage[0], usage[1])
            self.snapshots[name] = snapshot
            self._config[name] = wanted[name]
            self._assumed[name] = {}
            self.rebuilds += 1
        return rebuilt

    # -- events -----------------------------------------------------------------------------------------------

    def node_event(self, event_type: str, node: Obj) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        for flavor_name, snapshot in self.snapshots.items():
            flavor = self.flavors[flavor_name]
            if event_type == "DELETED" or not node_matches(node, flavor.node_labels):
                snapshot.remove_node(name)
            else:
                snapshot.upsert_node(node_spec(node))

    def pod_event(self, event_type: str, pod: Obj) -> None:
        key = pod_key(pod)
        usage = None if event_type == "DELETED" else pod_usage(pod)
        for snapshot in self.snapshots.values():
            if usage is None:
                snapshot.finish_pod(key)
            else:
                snapshot.bind_pod(key, usage[0], usage[1])

    # -- assumed usage of admitted workloads --------------------------------------------------------------------

    def set_assumed(self, flavor: str, usage: Mapping[str, Mapping[str, Mapping[str, int]]]) -> None:
        """Replace every assumed booking of ``flavor`` by ``usage`` (key → node → amounts)."""
        snapshot = self.snapshots.get(flavor)
        if snapshot is None:
            return
        previous = self._assumed.setdefault(flavor, {})
        for key in set(previous) - set(usage):
            snapshot.forget(key)
        for key, per_node in usage.items():
            if previous.get(key) != per_node:
                snapshot.assume(key, per_node)
        self._assumed[flavor] = dict(usage)

    def assume_now(self, flavor: str, key: str, per_node: Mapping[str, Mapping[str, int]]) -> None:
        """Book a placement made in this pass (the next ``set_assumed`` sees it in the workload's status)."""
        snapshot = self.snapshots.get(flavor)
        if snapshot is not None:
            snapshot.assume(key, per_node)
            self._assumed.setdefault(flavor, {})[key] = per_node
