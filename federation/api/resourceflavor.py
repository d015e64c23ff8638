"""ResourceFlavor (kueue.x-k8s.io/v1beta2): a kind of node (labels, taints), optionally topology-aware."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import KUEUE_GROUP, KUEUE_VERSION, ApiObject, CrdInfo, KubeModel
from federation.api.common import TopologyReference
from federation.api.core import TAINT_EFFECTS, Taint, Tolerations
from federation.api.schema import Crd, Rule

NodeTaints = Annotated[
    list[Taint],
    Field(max_length=8),
    Crd(
        list_type="atomic",
        rules=(
            Rule(
                "self.all(x, x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
                "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
                lambda taints: all(t.effect in TAINT_EFFECTS for t in taints),
            ),
        ),
    ),
]


class ResourceFlavorSpec(KubeModel):
    __crd_rules__ = (
        Rule(
            "!has(self.topologyName) || self.nodeLabels.size() >= 1",
            "at least one nodeLabel is required when topology is set",
            lambda s: s.topology_name is None or bool(s.node_labels),
        ),
        # Kueue v0.20: nodeLabels and tolerations may change on a TAS flavor; its topology and taints may not.
        Rule(
            "!has(oldSelf.topologyName) || (has(self.topologyName) && self.topologyName == oldSelf.topologyName && "
            "(has(self.nodeTaints) ? has(oldSelf.nodeTaints) && self.nodeTaints == oldSelf.nodeTaints "
            ": !has(oldSelf.nodeTaints)))",
            "topologyName and nodeTaints are immutable when topologyName is set",
        ),
    )

    node_labels: Annotated[dict[str, StrictStr], Field(max_length=8), Crd(map_type="atomic")] | None = None
    node_taints: NodeTaints | None = None
    tolerations: Tolerations | None = None
    topology_name: TopologyReference | None = None

    @property
    def is_tas(self) -> bool:
        return self.topology_name is not None


class ResourceFlavor(ApiObject):
    """A flavor of resources: the nodes it maps to and, for topology-aware scheduling, their Topology."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="ResourceFlavor",
        plural="resourceflavors",
        scope="Cluster",
        short_names=("flavor", "flavors", "rf"),
        categories=("kueue",),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["ResourceFlavor"] = "ResourceFlavor"
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)
