"""Topology (kueue.x-k8s.io/v1beta2): the ordered node labels (block, rack, host) that TAS places pods by."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import KUEUE_GROUP, KUEUE_VERSION, ApiObject, CrdInfo, KubeModel
from federation.api.common import QUALIFIED_NAME
from federation.api.labels import HOSTNAME_LABEL
from federation.api.schema import Crd, Rule


class TopologyLevel(KubeModel):
    node_label: Annotated[StrictStr, Field(min_length=1, max_length=316, pattern=QUALIFIED_NAME)]


def _unique(levels: list[TopologyLevel]) -> bool:
    labels = [level.node_label for level in levels]
    return len(labels) == len(set(labels))


def _hostname_lowest(levels: list[TopologyLevel]) -> bool:
    labels = [level.node_label for level in levels]
    return HOSTNAME_LABEL not in labels or labels[-1] == HOSTNAME_LABEL


TopologyLevels = Annotated[
    list[TopologyLevel],
    Field(min_length=1, max_length=16),
    Crd(
        list_type="atomic",
        rules=(
            Rule("size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0", "must be unique", _unique),
            Rule(
                "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || "
                "self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
                "the kubernetes.io/hostname label can only be used at the lowest level of topology",
                _hostname_lowest,
            ),
        ),
    ),
]


class TopologySpec(KubeModel):
    levels: TopologyLevels

    @property
    def node_labels(self) -> list[str]:
        return [level.node_label for level in self.levels]


class Topology(ApiObject):
    """Topology levels, highest first; kubernetes.io/hostname may only be the lowest."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="Topology",
        plural="topologies",
        short_names=("topo",),
        scope="Cluster",
        categories=("kueue",),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["Topology"] = "Topology"
    spec: TopologySpec
