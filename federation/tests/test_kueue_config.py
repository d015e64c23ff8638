import pytest

from federation.kueue_config import Component, ConfigError, go_duration, read_configuration

HEAD = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"

# The shape of the file Kueue ships (config/components/manager/controller_manager_config.yaml), v1beta2.
SHIPPED = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Workload.kueue.x-k8s.io: 5
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
"""


def test_the_shipped_file_is_accepted_and_what_kfed_ignores_is_named() -> None:
    settings = read_configuration(SHIPPED, component="manager")
    assert settings.defaults == {
        "health_port": 8081,
        "metrics_port": 8443,
        "bind_address": "0.0.0.0",
        "leader_elect": True,
        "qps": 50.0,
        "burst": 100,
    }
    warned = "\n".join(settings.warnings)
    for field in ("webhook", "leaderElection.resourceName", "controller"):
        assert f"{field}: not supported by kfed" in warned
    assert "integrations.frameworks: only batch/job is supported; ignored: kubeflow.org/mpijob, ray.io/rayjob" in warned
    assert len(settings.warnings) == 4, settings.warnings


def test_multikueue_and_wait_for_pods_ready_reach_the_manager_flags() -> None:
    text = """
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kfed-system
multiKueue:
  gcInterval: 1m30s
  origin: team-a
  workerLostTimeout: 15m
visibilityServer:
  bindPort: 8082
waitForPodsReady:
  enable: true
  recoveryTimeout: 3m
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 5
    backoffBaseSeconds: 10
    backoffMaxSeconds: 600
"""
    manager = read_configuration(text, component="manager")
    assert manager.defaults == {
        "namespace": "kfed-system",
        "gc_interval": 90.0,
        "origin": "team-a",
        "worker_lost_timeout": 900.0,
        "wait_for_pods_ready_timeout": 300.0,  # Kueue's default once enabled
        "wait_for_pods_ready_recovery_timeout": 180.0,
        "wait_for_pods_ready_block_admission": True,  # v1beta1: Kueue defaults it to enable
        "requeuing_backoff_limit_count": 5,
        "requeuing_backoff_base_seconds": 10.0,
        "requeuing_backoff_max_seconds": 600.0,
        "visibility_port": 8082,
    }
    assert manager.warnings == []
    agent = read_configuration(text, component="agent")
    assert agent.defaults == {  # waitForPodsReady, blockAdmission included
        "namespace": "kfed-system",
        "wait_for_pods_ready_timeout": 300.0,
        "wait_for_pods_ready_recovery_timeout": 180.0,
        "wait_for_pods_ready_block_admission": True,
        "requeuing_backoff_limit_count": 5,
        "requeuing_backoff_base_seconds": 10.0,
        "requeuing_backoff_max_seconds": 600.0,
    }
    assert "multiKueue.origin: not used by kfed-agent, ignored" in agent.warnings
    assert "visibilityServer.bindPort: not used by kfed-agent, ignored" in agent.warnings
    blocking = read_configuration(HEAD + "waitForPodsReady: {timeout: 1m, blockAdmission: true}\n", component="agent")
    assert blocking.warnings == []
    assert blocking.defaults["wait_for_pods_ready_block_admission"] is True


def test_a_disabled_wait_for_pods_ready_sets_nothing() -> None:
    text = HEAD + "waitForPodsReady: {enable: false, timeout: 1m}"
    assert read_configuration(text, component="manager").defaults == {}


def test_unsupported_fields_are_named() -> None:
    text = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
admissionFairSharing: {usageHalfLifeTime: 1h}
featureGates: {TopologyAwareScheduling: true}
"""
    warnings = read_configuration(text, component="manager").warnings
    assert warnings == [
        "admissionFairSharing.usageHalfLifeTime: not supported by kfed, ignored",
        "featureGates.TopologyAwareScheduling: not supported by kfed, ignored",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("apiVersion: v1\nkind: ConfigMap", "is not Kueue's Configuration"),
        ("[1, 2]", "not a YAML mapping"),
        (
            HEAD + "clientConnection: {qps: fast}",
            "qps: 'fast'",
        ),
        (HEAD + "clientConnection: {burst: 0}", "burst: 0"),
        (HEAD + "health: {healthProbeBindAddress: x}", "x"),
        (HEAD + "multiKueue: {gcInterval: 1d}", "1d"),
    ],
)
def test_an_invalid_value_names_the_field_and_the_value(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        read_configuration(text, component="manager")


def test_the_job_copy_timeout_is_the_agents_and_must_be_positive() -> None:
    assert read_configuration(HEAD + "multiKueue: {jobCopyTimeout: 90s}", component="agent").defaults == {
        "job_copy_timeout": 90.0
    }
    with pytest.raises(ConfigError, match=r"multiKueue\.jobCopyTimeout: '0s' must be longer than 0s"):
        read_configuration(HEAD + "multiKueue: {jobCopyTimeout: 0s}", component="agent")


@pytest.mark.parametrize(("text", "seconds"), [("1m0s", 60), ("300ms", 0.3), ("1h2m3.5s", 3723.5), ("0", 0)])
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text, "x") == pytest.approx(seconds)


