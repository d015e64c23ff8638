"""Kueue's configuration file (``kind: Configuration``, ``config.kueue.x-k8s.io/v1beta1`` or ``v1beta2``) read by
kfed-manager and kfed-agent (``--config FILE``), so a team moving from Kueue keeps its file and the charts keep
their settings in a versioned file in a ConfigMap (Kueue's chart value ``managerConfig.controllerManagerConfigYaml``).

Pure: text in, the command-line defaults it sets and the warnings it raises out. Each field kfed applies maps to one
of the binaries' flags (a flag given explicitly still wins). A field kfed does not apply is named in a warning at
start, never silently ignored; an invalid value is a :class:`ConfigError` naming the field and the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

API_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
Component = Literal["manager", "agent"]


class ConfigError(ValueError):
    """The file cannot be used: names the field and the value."""


@dataclass
class Settings:
    defaults: dict[str, Any] = field(default_factory=dict)
    """argparse destination -> value (``namespace``, ``qps``, ``health_port``...)."""
    warnings: list[str] = field(default_factory=list)


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(value: Any, where: str) -> float:
    """Seconds of a Go duration (``"1m0s"``, ``"5m"``, ``"300ms"``, ``"1h2m3.5s"``) as Kueue's file writes them."""
    text = str(value).strip()
    parts = _GO_DURATION.findall(text)
    if text in ("0", "0s"):
        return 0.0
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ConfigError(f"{where}: {value!r} is not a duration (e.g. 30s, 5m, 1h0m0s)")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def _positive_duration(value: Any, where: str) -> float:
    seconds = go_duration(value, where)
    if seconds <= 0:
        raise ConfigError(f"{where}: {value!r} must be longer than 0s")
    return seconds


def _port_of(address: Any, where: str) -> tuple[str, int]:
    """``":8081"`` / ``"0.0.0.0:8081"`` -> (host or "0.0.0.0", port)."""
    text = str(address)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: {address!r} is not a host:port address (e.g. :8081)")
    return host or "0.0.0.0", int(port)


def _number(kind: Callable[[Any], Any], minimum: float) -> Callable[[Any, str], Any]:
    def convert(value: Any, where: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: {value!r} is not a number")
        if value < minimum:
            raise ConfigError(f"{where}: {value!r} is below {minimum:g}")
        return kind(value)

    return convert


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {value!r} is not true or false")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {value!r} is not a non-empty string")
    return value


# Field path -> (flag destination, converter, components that apply it).
_BOTH: tuple[Component, ...] = ("manager", "agent")
_FIELDS: dict[str, tuple[str, Callable[[Any, str], Any], tuple[Component, ...]]] = {
    "namespace": ("namespace", _string, _BOTH),
    "clientConnection.qps": ("qps", _number(float, 0.001), _BOTH),
    "clientConnection.burst": ("burst", _number(int, 1), _BOTH),
    "leaderElection.leaderElect": ("leader_elect", _boolean, _BOTH),
    "multiKueue.gcInterval": ("gc_interval", go_duration, ("manager",)),
    "multiKueue.origin": ("origin", _string, ("manager",)),
    "multiKueue.workerLostTimeout": ("worker_lost_timeout", go_duration, ("manager",)),
    "multiKueue.jobCopyTimeout": ("job_copy_timeout", _positive_duration, ("agent",)),  # kfed's own: the agent's flag
    "objectRetentionPolicies.workloads.afterFinished": (
        "workload_retention_after_finished",
        go_duration,
        ("manager",),
    ),
    "objectRetentionPolicies.workloads.afterDeactivatedByKueue": (
        "workload_retention_after_deactivated_by_kueue",
        go_duration,
        ("manager",),
    ),
    "visibilityServer.bindPort": ("visibility_port", _number(int, 0), ("manager",)),
    "waitForPodsReady.timeout": ("wait_for_pods_ready_timeout", go_duration, _BOTH),
    "waitForPodsReady.recoveryTimeout": ("wait_for_pods_ready_recovery_timeout", go_duration, _BOTH),
    "waitForPodsReady.blockAdmission": ("wait_for_pods_ready_block_admission", _boolean, _BOTH),
    "waitForPodsReady.requeuingStrategy.backoffLimitCount": (
        "requeuing_backoff_limit_count",
        _number(int, 0),
        _BOTH,
    ),
    "waitForPodsReady.requeuingStrategy.backoffBaseSeconds": (
        "requeuing_backoff_base_seconds",
        _number(float, 0),
        _BOTH,
    ),
    "waitForPodsReady.requeuingStrategy.backoffMaxSeconds": (
        "requeuing_backoff_max_seconds",
        _number(float, 0),
        _BOTH,
    ),
}


