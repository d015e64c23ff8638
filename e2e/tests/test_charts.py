"""The charts' RBAC and metadata, read without Helm: least privilege holds by construction of the rule files."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from e2e.charts import AGENT_CHART, MANAGER_CHART, REPO_ROOT, RULE_FILES, RuleFile, grants
from federation.kube import resources as r

KNOWN = {(res.group, res.plural) for res in vars(r).values() if isinstance(res, r.Resource)}
SUBRESOURCES = {"status", "finalizers"}
MUTATING = {"create", "update", "patch", "delete", "deletecollection"}


def rule_ids(rule_file: RuleFile) -> str:
    return f"{rule_file.chart.name}/{rule_file.name}"


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=rule_ids)
def test_rules_name_only_resources_kfed_knows_and_no_wildcards(rule_file: RuleFile) -> None:
    for rule in rule_file.rules():
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}, rule
        for field in ("apiGroups", "resources", "verbs"):
            assert rule[field], f"empty {field} in {rule}"
        for field in ("apiGroups", "resources", "verbs", "resourceNames"):
            assert "*" not in rule.get(field, []), f"wildcard in {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                plural, _, sub = resource.partition("/")
                assert (group, plural) in KNOWN, f"{group}/{resource}: not a resource of federation/kube/resources.py"
                assert not sub or sub in SUBRESOURCES, resource
        if "resourceNames" in rule:
            # list and watch are allowed by name only with a metadata.name field selector (Kubernetes RBAC), so a
            # rule naming its objects holds for them too; create and deletecollection cannot be limited by name
            assert not {"create", "deletecollection"} & set(rule["verbs"]), (
                f"{rule}: these verbs ignore resourceNames, the rule would look narrower than it is"
            )


@pytest.mark.parametrize("rule_file", [f for f in RULE_FILES if f.scope == "cluster"], ids=rule_ids)
def test_no_cluster_wide_rule_touches_secrets_leases_or_rbac(rule_file: RuleFile) -> None:
    for rule in rule_file.rules():
        assert "secrets" not in rule["resources"], f"cluster-wide Secret access in {rule_file.name}: {rule}"
        assert "leases" not in rule["resources"], f"cluster-wide Lease access in {rule_file.name}: {rule}"
        assert "rbac.authorization.k8s.io" not in rule["apiGroups"], rule


def test_manager_reads_kubeconfig_secrets_and_holds_its_lease_only_in_its_namespace() -> None:
    role = next(f for f in RULE_FILES if f.name == "manager-role-rules.yaml").rules()
    assert grants(role, "", "secrets") == {"list", "watch"}
    assert grants(role, "coordination.k8s.io", "leases") == {"create", "get", "update"}
    assert grants(role, "", "configmaps") == {"create", "get", "update"}  # the job policy's params
    named = [rule for rule in role if "get" in rule["verbs"] or "update" in rule["verbs"]]
    assert all(rule.get("resourceNames") in (["kfed-manager"], ["kfed-local-queues"]) for rule in named), named
    assert {res for rule in role for res in rule["resources"]} == {"secrets", "leases", "configmaps"}


def test_agent_reads_no_secret_at_all() -> None:
    for rule_file in RULE_FILES:
        if rule_file.chart == AGENT_CHART and rule_file.name.startswith("agent-"):
            assert not grants(rule_file.rules(), "", "secrets"), rule_file.name


def test_the_manager_on_a_worker_only_handles_its_copies_and_reads_capacity() -> None:
    rules = next(f for f in RULE_FILES if f.name == "manager-access-rules.yaml").rules()
    # deletecollection: the finished Workload copies, in batches (manager/copy_cleanup.py); a Job copy goes alone
    assert grants(rules, "kueue.x-k8s.io", "workloads") == {
        "get", "list", "watch", "create", "patch", "delete", "deletecollection"
    }  # fmt: skip
    assert grants(rules, "batch", "jobs") == {"get", "list", "watch", "create", "patch", "delete"}
    assert grants(rules, "kfed.io", "clustercapacities") == {"list", "watch"}
    # without a report (no agent running), capacity is probed through the queues' status, as Kueue's role allows
    assert grants(rules, "kueue.x-k8s.io", "clusterqueues") == {"list", "watch"}
    assert grants(rules, "kueue.x-k8s.io", "localqueues") == {"list", "watch"}
    assert not any("/" in res for rule in rules for res in rule["resources"]), "no status writes on the worker"


def test_the_manager_writes_workload_and_queue_status_and_deletes_only_workloads_on_its_own_cluster() -> None:
    rules = next(f for f in RULE_FILES if f.name == "manager-clusterrole-rules.yaml").rules()
    for resource in ("workloads/status", "clusterqueues/status", "localqueues/status", "multikueueclusters/status"):
        assert grants(rules, "kueue.x-k8s.io", resource) == {"patch"}, resource
    # The one delete: the Workload of a Job its user edited while it held quota, replaced as Kueue does.
    deletable = [
        (group, res)
        for rule in rules
        if "delete" in rule["verbs"]
        for group in rule["apiGroups"]
        for res in rule["resources"]
    ]
    assert deletable == [("kueue.x-k8s.io", "workloads")]
    assert not any("deletecollection" in rule["verbs"] for rule in rules)
    # Queues are the admins' objects: kfed only patches its resource-in-use finalizer onto ClusterQueues.
    assert MUTATING & grants(rules, "kueue.x-k8s.io", "clusterqueues") == {"patch"}
    assert MUTATING & grants(rules, "kueue.x-k8s.io", "localqueues") == set()


def test_the_visibility_api_is_granted_only_the_built_in_roles_its_server_uses() -> None:
    """kfed-manager's visibility server reads one ConfigMap in kube-system and creates SubjectAccessReviews: the chart
    binds the two built-in roles made for that (what an aggregated API server needs) and adds no rule of its own,
    except, with generatedBy: kfed-manager only, the two that let it keep its certificate (one Secret, one
    APIService; rendered in e2e/integration/test_charts.py)."""
    from manager.visibility_server import AUTHENTICATION_CONFIG_MAP

    assert AUTHENTICATION_CONFIG_MAP == ("kube-system", "extension-apiserver-authentication")
    assert (r.SUBJECT_ACCESS_REVIEWS.group, r.SUBJECT_ACCESS_REVIEWS.plural) in KNOWN
    template = (MANAGER_CHART / "templates" / "visibility.yaml").read_text()
    lines = {line.strip() for line in template.splitlines()}
    assert {"name: extension-apiserver-authentication-reader", "namespace: kube-system"} <= lines
    assert "name: system:auth-delegator" in lines
    guarded, _, rest = template.partition("{{- if and .Values.rbac.create $byManager }}")
    kept, _, after = rest.partition("{{- end }}")
    assert "rules:" not in guarded + after
    assert kept.count("rules:") == 2
    assert kept.count("resourceNames:") == 2
    values = yaml.safe_load((MANAGER_CHART / "values.yaml").read_text())
    certificate = {"generatedBy": "chart", "secretName": "", "caBundle": ""}
    assert values["visibility"] == {"enabled": True, "port": 8443, "certificate": certificate}
    assert values["visibility"]["port"] != values["dashboard"]["port"]


@pytest.mark.parametrize("chart", [MANAGER_CHART, AGENT_CHART], ids=lambda c: c.name)
def test_chart_metadata_follows_the_package(chart: Path) -> None:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert meta["appVersion"] == version
    assert meta["kubeVersion"] == ">=1.36.0-0"
    assert meta["apiVersion"] == "v2"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert values["image"]["tag"] == "", "the tag defaults to appVersion in the template"
    assert values["leaderElection"]["enabled"] is True
    assert values["securityContext"]["readOnlyRootFilesystem"] is True
    assert values["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert values["podSecurityContext"]["runAsNonRoot"] is True
