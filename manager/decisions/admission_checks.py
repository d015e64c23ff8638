"""Whether a MultiKueue AdmissionCheck is usable, as Kueue reports it in the check's ``Active`` condition.

Active when its parameters name an existing MultiKueueConfig and at least one of that config's clusters is
connected; otherwise inactive with a reason and a message naming what is missing or which clusters fail and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.protocol import MULTIKUEUE_CONTROLLER


@dataclass(frozen=True, slots=True)
class CheckVerdict:
    active: bool
    reason: str
    message: str


def multikueue_check_verdict(
    check: Mapping[str, Any],
    *,
    configs: Mapping[str, Mapping[str, Any]],
    cluster_problems: Mapping[str, str],
) -> CheckVerdict | None:
    """The ``Active`` condition for ``check``; None when the check belongs to another controller."""
    spec = check.get("spec") or {}
    if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
        return None
    params = spec.get("parameters") or {}
    if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != "MultiKueueConfig":
        return CheckVerdict(False, "BadParametersRef", "parameters must reference a kueue.x-k8s.io MultiKueueConfig")
    config = configs.get(str(params.get("name", "")))
    if config is None:
        return CheckVerdict(False, "BadConfig", f"MultiKueueConfig {params.get('name')} not found")
    clusters = list((config.get("spec") or {}).get("clusters") or ())
    failing = {name: cluster_problems[name] for name in clusters if name in cluster_problems}
    if len(failing) == len(clusters):
        detail = "; ".join(f"{name}: {problem}" for name, problem in failing.items())
        return CheckVerdict(False, "NoUsableClusters", f"no usable worker cluster ({detail})")
    if failing:
        names = ", ".join(sorted(failing))
        return CheckVerdict(True, "SomeActiveClusters", f"the admission check is active; inactive clusters: {names}")
    return CheckVerdict(True, "Active", "the admission check is active")
