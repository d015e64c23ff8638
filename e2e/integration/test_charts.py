"""Both charts with the toolchain's helm: `helm lint --strict` and `helm template` with the default values, with
every option on and with every option off; the rendered RBAC is exactly the rule files, no ClusterRole reads a
Secret, the Deployments' args are accepted by the binaries' own parsers with the values given, and the manager's
visibility API (Service, APIService, bindings, flag, serving certificate and its CA as the APIService's caBundle)
is there exactly when it is on.

No cluster needed (helm only), but helm comes from the toolchain build, hence the integration marker.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.charts import (
    AGENT_CHART,
    KUBE_VERSION,
    MANAGER_CHART,
    RULE_FILES,
    Obj,
    find,
    helm,
    render,
    set_args,
)
from e2e.toolchain import ensure_built
from manager.app import parse_args as manager_args
from worker_agent.app import parse_args as agent_args

pytestmark = pytest.mark.integration

NAMESPACE = "kfed-test-ns"

COMMON_ON: dict[str, Any] = {
    "replicaCount": 3,
    "image.repository": "registry.example.com/kfed",
    "image.tag": "9.9.9-test",
    "image.pullPolicy": "Always",
    "imagePullSecrets": [{"name": "regcred"}],
    "serviceAccount.annotations": {"example.com/role": "kfed"},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kfed", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}},
                }
            ]
        }
    },
    "podAnnotations": {"example.com/a": "b"},
    "podLabels": {"example.com/team": "batch"},
    "extraVolumes": [{"name": "kubeconfigs", "secret": {"secretName": "worker-kubeconfigs"}}],
    "extraVolumeMounts": [{"name": "kubeconfigs", "mountPath": "/etc/multikueue/kubeconfigs", "readOnly": True}],
    "metrics.serviceMonitor.enabled": True,
    "metrics.serviceMonitor.labels": {"release": "prometheus"},
    "podDisruptionBudget.minAvailable": 1,
    "healthPort": 9443,
    "metricsPort": 9444,
}
COMMON_OFF: dict[str, Any] = {
    "replicaCount": 1,
    "leaderElection.enabled": False,
    "serviceAccount.create": False,
    "serviceAccount.name": "brought-by-admin",
    "rbac.create": False,
    "metrics.service.enabled": False,
    "podDisruptionBudget.enabled": False,
}
MANAGER_ON = {
    **COMMON_ON,
    "manager.origin": "kfed-test",
    "manager.qps": 50,
    "manager.burst": 75,
    "manager.workerLostTimeout": 120,
    "manager.gcInterval": 5,
    "manager.dispatchPolicy": "BestFit",
    "manager.dispatchLargeShare": 0.5,
    "manager.logLevel": "debug",
    "manager.logFormat": "console",
    "manager.extraArgs": ["--bind-address=127.0.0.1"],
    "dashboard.enabled": True,
    "dashboard.port": 9446,
    "visibility.port": 9445,
}
MANAGER_OFF = {
    **COMMON_OFF,
    "rbac.aggregatedRoles": False,
    "jobAdmissionPolicy.enabled": False,
    "visibility.enabled": False,
}
AGENT_ON = {
    **COMMON_ON,
    "clusterName": "worker-7",
    "agent.qps": 50,
    "agent.burst": 75,
    "agent.logLevel": "debug",
    "agent.extraArgs": ["--bind-address=127.0.0.1"],
    "managerAccess.serviceAccountName": "manager-from-hq",
    "managerAccess.tokenSecret": True,
}
AGENT_OFF = {
    **COMMON_OFF,
    "agent.clusterQueueStatus": False,
    "managerAccess.enabled": False,
    "jobAdmissionPolicy.enabled": False,
}

KUEUE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8080
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
clientConnection:
  qps: 50
  burst: 75
multiKueue:
  gcInterval: 5s
  origin: kfed-test
  workerLostTimeout: 2m
"""
"""Kueue's configuration file (managerConfig.controllerManagerConfigYaml) with the values the test expects: the
settings come from the file, not from the values, which are left at their defaults."""
CONFIG_EXPECTED = {
    "manager.qps": 50,
    "manager.burst": 75,
    "manager.origin": "kfed-test",
    "manager.workerLostTimeout": 120,
    "manager.gcInterval": 5,
    "agent.qps": 50,
}
CONFIG_PATH = "/etc/kfed/controller_manager_config.yaml"

