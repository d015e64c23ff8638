"""A MultiKueueConfig's dispatch annotations over kfed-manager's own policy."""

from __future__ import annotations

from typing import Any

import pytest

from manager.decisions.dispatch import DispatchPolicy
from manager.decisions.dispatch_policy import (
    DispatchChoice,
    config_dispatch_choice,
    dispatch_annotation_problem,
    queue_dispatch_choice,
)

MANAGER = DispatchChoice(DispatchPolicy.LEAST_ALLOCATED, 0.5)


def config(**annotations: str) -> dict[str, Any]:
    names = {"policy": "kfed.io/dispatch-policy", "share": "kfed.io/dispatch-large-share"}
    return {
        "metadata": {"name": "c", "annotations": {names[k]: v for k, v in annotations.items()}},
        "spec": {"clusters": ["worker-1"]},
    }


def test_without_annotations_the_managers_policy_applies() -> None:
    assert config_dispatch_choice({"metadata": {"name": "c"}}, default=MANAGER) is MANAGER
    assert dispatch_annotation_problem({"metadata": {"name": "c"}}) is None


def test_each_annotation_overrides_its_own_half() -> None:
    assert config_dispatch_choice(config(policy="BestFit"), default=MANAGER) == DispatchChoice(
        DispatchPolicy.BEST_FIT, 0.5
    )
    assert config_dispatch_choice(config(share="0.1"), default=MANAGER) == DispatchChoice(
        DispatchPolicy.LEAST_ALLOCATED, 0.1
    )
    both = config(policy="Balanced", share="1")
    assert config_dispatch_choice(both, default=MANAGER) == DispatchChoice(DispatchPolicy.BALANCED, 1.0)
    assert dispatch_annotation_problem(both) is None


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({"policy": "Packed"}, "kfed.io/dispatch-policy='Packed' is not one of BestFit, LeastAllocated, Balanced"),
        ({"policy": "bestfit"}, "kfed.io/dispatch-policy='bestfit'"),  # the values are case-sensitive, as the flag's
        ({"share": "0"}, "kfed.io/dispatch-large-share='0' is not a number in (0, 1]"),
        ({"share": "1.5"}, "kfed.io/dispatch-large-share='1.5'"),
        ({"share": "nan"}, "kfed.io/dispatch-large-share='nan'"),
        ({"share": "a quarter"}, "kfed.io/dispatch-large-share='a quarter'"),
    ],
)
def test_an_unreadable_annotation_is_not_applied_and_is_named(annotations: dict[str, str], named: str) -> None:
    bad = config(**annotations)
    assert config_dispatch_choice(bad, default=MANAGER) is MANAGER
    problem = dispatch_annotation_problem(bad)
    assert problem is not None
    assert named in problem
    assert problem.endswith("kfed-manager's own dispatch policy applies instead")


def test_a_readable_half_applies_when_the_other_is_unreadable() -> None:
    mixed = config(policy="BestFit", share="2")
    assert config_dispatch_choice(mixed, default=MANAGER) == DispatchChoice(DispatchPolicy.BEST_FIT, 0.5)
    problem = dispatch_annotation_problem(mixed)
    assert problem is not None
    assert "dispatch-large-share='2'" in problem
    assert "dispatch-policy" not in problem


def test_a_queue_uses_the_config_of_its_first_multikueue_check() -> None:
    checks = {
        "first": {"spec": {"parameters": {"kind": "MultiKueueConfig", "name": "packed"}}},
        "second": {"spec": {"parameters": {"kind": "MultiKueueConfig", "name": "spread"}}},
    }
    configs = {"packed": config(policy="BestFit"), "spread": config(policy="LeastAllocated")}
    choice = queue_dispatch_choice(["first", "second"], admission_checks=checks, configs=configs, default=MANAGER)
    assert choice.policy is DispatchPolicy.BEST_FIT
    choice = queue_dispatch_choice(["second", "first"], admission_checks=checks, configs=configs, default=MANAGER)
    assert choice.policy is DispatchPolicy.LEAST_ALLOCATED
    assert queue_dispatch_choice([], admission_checks=checks, configs=configs, default=MANAGER) is MANAGER
    missing = queue_dispatch_choice(["gone"], admission_checks=checks, configs=configs, default=MANAGER)
    assert missing is MANAGER
