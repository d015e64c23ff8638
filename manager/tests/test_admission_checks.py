from manager.decisions.admission_checks import CheckVerdict, multikueue_check_verdict

CONFIGS = {"kfed": {"spec": {"clusters": ["worker-1", "worker-2"]}}}


def check(controller: str = "kueue.x-k8s.io/multikueue", config: str = "kfed") -> dict[str, object]:
    return {
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config},
        }
    }


def test_active_when_a_cluster_is_usable() -> None:
    assert multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={}) == CheckVerdict(
        True, "Active", "the admission check is active"
    )
    partial = multikueue_check_verdict(check(), configs=CONFIGS, cluster_problems={"worker-2": "BadConfig: x"})
    assert partial is not None
    assert partial.active
    assert "worker-2" in partial.message


def test_inactive_with_reasons() -> None:
    none_usable = multikueue_check_verdict(
        check(), configs=CONFIGS, cluster_problems={"worker-1": "not connected", "worker-2": "BadConfig: no Secret"}
    )
    assert none_usable == CheckVerdict(
        False, "NoUsableClusters", "no usable worker cluster (worker-1: not connected; worker-2: BadConfig: no Secret)"
    )
    missing = multikueue_check_verdict(check(config="nope"), configs=CONFIGS, cluster_problems={})
    assert missing == CheckVerdict(False, "BadConfig", "MultiKueueConfig nope not found")


def test_other_controllers_are_not_ours() -> None:
    assert multikueue_check_verdict(check(controller="example.com/other"), configs=CONFIGS, cluster_problems={}) is None