CASES = {
    "manager-default": (MANAGER_CHART, {}),
    "manager-all-on": (MANAGER_CHART, MANAGER_ON),
    "manager-all-off": (MANAGER_CHART, MANAGER_OFF),
    "agent-default": (AGENT_CHART, {}),
    "agent-all-on": (AGENT_CHART, AGENT_ON),
    "agent-all-off": (AGENT_CHART, AGENT_OFF),
    "manager-kueue-config": (MANAGER_CHART, {"managerConfig.controllerManagerConfigYaml": KUEUE_CONFIG}),
    "manager-retention": (MANAGER_CHART, {"manager.workloadRetention.afterFinished": 0}),
    "manager-visibility-without-rbac": (MANAGER_CHART, {"rbac.create": False, "rbac.aggregatedRoles": False}),
    "manager-visibility-own-certificate": (
        MANAGER_CHART,
        {"visibility.certificate.secretName": "team-visibility-tls", "visibility.certificate.caBundle": "Q0EtUEVN"},
    ),
    "manager-visibility-certificate-by-kfed-manager": (
        MANAGER_CHART,
        {"visibility.certificate.generatedBy": "kfed-manager"},
    ),
    "agent-kueue-config": (AGENT_CHART, {"managerConfig.controllerManagerConfigYaml": KUEUE_CONFIG}),
}


class _NoDuplicates(yaml.SafeLoader):
    """A loader that refuses duplicate mapping keys (PyYAML keeps the last one silently; kubectl refuses them)."""


def _construct_mapping(loader: _NoDuplicates, node: yaml.MappingNode) -> dict[Any, Any]:
    keys = [loader.construct_object(k) for k, _ in node.value]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise AssertionError(f"duplicate keys {sorted(duplicates)} at {node.start_mark}")
    return loader.construct_mapping(node)


_NoDuplicates.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


@pytest.fixture(scope="module")
def bins() -> Path:
    return ensure_built()


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def case(request: pytest.FixtureRequest, bins: Path) -> tuple[str, Path, dict[str, Any], list[Obj]]:
    name: str = request.param
    chart, values = CASES[name]
    release = "kfed-test"
    text = helm(
        bins,
        "template",
        release,
        str(chart),
        f"--namespace={NAMESPACE}",
        f"--kube-version={KUBE_VERSION}",
        *set_args(values),
    ).stdout
    list(yaml.load_all(text, Loader=_NoDuplicates))
    return name, chart, values, render(bins, chart, release=release, namespace=NAMESPACE, values=values)


def test_lint_strict(bins: Path, case: tuple[str, Path, dict[str, Any], list[Obj]]) -> None:
    _, chart, values, _ = case
    result = helm(bins, "lint", "--strict", f"--kube-version={KUBE_VERSION}", str(chart), *set_args(values))
    assert "0 chart(s) failed" in result.stdout, result.stdout


def _rules(chart: Path, scope: str, prefix: str) -> list[dict[str, Any]]:
    (rule_file,) = [f for f in RULE_FILES if f.chart == chart and f.scope == scope and f.name.startswith(prefix)]
    return rule_file.rules()


