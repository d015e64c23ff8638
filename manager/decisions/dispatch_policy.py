"""Which worker-selection policy a ClusterQueue's workloads are dispatched with.

kfed-manager has one policy for every queue (``--dispatch-policy``, ``--dispatch-large-share``, the chart's
``manager.dispatchPolicy`` and ``manager.dispatchLargeShare``). A MultiKueueConfig may set its own with the
annotations :data:`DISPATCH_POLICY_ANNOTATION` and :data:`DISPATCH_LARGE_SHARE_ANNOTATION`: Kueue's
MultiKueueConfig has no field for it, and stock Kueue ignores annotations, so the same manifest serves both. Each
annotation overrides its own half of the manager's policy. A ClusterQueue's workloads use the policy of the
MultiKueueConfig named by its first MultiKueue AdmissionCheck.

An annotation kfed cannot read is not applied: that half of the manager's policy stays in force, and
:func:`dispatch_annotation_problem` says why, for the AdmissionChecks' ``Active`` message, an Event on the
MultiKueueConfig and a log line (``manager.admission_check_status``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from manager.decisions.dispatch import DEFAULT_LARGE_SHARE, DispatchPolicy

DISPATCH_POLICY_ANNOTATION = "kfed.io/dispatch-policy"
DISPATCH_LARGE_SHARE_ANNOTATION = "kfed.io/dispatch-large-share"
INVALID_DISPATCH_POLICY_REASON = "InvalidDispatchPolicy"


@dataclass(frozen=True, slots=True)
class DispatchChoice:
    policy: DispatchPolicy = DispatchPolicy.BALANCED
    large_share: float = DEFAULT_LARGE_SHARE


MANAGER_DISPATCH_DEFAULT = DispatchChoice()
"""kfed-manager's policy when its flags do not set one."""


def _annotations(config: Mapping[str, Any]) -> Mapping[str, Any]:
    return (config.get("metadata") or {}).get("annotations") or {}


def _policy(text: Any) -> DispatchPolicy | str:
    try:
        return DispatchPolicy(text)
    except ValueError:
        allowed = ", ".join(p.value for p in DispatchPolicy)
        return f"{DISPATCH_POLICY_ANNOTATION}={text!r} is not one of {allowed}"


def large_share(text: Any) -> float | None:
    """``text`` as a large share (a number above 0 and at most 1), None when it is not one (the annotation's rule
    and ``--dispatch-large-share``'s)."""
    try:
        share = float(text)
    except (TypeError, ValueError):
        return None
    return share if 0.0 < share <= 1.0 else None  # NaN fails this too


def _read(config: Mapping[str, Any], default: DispatchChoice) -> tuple[DispatchChoice, list[str]]:
    annotations = _annotations(config)
    policy, share, problems = default.policy, default.large_share, []
    if DISPATCH_POLICY_ANNOTATION in annotations:
        parsed = _policy(annotations[DISPATCH_POLICY_ANNOTATION])
        if isinstance(parsed, DispatchPolicy):  # a StrEnum: tested first
            policy = parsed
        else:
            problems.append(parsed)
    if DISPATCH_LARGE_SHARE_ANNOTATION in annotations:
        text = annotations[DISPATCH_LARGE_SHARE_ANNOTATION]
        read = large_share(text)
        if read is None:
            problems.append(f"{DISPATCH_LARGE_SHARE_ANNOTATION}={text!r} is not a number in (0, 1]")
        else:
            share = read
    if (policy, share) == (default.policy, default.large_share):
        return default, problems
    return DispatchChoice(policy, share), problems


def config_dispatch_choice(config: Mapping[str, Any], *, default: DispatchChoice) -> DispatchChoice:
    """The policy ``config``'s workloads are dispatched with: its readable annotations over ``default``."""
    return _read(config, default)[0]


def dispatch_annotation_problem(config: Mapping[str, Any]) -> str | None:
    """Why ``config``'s dispatch annotations are (partly) not applied, or None when they are (or there are none)."""
    problems = _read(config, MANAGER_DISPATCH_DEFAULT)[1]
    if not problems:
        return None
    return "; ".join(problems) + ": kfed-manager's own dispatch policy applies instead"


def queue_dispatch_choice(
    check_names: Sequence[str],
    *,
    admission_checks: Mapping[str, Mapping[str, Any]],
    configs: Mapping[str, Mapping[str, Any]],
    default: DispatchChoice,
) -> DispatchChoice:
    """The policy for a ClusterQueue whose MultiKueue AdmissionChecks are ``check_names`` (in its order)."""
    if not check_names:
        return default
    check = admission_checks.get(check_names[0]) or {}
    name = str(((check.get("spec") or {}).get("parameters") or {}).get("name", ""))
    config = configs.get(name)
    return default if config is None else config_dispatch_choice(config, default=default)