def _prefix_list(value: Any, where: str) -> str:
    if not isinstance(value, list) or not all(isinstance(v, str) and v and "," not in v for v in value):
        raise ConfigError(f"{where}: {value!r} is not a list of resource name prefixes")
    return ",".join(value)


def _quota_check_strategy(value: Any, where: str) -> str:
    if value not in ("BlockUndeclared", "IgnoreUndeclared"):
        raise ConfigError(f"{where}: {value!r} is not supported (BlockUndeclared or IgnoreUndeclared)")
    return str(value)


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(value: Any, where: str) -> dict[str, Any]:
    """A metav1.LabelSelector (``matchLabels``, ``matchExpressions`` with Kueue's four operators), checked."""
    if not isinstance(value, Mapping) or set(value) - {"matchLabels", "matchExpressions"}:
        raise ConfigError(f"{where}: {value!r} is not a label selector (matchLabels, matchExpressions)")
    labels = value.get("matchLabels") or {}
    expressions = value.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ConfigError(f"{where}.matchLabels: {labels!r} is not a map of strings")
    if not isinstance(expressions, list):
        raise ConfigError(f"{where}.matchExpressions: {expressions!r} is not a list")
    for expression in expressions:
        ok = isinstance(expression, Mapping) and isinstance(expression.get("key"), str)
        operator = expression.get("operator") if isinstance(expression, Mapping) else None
        values = (expression.get("values") or []) if isinstance(expression, Mapping) else None
        if not ok or operator not in _OPERATORS or not isinstance(values, list):
            raise ConfigError(f"{where}.matchExpressions: {expression!r} is not a requirement (key, operator, values)")
        if (operator in ("In", "NotIn")) != bool(values):
            raise ConfigError(
                f"{where}.matchExpressions: {expression!r}: In/NotIn need values, Exists/DoesNotExist none"
            )
    return {"matchLabels": dict(labels), "matchExpressions": [dict(e) for e in expressions]}


def _selector_json(value: Any, where: str) -> str:
    return json.dumps(label_selector(value, where), sort_keys=True)


_FIELDS["manageJobsWithoutQueueName"] = ("manage_jobs_without_queue_name", _boolean, ("manager",))
_FIELDS["managedJobsNamespaceSelector"] = ("managed_jobs_namespace_selector", _selector_json, ("manager",))
_FIELDS["resources.excludeResourcePrefixes"] = ("exclude_resource_prefixes", _prefix_list, _BOTH)
_FIELDS["resources.quotaCheckStrategy"] = ("quota_check_strategy", _quota_check_strategy, _BOTH)
_ADDRESSES = {"health.healthProbeBindAddress": "health_port", "metrics.bindAddress": "metrics_port"}
_KUEUE_ONLY = {
    "leaderElection.resourceName": "kfed's Lease is named after the binary (kfed-manager / kfed-agent)",
    "webhook": "kfed runs no webhook (the Job admission policy is a MutatingAdmissionPolicy)",
    "internalCertManagement": "kfed runs no webhook, so it manages no certificates",
    "controller": "kfed sizes its work queues itself",
    "multiKueue.dispatcherName": "kfed-manager sends each Workload to one worker, chosen by capacity probing "
    "(--dispatch-policy), never copies to several at once",
    "multiKueue.incrementalDispatcherConfig": "kfed-manager sends each Workload to one worker, chosen by capacity "
    "probing (--dispatch-policy)",
}


_WHOLE = ("managedJobsNamespaceSelector",)
"""Fields whose value is a whole object, not flattened."""


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if (
            isinstance(value, Mapping)
            and value
            and path not in _WHOLE
            and not any(path == p or path.startswith(p + ".") for p in _KUEUE_ONLY)
        ):
            out |= _flatten(value, path + ".")
        else:
            out[path] = value
    return out


_DEFAULT_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
_STRATEGY_LISTS = (("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",), _DEFAULT_STRATEGIES)