def test_rendered_rbac_is_exactly_the_rule_files(case: tuple[str, Path, dict[str, Any], list[Obj]]) -> None:
    name, chart, values, objects = case
    prefix = "manager-" if chart == MANAGER_CHART else "agent-"
    cluster_roles = {o["metadata"]["name"]: o for o in find(objects, "ClusterRole")}
    roles = find(objects, "Role")
    if values.get("rbac.create") is False:
        assert not roles
        assert f"kfed-test-{chart.name}" not in cluster_roles
    else:
        fullname = f"kfed-test-{chart.name}"
        assert cluster_roles[fullname]["rules"] == _rules(chart, "cluster", prefix)
        by_manager = values.get("visibility.certificate.generatedBy") == "kfed-manager"
        names = {r["metadata"]["name"] for r in roles}
        assert names == {fullname} | ({f"{fullname}-visibility-cert"} if by_manager else set()), names
        (role,) = [r for r in roles if r["metadata"]["name"] == fullname]
        assert role["metadata"]["namespace"] == NAMESPACE
        assert role["rules"] == _rules(chart, "namespace", prefix)
        sa = values.get("serviceAccount.name") or fullname
        for binding in find(objects, "RoleBinding") + find(objects, "ClusterRoleBinding", fullname):
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    for role_name, cluster_role in cluster_roles.items():
        for rule in cluster_role["rules"]:
            assert "secrets" not in rule["resources"], f"{name}: ClusterRole {role_name} grants {rule}"
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
    if chart == AGENT_CHART and values.get("managerAccess.enabled", True):
        access = cluster_roles["kfed-test-kfed-agent-manager-access"]
        assert access["rules"] == _rules(chart, "cluster", "manager-access")
        (binding,) = find(objects, "ClusterRoleBinding", "kfed-test-kfed-agent-manager-access")
        account = values.get("managerAccess.serviceAccountName", "kfed-manager-access")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
        assert find(objects, "ServiceAccount", account)[0]["automountServiceAccountToken"] is False
        assert bool(find(objects, "Secret")) == bool(values.get("managerAccess.tokenSecret"))
    if chart == MANAGER_CHART and values.get("rbac.aggregatedRoles", True):
        view = cluster_roles["kfed-test-kfed-manager-view"]
        assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
        assert {v for rule in view["rules"] for v in rule["verbs"]} == {"get", "list", "watch"}
        edit = cluster_roles["kfed-test-kfed-manager-edit"]
        assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
        assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    viewers = {n: r for n, r in cluster_roles.items() if n.startswith("kfed-test-kfed-manager-pending-workloads-")}
    if chart == MANAGER_CHART and values.get("rbac.aggregatedRoles", True) and values.get("visibility.enabled", True):
        # Kueue's pending-workloads-cq-viewer-role and pending-workloads-lq-viewer-role, with Kueue's labels
        aggregated = {f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in ("view", "edit", "admin")}
        for queue, extra in (("cq", {}), ("lq", {"rbac.kueue.x-k8s.io/batch-user": "true"})):
            role = viewers.pop(f"kfed-test-kfed-manager-pending-workloads-{queue}-viewer")
            plural = "clusterqueues" if queue == "cq" else "localqueues"
            assert role["rules"] == [
                {
                    "apiGroups": ["visibility.kueue.x-k8s.io"],
                    "resources": [f"{plural}/pendingworkloads"],
                    "verbs": ["get", "list", "watch"],
                }
            ]
            labels = {k: v for k, v in role["metadata"]["labels"].items() if "rbac." in k}
            assert labels == {**aggregated, "rbac.kueue.x-k8s.io/batch-admin": "true", **extra}, labels
    assert not viewers, f"{name}: {sorted(viewers)}"


