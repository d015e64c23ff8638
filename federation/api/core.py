"""Kubernetes core/meta structures that Kueue objects embed: Condition, LabelSelector, Taint, Toleration.

Only these small structures are re-declared (with the limits the Kubernetes API publishes for them); large ones
such as PodTemplateSpec are kept as raw mappings by the kinds that embed them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictStr

from federation.api.base import KubeModel
from federation.api.common import QUALIFIED_NAME, Int64, Time
from federation.api.schema import Crd, Rule

ConditionStatus = Literal["True", "False", "Unknown"]
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(KubeModel):
    """metav1.Condition: one observation of an object's state."""

    type: Annotated[StrictStr, Field(max_length=316, pattern=QUALIFIED_NAME)]
    status: ConditionStatus
    observed_generation: Annotated[Int64, Field(ge=0)] | None = None
    last_transition_time: Time
    reason: Annotated[StrictStr, Field(min_length=1, max_length=1024, pattern=CONDITION_REASON)]
    message: Annotated[StrictStr, Field(max_length=32768)]


Conditions = Annotated[list[Condition], Field(max_length=16), Crd(list_type="map", map_keys=("type",))]
"""A conditions list as Kueue declares it: keyed by type, at most 16 entries."""


def find_condition(conditions: list[Condition] | None, type_: str) -> Condition | None:
    for condition in conditions or ():
        if condition.type == type_:
            return condition
    return None


def condition_is_true(conditions: list[Condition] | None, type_: str) -> bool:
    found = find_condition(conditions, type_)
    return found is not None and found.status == "True"


LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(KubeModel):
    key: StrictStr
    operator: LabelSelectorOperator
    values: Annotated[list[StrictStr], Crd(list_type="atomic")] | None = None


class LabelSelector(KubeModel):
    """metav1.LabelSelector. Kueue: null selects nothing, `{}` selects everything."""

    match_labels: dict[str, StrictStr] | None = None
    match_expressions: Annotated[list[LabelSelectorRequirement], Crd(list_type="atomic")] | None = None


class Taint(KubeModel):
    """corev1.Taint."""

    key: StrictStr
    value: StrictStr | None = None
    effect: StrictStr
    time_added: Time | None = None


class Toleration(KubeModel):
    """corev1.Toleration."""

    key: StrictStr | None = None
    operator: StrictStr | None = None
    value: StrictStr | None = None
    effect: StrictStr | None = None
    toleration_seconds: Int64 | None = None


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

TOLERATION_RULES: tuple[Rule, ...] = (
    Rule(
        "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        lambda ts: all(t.key is not None or t.operator == "Exists" for t in ts),
    ),
    Rule(
        "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        lambda ts: all(t.toleration_seconds is None or t.effect == "NoExecute" for t in ts),
    ),
    Rule(
        "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
        "supported toleration values: 'Equal'(default), 'Exists'",
        lambda ts: all(t.operator in (None, "Equal", "Exists") for t in ts),
    ),
    Rule(
        "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
        "a value must be empty when 'operator' is 'Exists'",
        lambda ts: all(not (t.operator == "Exists" and t.value is not None) for t in ts),
    ),
    Rule(
        "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        lambda ts: all(t.effect is None or t.effect in TAINT_EFFECTS for t in ts),
    ),
)
"""The checks Kueue puts on every tolerations list it accepts (ResourceFlavor, PodSetUpdate)."""

Tolerations = Annotated[list[Toleration], Field(max_length=8), Crd(list_type="atomic", rules=TOLERATION_RULES)]
