"""`--config FILE` on both binaries: Kueue's Configuration sets the flags' defaults, an explicit flag wins, an
invalid value stops the start naming the field and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.app import parse_args as manager_args
from worker_agent.app import parse_args as agent_args

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: team-system
health:
  healthProbeBindAddress: 127.0.0.1:9081
clientConnection:
  qps: 50
  burst: 100
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
multiKueue:
  gcInterval: 30s
  workerLostTimeout: 5m
"""


def test_the_manager_takes_its_settings_from_the_file_and_explicit_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    args = manager_args([f"--config={path}", "--burst=7"])
    assert (args.namespace, args.qps, args.burst) == ("team-system", 50.0, 7)
    assert (args.health_port, args.bind_address) == (9081, "127.0.0.1")
    assert (args.gc_interval, args.worker_lost_timeout) == (30.0, 300.0)
    assert args.config_warnings == [
        "leaderElection.resourceName: not supported by kfed, ignored "
        "(kfed's Lease is named after the binary (kfed-manager / kfed-agent))"
    ]
    assert manager_args([]).qps == 300.0, "without a file, the flags' own defaults"


def test_the_agent_reads_the_same_file_and_names_what_it_does_not_use(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    args = agent_args([f"--config={path}", "--cluster-name=w1"])
    assert (args.namespace, args.qps, args.burst, args.health_port) == ("team-system", 50.0, 100, 9081)
    assert "multiKueue.gcInterval: not used by kfed-agent, ignored" in args.config_warnings


def test_an_invalid_file_stops_the_start_naming_field_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace("qps: 50", "qps: lots"))
    with pytest.raises(SystemExit) as exited:
        manager_args([f"--config={path}"])
    assert exited.value.code == 2
    assert "clientConnection.qps: 'lots' is not a number" in capsys.readouterr().err


def test_fair_sharing_from_the_file_reaches_the_manager_flags(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n")
    args = manager_args([f"--config={path}"])
    assert (args.fair_sharing, args.fair_sharing_preemption_strategies) == (True, ("LessThanInitialShare",))
    assert manager_args([f"--config={path}", "--no-fair-sharing"]).fair_sharing is False
    default = manager_args([])
    assert (default.fair_sharing, default.fair_sharing_preemption_strategies) == (
        False,
        ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    )


def test_fair_sharing_from_the_file_reaches_the_agents_admission(tmp_path: Path) -> None:
    """A worker's Kueue configuration with fair sharing keeps it under kfed-agent (its local admission and its
    ClusterQueues' weighted share)."""
    from federation.obs.config_file import cycle_config

    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n")
    args = agent_args(["--cluster-name=w", f"--config={path}"])
    assert (args.fair_sharing, args.fair_sharing_preemption_strategies) == (True, ("LessThanInitialShare",))
    assert "fairSharing" not in " ".join(args.config_warnings)
    config = cycle_config(args)
    assert config.fair_sharing
    assert len(config.fair_sharing_strategies) == 1
    assert cycle_config(agent_args(["--cluster-name=w"])).fair_sharing is False


def test_an_unknown_preemption_strategy_list_stops_the_manager(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        manager_args(["--fair-sharing-preemption-strategies=LessThanInitialShare,LessThanOrEqualToFinalShare"])
    assert "is not one of Kueue's preemption strategy lists" in capsys.readouterr().err


def test_resources_from_the_file_reach_both_binaries_rules(tmp_path: Path) -> None:
    from federation.admission.api_workloads import ResourceRules

    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "resources:\n  excludeResourcePrefixes: [example.com/]\n")
    expected = ResourceRules(exclude_prefixes=("example.com/",))
    assert manager_args([f"--config={path}"]).resource_rules == expected
    assert agent_args([f"--config={path}", "--cluster-name=w1"]).resource_rules == expected
    assert manager_args(["--quota-check-strategy=IgnoreUndeclared"]).resource_rules == ResourceRules(
        ignore_undeclared=True
    )
    assert manager_args([]).resource_rules == ResourceRules()


def test_excluded_prefixes_with_ignore_undeclared_stop_the_start(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        agent_args(["--cluster-name=w1", "--quota-check-strategy=IgnoreUndeclared", "--exclude-resource-prefixes=x/"])
    assert "not allowed with --quota-check-strategy IgnoreUndeclared" in capsys.readouterr().err


def test_block_admission_and_recovery_from_the_file_reach_both_binaries(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "waitForPodsReady:\n  timeout: 2m\n  blockAdmission: true\n")
    for args in (manager_args([f"--config={path}"]), agent_args([f"--config={path}", "--cluster-name=w1"])):
        assert args.wait_for_pods_ready_block_admission is True
        assert (args.wait_for_pods_ready_timeout, args.wait_for_pods_ready_recovery_timeout) == (120.0, 120.0)
    assert not any("blockAdmission" in w for w in agent_args([f"--config={path}", "--cluster-name=w1"]).config_warnings)
    assert (
        manager_args(
            [f"--config={path}", "--no-wait-for-pods-ready-block-admission"]
        ).wait_for_pods_ready_block_admission
        is False
    )


def test_jobs_without_queue_name_settings_from_the_file_reach_the_manager(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "manageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector:\n  matchLabels: {a: b}\n")
    args = manager_args([f"--config={path}"])
    assert args.manage_jobs_without_queue_name is True
    assert args.managed_jobs_namespace_selector == {"matchLabels": {"a": "b"}, "matchExpressions": []}
    assert manager_args([]).managed_jobs_namespace_selector is None


def test_the_job_copy_timeout_comes_from_the_flag_or_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG + "  jobCopyTimeout: 2m\n")
    assert agent_args(["--cluster-name=w1"]).job_copy_timeout == 60.0
    assert agent_args(["--cluster-name=w1", "--job-copy-timeout=3"]).job_copy_timeout == 3.0
    assert agent_args([f"--config={path}", "--cluster-name=w1"]).job_copy_timeout == 120.0
    assert agent_args([f"--config={path}", "--cluster-name=w1", "--job-copy-timeout=5"]).job_copy_timeout == 5.0
    assert (
        "multiKueue.jobCopyTimeout: not used by kfed-manager, ignored"
        in manager_args([f"--config={path}"]).config_warnings
    )


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_job_copy_timeout_that_is_not_positive_stops_the_agent(value: str) -> None:
    with pytest.raises(SystemExit):
        agent_args(["--cluster-name=w1", f"--job-copy-timeout={value}"])


@pytest.mark.parametrize("share", ["0", "1.5", "-0.25", "a quarter"])
def test_a_dispatch_large_share_outside_0_to_1_stops_the_start(share: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        manager_args([f"--dispatch-large-share={share}"])
    assert exited.value.code == 2
    assert f"argument --dispatch-large-share: {share!r} is not" in capsys.readouterr().err
    assert manager_args(["--dispatch-large-share=1"]).dispatch_large_share == 1.0