def _config_file_args(container: Obj, pod: Obj, objects: list[Obj], tmp_path: Path) -> list[str]:
    """With managerConfig: the file is the mounted ConfigMap, read with --config, and no flag overrides it; returns
    the args with the file where this test wrote it."""
    args = [str(a) for a in container["args"]]
    assert f"--config={CONFIG_PATH}" in args
    assert not [a for a in args if a.startswith(("--qps", "--burst", "--health-port", "--metrics-port", "--origin"))]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    assert (mount["mountPath"], mount["readOnly"]) == ("/etc/kfed", True)
    (volume,) = [v for v in pod["volumes"] if v["name"] == "config"]
    (config_map,) = [c for c in find(objects, "ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]]
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(config_map["data"]["controller_manager_config.yaml"])
    assert path.read_text() == KUEUE_CONFIG
    return [a.replace(CONFIG_PATH, str(path)) for a in args]


def test_retention_deletes_are_granted_only_with_retention(
    case: tuple[str, Path, dict[str, Any], list[Obj]],
) -> None:
    name, chart, _, objects = case
    if chart != MANAGER_CHART:
        return
    roles = [r for r in find(objects, "ClusterRole") if r["metadata"]["name"].endswith("-retention")]
    if name == "manager-retention":
        (role,) = roles
        assert role["rules"] == _rules(chart, "cluster", "retention-")
        (binding,) = [b for b in find(objects, "ClusterRoleBinding") if b["metadata"]["name"].endswith("-retention")]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        (container,) = find(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"]
        assert "--workload-retention-after-finished=0" in container["args"]
        assert manager_args(container["args"]).workload_retention_after_finished == 0
    else:
        assert roles == [], "no deletes without retention"


def test_deployment_args_are_what_the_binary_accepts(
    case: tuple[str, Path, dict[str, Any], list[Obj]], tmp_path: Path
) -> None:
    _, chart, values, objects = case
    (deployment,) = find(objects, "Deployment")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == values.get("replicaCount", 2)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    parse: Callable[[list[str]], Any] = manager_args if chart == MANAGER_CHART else agent_args
    assert container["command"] == ["kfed-manager" if chart == MANAGER_CHART else "kfed-agent"]
    if values.get("managerConfig.controllerManagerConfigYaml"):
        args = parse(_config_file_args(container, pod, objects, tmp_path))
        values = {**values, **CONFIG_EXPECTED}
    else:
        assert not [a for a in container["args"] if str(a).startswith("--config")]
        args = parse(container["args"])
    assert args.namespace == NAMESPACE
    assert args.leader_elect is values.get("leaderElection.enabled", True)
    assert args.health_port == values.get("healthPort", 8081)
    assert args.metrics_port == values.get("metricsPort", 8080)
    if chart == MANAGER_CHART:
        assert args.origin == values.get("manager.origin", "multikueue")
        assert args.qps == values.get("manager.qps", 300)
        assert args.burst == values.get("manager.burst", 500)
        assert args.worker_lost_timeout == values.get("manager.workerLostTimeout", 900)
        assert args.gc_interval == values.get("manager.gcInterval", 60)
        assert args.dispatch_policy == values.get("manager.dispatchPolicy", "Balanced")
        assert args.dispatch_large_share == values.get("manager.dispatchLargeShare", 0.25)
        assert args.log_format == values.get("manager.logFormat", "json")
        assert args.bind_address == ("127.0.0.1" if "manager.extraArgs" in values else "0.0.0.0")
    else:
        assert args.cluster_name == values.get("clusterName", "kfed-test")
        assert args.cluster_queue_status is values.get("agent.clusterQueueStatus", True)
        assert args.qps == values.get("agent.qps", 300)
        assert args.bind_address == ("127.0.0.1" if "agent.extraArgs" in values else "0.0.0.0")
    tag = values.get("image.tag", "0.1.0")
    assert container["image"] == f"{values.get('image.repository', 'localhost/kfed')}:{tag}"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    expected_ports = {"health": args.health_port, "metrics": args.metrics_port}
    if chart == MANAGER_CHART:
        assert args.dashboard_port == (values["dashboard.port"] if values.get("dashboard.enabled") else -1)
        if values.get("dashboard.enabled"):
            expected_ports["dashboard"] = args.dashboard_port
        if values.get("visibility.enabled", True):
            expected_ports["visibility"] = args.visibility_port
    assert ports == expected_ports
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == values.get("serviceAccount.name", f"kfed-test-{chart.name}")
    for key, field in (
        ("priorityClassName", "priorityClassName"),
        ("nodeSelector", "nodeSelector"),
        ("tolerations", "tolerations"),
        ("affinity", "affinity"),
        ("imagePullSecrets", "imagePullSecrets"),
    ):
        assert pod.get(field) == values.get(key), field
    assert bool(find(objects, "ServiceMonitor")) == bool(values.get("metrics.serviceMonitor.enabled"))
    services = find(objects, "Service", f"kfed-test-{chart.name}-metrics")
    if values.get("metrics.service.enabled", True):
        (service,) = services
        assert service["spec"]["ports"][0]["targetPort"] == "metrics"
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    else:
        assert not services
    pdbs = find(objects, "PodDisruptionBudget")
    assert bool(pdbs) == values.get("podDisruptionBudget.enabled", True)


def _serving_certificate(fullname: str, deployment: Obj, objects: list[Obj], values: dict[str, Any]) -> str:
    """The visibility API's serving certificate: the Secret (the chart's, or the one values name) mounted where
    ``--visibility-cert-dir`` points; the chart's own holds a certificate for the Service's DNS names signed by the
    CA it also holds. Returns the caBundle the APIService must carry."""
    from cryptography import x509

    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if values.get("visibility.certificate.generatedBy") == "kfed-manager":
        return _certificate_by_kfed_manager(fullname, container, pod, objects)
    (cert_dir,) = [a.split("=", 1)[1] for a in container["args"] if str(a).startswith("--visibility-cert-dir=")]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == cert_dir]
    assert mount.get("readOnly") is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    own = values.get("visibility.certificate.secretName")
    made = find(objects, "Secret", f"{fullname}-visibility-cert")
    if own:
        assert volume["secret"] == {"secretName": own}
        assert made == [], "the chart makes no certificate when one is given"
        return str(values["visibility.certificate.caBundle"])
    assert volume["secret"] == {"secretName": f"{fullname}-visibility-cert"}
    (secret,) = made
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == NAMESPACE
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"ca.crt", "tls.crt", "tls.key"}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    service = f"{fullname}-visibility"
    assert f"{service}.{NAMESPACE}.svc" in names, "the name the aggregator checks: <service>.<namespace>.svc"
    assert set(names) >= {service, f"{service}.{NAMESPACE}", f"{service}.{NAMESPACE}.svc.cluster.local"}
    return str(secret["data"]["ca.crt"])


def _certificate_by_kfed_manager(fullname: str, container: Obj, pod: Obj, objects: list[Obj]) -> str:
    """generatedBy: kfed-manager renders nothing that changes between renders: the Secret empty (Opaque, so it can
    hold the pair without the chart naming its keys), no volume, and no caBundle (returns ""); kfed-manager gets
    the flags that name the Secret and the Service, and may get and update that one Secret and patch that one
    APIService."""
    secret_name = f"{fullname}-visibility-managed-cert"
    assert f"--visibility-cert-secret={NAMESPACE}/{secret_name}" in container["args"]
    assert f"--visibility-service={fullname}-visibility" in container["args"]
    assert not [a for a in container["args"] if str(a).startswith("--visibility-cert-dir")]
    assert not [v for v in pod["volumes"] if "secret" in v]
    (secret,) = find(objects, "Secret", secret_name)
    assert (secret["type"], secret.get("data")) == ("Opaque", None)
    assert find(objects, "Secret", f"{fullname}-visibility-cert") == []
    (role,) = find(objects, "Role", f"{fullname}-visibility-cert")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret_name], "verbs": ["get", "update"]}
    ]
    (cluster_role,) = find(objects, "ClusterRole", f"{fullname}-visibility-apiservice")
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["apiregistration.k8s.io"],
            "resources": ["apiservices"],
            "resourceNames": ["v1beta2.visibility.kueue.x-k8s.io"],
            "verbs": ["get", "patch"],
        }
    ]
    return ""


