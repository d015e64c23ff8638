"""kfed's Helm charts as the tests see them: paths, the RBAC rule files, and `helm lint` / `helm template` runs.

The RBAC rules live as plain YAML under each chart's `files/` (the templates only wrap them), so the pure unit
tests read them without Helm; the integration tests render the charts with the toolchain's helm and check the
rendered objects carry exactly those rules.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
CHARTS_DIR = REPO_ROOT / "charts"
MANAGER_CHART = CHARTS_DIR / "kfed-manager"
AGENT_CHART = CHARTS_DIR / "kfed-agent"
KUBE_VERSION = "1.36.0"

Rule = dict[str, Any]
Obj = dict[str, Any]


@dataclass(frozen=True)
class RuleFile:
    chart: Path
    name: str
    scope: str
    """``"cluster"`` (a ClusterRole's rules) or ``"namespace"`` (a Role's, in the release namespace)."""

    @property
    def path(self) -> Path:
        return self.chart / "files" / self.name

    def rules(self) -> list[Rule]:
        loaded = yaml.safe_load(self.path.read_text())
        assert isinstance(loaded, list), f"{self.path}: a YAML list of PolicyRules"
        return loaded


RULE_FILES = (
    RuleFile(MANAGER_CHART, "manager-clusterrole-rules.yaml", "cluster"),
    RuleFile(MANAGER_CHART, "manager-role-rules.yaml", "namespace"),
    RuleFile(MANAGER_CHART, "retention-rules.yaml", "cluster"),
    RuleFile(AGENT_CHART, "agent-clusterrole-rules.yaml", "cluster"),
    RuleFile(AGENT_CHART, "agent-role-rules.yaml", "namespace"),
    RuleFile(AGENT_CHART, "manager-access-rules.yaml", "cluster"),
)


def grants(rules: Iterable[Mapping[str, Any]], group: str, resource: str) -> set[str]:
    """The verbs these rules grant on ``resource`` (e.g. ``"jobs"``, ``"jobs/status"``) of ``group``, any name."""
    verbs: set[str] = set()
    for rule in rules:
        if group in rule.get("apiGroups", ()) and resource in rule.get("resources", ()):
            verbs |= set(rule.get("verbs", ()))
    return verbs


def helm(bin_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(bin_dir / "helm"), *args], capture_output=True, text=True, timeout=120, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def set_args(values: Mapping[str, Any]) -> list[str]:
    """``--set-json key=value`` for each dotted key, so types survive (booleans, numbers, lists)."""
    import json

    out: list[str] = []
    for key, value in values.items():
        out += ["--set-json", f"{key}={json.dumps(value)}"]
    return out


def render(
    bin_dir: Path, chart: Path, *, release: str, namespace: str, values: Mapping[str, Any] | None = None
) -> list[Obj]:
    """`helm template` of the chart (templates only, no CRDs), parsed."""
    result = helm(
        bin_dir,
        "template",
        release,
        str(chart),
        f"--namespace={namespace}",
        f"--kube-version={KUBE_VERSION}",
        *set_args(values or {}),
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(objects: Iterable[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