def test_workload_retention_reaches_the_manager() -> None:
    text = HEAD + "objectRetentionPolicies:\n  workloads:\n    afterFinished: 1h\n    afterDeactivatedByKueue: 0s\n"
    assert read_configuration(text, component="manager").defaults == {
        "workload_retention_after_finished": 3600.0,
        "workload_retention_after_deactivated_by_kueue": 0.0,
    }


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        # v1beta2: the section's presence turns fair sharing on; the strategies are required.
        (
            HEAD + "fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n",
            {"fair_sharing": True, "fair_sharing_preemption_strategies": "LessThanInitialShare"},
        ),
        # v1beta1: enable: true turns it on, with Kueue's two strategies by default.
        (
            HEAD.replace("v1beta2", "v1beta1") + "fairSharing: {enable: true}\n",
            {
                "fair_sharing": True,
                "fair_sharing_preemption_strategies": "LessThanOrEqualToFinalShare,LessThanInitialShare",
            },
        ),
        (HEAD.replace("v1beta2", "v1beta1") + "fairSharing: {enable: false, preemptionStrategies: [x]}\n", {}),
        (HEAD + "fairSharing: null\n", {}),
    ],
)
@pytest.mark.parametrize("component", ["manager", "agent"])
def test_fair_sharing_reaches_the_manager_and_the_agent(
    section: str, expected: dict[str, object], component: Component
) -> None:
    settings = read_configuration(section, component=component)
    assert (settings.defaults, settings.warnings) == (expected, [])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEAD + "fairSharing: {}\n", "fairSharing.preemptionStrategies: must be specified"),
        (
            HEAD + "fairSharing: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\n",
            "fairSharing.preemptionStrategies: .*LessThanInitialShare', 'LessThanOrEqualToFinalShare'.* not supported",
        ),
        (HEAD + "fairSharing: {preemptionStrategies: Fastest}\n", "'Fastest' is not supported"),
    ],
)
def test_an_invalid_fair_sharing_section_stops_the_start(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        read_configuration(text, component="manager")


def test_resources_reach_both_binaries() -> None:
    text = HEAD + "resources:\n  excludeResourcePrefixes: [example.com/, networking.example/]\n"
    for component in ("manager", "agent"):
        settings = read_configuration(text, component=component)
        assert settings.defaults == {"exclude_resource_prefixes": "example.com/,networking.example/"}
        assert settings.warnings == []
    strategy = read_configuration(HEAD + "resources: {quotaCheckStrategy: IgnoreUndeclared}\n", component="agent")
    assert strategy.defaults == {"quota_check_strategy": "IgnoreUndeclared"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (HEAD + "resources: {quotaCheckStrategy: Lenient}\n", "resources.quotaCheckStrategy: 'Lenient'"),
        (HEAD + "resources: {excludeResourcePrefixes: example.com/}\n", "resources.excludeResourcePrefixes"),
        (
            HEAD + "resources: {quotaCheckStrategy: IgnoreUndeclared, excludeResourcePrefixes: [x/]}\n",
            "does not allow resources.excludeResourcePrefixes",
        ),
    ],
)
def test_an_invalid_resources_section_stops_the_start(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        read_configuration(text, component="manager")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # v1beta2: the recovery timeout defaults to the timeout, blockAdmission to false.
        (
            HEAD + "waitForPodsReady: {timeout: 1m}\n",
            {
                "wait_for_pods_ready_timeout": 60.0,
                "wait_for_pods_ready_recovery_timeout": 60.0,
                "wait_for_pods_ready_block_admission": False,
            },
        ),
        (
            HEAD + "waitForPodsReady: {timeout: 1m, blockAdmission: true, recoveryTimeout: 0s}\n",
            {
                "wait_for_pods_ready_timeout": 60.0,
                "wait_for_pods_ready_recovery_timeout": 0.0,
                "wait_for_pods_ready_block_admission": True,
            },
        ),
        # v1beta1: enable is false unless set.
        (HEAD.replace("v1beta2", "v1beta1") + "waitForPodsReady: {timeout: 1m, blockAdmission: true}\n", {}),
    ],
)
def test_wait_for_pods_ready_defaults_are_kueues(text: str, expected: dict[str, object]) -> None:
    assert read_configuration(text, component="manager").defaults == expected


def test_jobs_without_queue_name_settings_reach_the_manager() -> None:
    import json

    text = HEAD + (
        "manageJobsWithoutQueueName: true\n"
        "managedJobsNamespaceSelector:\n"
        "  matchExpressions:\n"
        "  - {key: team, operator: In, values: [a, b]}\n"
    )
    settings = read_configuration(text, component="manager")
    assert settings.warnings == []
    assert settings.defaults["manage_jobs_without_queue_name"] is True
    assert json.loads(settings.defaults["managed_jobs_namespace_selector"]) == {
        "matchLabels": {},
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}],
    }
    agent = read_configuration(text, component="agent")
    assert "manageJobsWithoutQueueName: not used by kfed-agent, ignored" in agent.warnings


@pytest.mark.parametrize(
    "selector",
    [
        "{matchLabels: {a: 1}}",
        "{matchExpressions: [{key: a, operator: Near}]}",
        "{matchExpressions: [{key: a, operator: In}]}",
        "x",
    ],
)
def test_an_invalid_namespace_selector_stops_the_start(selector: str) -> None:
    with pytest.raises(ConfigError, match="managedJobsNamespaceSelector"):
        read_configuration(HEAD + f"managedJobsNamespaceSelector: {selector}\n", component="manager")


def test_kueues_dispatchers_are_named_as_replaced_by_capacity_probing() -> None:
    text = HEAD + (
        "multiKueue:\n  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n"
        "  incrementalDispatcherConfig: {stepSize: 2}\n"
    )
    warnings = read_configuration(text, component="manager").warnings
    assert warnings == [
        "multiKueue.dispatcherName: not supported by kfed, ignored (kfed-manager sends each Workload to one worker, "
        "chosen by capacity probing (--dispatch-policy), never copies to several at once)",
        "multiKueue.incrementalDispatcherConfig: not supported by kfed, ignored (kfed-manager sends each Workload to "
        "one worker, chosen by capacity probing (--dispatch-policy))",
    ]