def _template_manager(bins: Path, values: dict[str, Any], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the manager chart with ``values``, as Argo CD and Flux render it (no lookup)."""
    args = ["template", "kfed-test", str(MANAGER_CHART), f"--namespace={NAMESPACE}", f"--kube-version={KUBE_VERSION}"]
    return helm(bins, *args, *set_args(values), check=check)


def test_a_certificate_kept_by_kfed_manager_renders_the_same_every_time(bins: Path) -> None:
    """helm template (Argo CD, Flux) has no lookup: with generatedBy: kfed-manager two renders are identical, where
    the chart's own certificate differs each time. A value other than chart or kfed-manager is refused."""
    kept = {"visibility.certificate.generatedBy": "kfed-manager"}
    assert _template_manager(bins, kept).stdout == _template_manager(bins, kept).stdout
    assert _template_manager(bins, {}).stdout != _template_manager(bins, {}).stdout, (
        "the chart's own certificate is made anew where lookup sees nothing"
    )
    bad = _template_manager(bins, {"visibility.certificate.generatedBy": "cert-manager"}, check=False)
    assert bad.returncode != 0
    assert "generatedBy" in bad.stderr


def test_an_own_visibility_certificate_needs_its_ca(bins: Path) -> None:
    """A Secret of one's own without the CA that signed it would leave the APIService unable to verify the server:
    helm refuses it, saying what is missing."""
    result = _template_manager(bins, {"visibility.certificate.secretName": "team-visibility-tls"}, check=False)
    assert result.returncode != 0
    assert "visibility.certificate.caBundle" in result.stderr
    assert "is required" in result.stderr


def test_visibility_api_is_registered_only_when_on(case: tuple[str, Path, dict[str, Any], list[Obj]]) -> None:
    """visibility.enabled: the flag and the container port, the Service in front of it, Kueue's APIService naming
    that Service, and (with rbac.create) the two bindings to built-in roles an aggregated API server needs."""
    name, chart, values, objects = case
    if chart != MANAGER_CHART:
        assert not find(objects, "APIService")
        return
    fullname = "kfed-test-kfed-manager"
    (deployment,) = find(objects, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    flags = [a for a in container["args"] if str(a).startswith("--visibility-port")]
    ports = [p for p in container["ports"] if p["name"] == "visibility"]
    services = find(objects, "Service", f"{fullname}-visibility")
    api_services = find(objects, "APIService")
    reader = find(objects, "RoleBinding", f"{fullname}-visibility-auth-reader")
    delegator = find(objects, "ClusterRoleBinding", f"{fullname}-visibility-auth-delegator")
    if not values.get("visibility.enabled", True):
        assert (flags, ports, services, api_services, reader, delegator) == ([], [], [], [], [], []), name
        return
    port = values.get("visibility.port", 8443)
    assert flags == [f"--visibility-port={port}"]
    assert ports == [{"name": "visibility", "containerPort": port, "protocol": "TCP"}]
    ca_bundle = _serving_certificate(fullname, deployment, objects, values)
    (service,) = services
    assert service["metadata"]["namespace"] == NAMESPACE
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "visibility", "protocol": "TCP"}]
    (api_service,) = api_services
    assert api_service["metadata"]["name"] == "v1beta2.visibility.kueue.x-k8s.io"
    assert api_service["spec"] == {
        "group": "visibility.kueue.x-k8s.io",
        "version": "v1beta2",
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
        **({"caBundle": ca_bundle} if ca_bundle else {}),
        "service": {"name": f"{fullname}-visibility", "namespace": NAMESPACE, "port": 443},
    }
    if values.get("rbac.create") is False:
        assert (reader, delegator) == ([], []), name
        return
    account = [{"kind": "ServiceAccount", "name": values.get("serviceAccount.name", fullname), "namespace": NAMESPACE}]
    (reader_binding,) = reader
    assert reader_binding["metadata"]["namespace"] == "kube-system"
    assert reader_binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    assert reader_binding["subjects"] == account
    (delegator_binding,) = delegator
    assert delegator_binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:auth-delegator",
    }
    assert delegator_binding["subjects"] == account