def _fair_sharing(
    data: Mapping[str, Any], fields: dict[str, Any], settings: Settings, *, component: Component
) -> dict[str, Any]:
    """``fairSharing``: v1beta2 turns it on by the section's presence and requires ``preemptionStrategies``; v1beta1
    by ``enable: true``, the strategies defaulting to Kueue's two. Only Kueue's three lists are valid."""
    section = data.get("fairSharing")
    rest = {p: v for p, v in fields.items() if p != "fairSharing" and not p.startswith("fairSharing.")}
    if section is None:
        return fields
    if not isinstance(section, Mapping):
        raise ConfigError(f"fairSharing: {section!r} is not a mapping")
    v1beta1 = data.get("apiVersion") == API_VERSIONS[0]
    enabled = _boolean(section.get("enable", not v1beta1), "fairSharing.enable")
    if not enabled:
        return rest
    strategies = section.get("preemptionStrategies")
    if strategies is None and v1beta1:
        strategies = list(_DEFAULT_STRATEGIES)
    if not strategies:
        raise ConfigError("fairSharing.preemptionStrategies: must be specified")
    if not isinstance(strategies, list) or tuple(str(s) for s in strategies) not in _STRATEGY_LISTS:
        allowed = " or ".join(str(list(names)) for names in _STRATEGY_LISTS)
        raise ConfigError(f"fairSharing.preemptionStrategies: {strategies!r} is not supported (one of {allowed})")
    settings.defaults["fair_sharing"] = True
    settings.defaults["fair_sharing_preemption_strategies"] = ",".join(strategies)
    unknown = [p for p in fields if p.startswith("fairSharing.") and p.split(".")[1] not in _FAIR_SHARING_KEYS]
    return rest | {p: fields[p] for p in unknown}


_FAIR_SHARING_KEYS = ("enable", "preemptionStrategies")


def read_configuration(text: str, *, component: Component) -> Settings:
    """The flags' defaults Kueue's configuration ``text`` sets for ``component``, and a warning per field it does
    not apply; raises :class:`ConfigError` for a file that is not a Configuration or a value that is invalid."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"not YAML: {err}") from err
    if not isinstance(data, Mapping):
        raise ConfigError("not a YAML mapping")
    if data.get("kind") != "Configuration" or data.get("apiVersion") not in API_VERSIONS:
        raise ConfigError(
            f"apiVersion/kind: {data.get('apiVersion')!r}/{data.get('kind')!r} is not Kueue's Configuration "
            f"({' or '.join(API_VERSIONS)}, kind Configuration)"
        )
    settings = Settings()
    fields = _flatten({k: v for k, v in data.items() if k not in ("apiVersion", "kind")})
    v1beta1 = data.get("apiVersion") == API_VERSIONS[0]
    ready = data.get("waitForPodsReady")
    if isinstance(ready, Mapping):
        # Kueue: the section (v1beta2) or enable: true (v1beta1) turns it on, with a 5 min timeout by default; the
        # recovery timeout defaults to the timeout, and blockAdmission to false (v1beta2) or to enable (v1beta1).
        # kfed-agent judges the readiness of the Workloads on its worker but kfed-manager's copies (the manager's).
        enabled = _boolean(ready.get("enable", not v1beta1), "waitForPodsReady.enable")
        if enabled:
            timeout = ready.get("timeout")
            seconds = 300.0 if timeout is None else go_duration(timeout, "waitForPodsReady.timeout")
            settings.defaults["wait_for_pods_ready_timeout"] = seconds
            settings.defaults["wait_for_pods_ready_recovery_timeout"] = seconds
            settings.defaults["wait_for_pods_ready_block_admission"] = v1beta1
        else:
            fields = {p: v for p, v in fields.items() if not p.startswith("waitForPodsReady.")}
    fields.pop("waitForPodsReady.enable", None)
    fields = _fair_sharing(data, fields, settings, component=component)
    resources = data.get("resources")
    if (
        isinstance(resources, Mapping)
        and resources.get("quotaCheckStrategy") == "IgnoreUndeclared"
        and resources.get("excludeResourcePrefixes")
    ):
        raise ConfigError(
            "resources.quotaCheckStrategy: 'IgnoreUndeclared' does not allow resources.excludeResourcePrefixes"
        )
    for path, value in fields.items():
        if value is None:
            continue  # YAML null: Kueue's default, which is kfed's
        if path in _FIELDS:
            dest, convert, components = _FIELDS[path]
            if component in components:
                settings.defaults[dest] = convert(value, path)
            else:
                settings.warnings.append(f"{path}: not used by kfed-{component}, ignored")
        elif path in _ADDRESSES:
            host, port = _port_of(value, path)
            settings.defaults[_ADDRESSES[path]] = port
            settings.defaults["bind_address"] = host
        elif path == "integrations.frameworks":
            others = [str(v) for v in value if v != "batch/job"] if isinstance(value, list) else [str(value)]
            if others:
                settings.warnings.append(f"{path}: only batch/job is supported; ignored: {', '.join(others)}")
        elif path == "waitForPodsReady.requeuingStrategy.timestamp" and value == "Eviction":
            continue  # kfed's (and Kueue's default) requeue timestamp
        else:
            reason = next((r for p, r in _KUEUE_ONLY.items() if path == p or path.startswith(p + ".")), "")
            settings.warnings.append(f"{path}: not supported by kfed, ignored" + (f" ({reason})" if reason else ""))
    return settings