def _kind_and_name(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def test_job_admission_policy_is_the_file_the_rig_applies(case: tuple[str, Path, dict[str, Any], list[Obj]]) -> None:
    _, chart, values, objects = case
    policies = [
        policy
        for kind in (
            "MutatingAdmissionPolicy",
            "MutatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        )
        for policy in find(objects, kind)
    ]
    if chart == MANAGER_CHART and values.get("jobAdmissionPolicy.enabled", True):
        text = (MANAGER_CHART / "files" / "job-admission-policy.yaml").read_text()
        text = text.replace("namespace: kfed-system", f"namespace: {NAMESPACE}")
        # Kueue's default managedJobsNamespaceSelector leaves out kfed's own namespace, the release's here
        text = text.replace('values: ["kube-system", "kfed-system"]', f'values: ["kube-system", "{NAMESPACE}"]')
        expected = list(yaml.safe_load_all(text))
        assert sorted(policies, key=_kind_and_name) == sorted(expected, key=_kind_and_name)
        [params] = [c for c in find(objects, "ConfigMap") if c["metadata"]["name"] == "kfed-local-queues"]
        assert params["metadata"]["namespace"] == NAMESPACE
    elif chart == AGENT_CHART and values.get("jobAdmissionPolicy.enabled", True):
        text = (AGENT_CHART / "files" / "job-admission-policy.yaml").read_text()
        assert sorted(policies, key=_kind_and_name) == sorted(yaml.safe_load_all(text), key=_kind_and_name)
    else:
        assert not policies


@pytest.mark.parametrize(
    "selector",
    [{"matchLabels": {"team": "ml"}}, {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}],
    ids=["labels", "expressions", "every-namespace"],
)
def test_the_default_priority_class_follows_the_config_files_managed_jobs_namespace_selector(
    bins: Path, tmp_path: Path, selector: dict[str, Any]
) -> None:
    """Kueue v0.20 (#15851): the default WorkloadPriorityClass is given only in the namespaces of
    managedJobsNamespaceSelector; the chart renders the configuration file's into that policy, and only there."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "managedJobsNamespaceSelector": selector,
            }
        )
    )
    args = ["template", "kfed-test", str(MANAGER_CHART), f"--namespace={NAMESPACE}", f"--kube-version={KUBE_VERSION}"]
    rendered = helm(bins, *args, f"--set-file=managerConfig.controllerManagerConfigYaml={config}").stdout
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    policies = {p["metadata"]["name"]: p for p in find(objects, "MutatingAdmissionPolicy")}
    constraints = policies["kfed-default-workload-priority-class"]["spec"]["matchConstraints"]
    assert constraints["namespaceSelector"] == selector
    others = [p for name, p in policies.items() if name != "kfed-default-workload-priority-class"]
    assert others
    assert all("namespaceSelector" not in p["spec"]["matchConstraints"] for p in others)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 2, "leaderElection.enabled": False}, "needs leaderElection.enabled"),
        ({"unknownKey": 1}, "unknownKey"),
        ({"image.pullPolicy": "Sometimes"}, "pullPolicy"),
        ({"metrics.service.enabled": False, "metrics.serviceMonitor.enabled": True}, "needs metrics.service.enabled"),
    ],
)
@pytest.mark.parametrize("chart", [MANAGER_CHART, AGENT_CHART], ids=lambda c: c.name)
def test_inconsistent_values_are_refused(bins: Path, chart: Path, values: dict[str, Any], message: str) -> None:
    result = helm(bins, "template", "x", str(chart), f"--kube-version={KUBE_VERSION}", *set_args(values), check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"manager.dispatchPolicy": "Packed"}, "dispatchPolicy"),
        ({"manager.dispatchLargeShare": 2}, "dispatchLargeShare"),
        ({"manager.dispatchLargeShare": 0}, "dispatchLargeShare"),
    ],
)
def test_dispatch_values_kfed_manager_would_refuse_are_refused_by_helm(
    bins: Path, values: dict[str, Any], message: str
) -> None:
    result = helm(
        bins, "template", "x", str(MANAGER_CHART), f"--kube-version={KUBE_VERSION}", *set_args(values), check=False
    )
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("chart", [MANAGER_CHART, AGENT_CHART], ids=lambda c: c.name)
def test_kubernetes_older_than_1_36_is_refused(bins: Path, chart: Path) -> None:
    result = helm(bins, "template", "x", str(chart), "--kube-version=1.35.0", check=False)
    assert result.returncode != 0
    assert "kubeVersion" in result.stderr or "incompatible" in result.stderr, result.stderr
