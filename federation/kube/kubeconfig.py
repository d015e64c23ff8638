"""Validation of kubeconfigs that come from Secrets (MultiKueueCluster credentials).

A worker kubeconfig stored in a Secret must be self-contained and must not make the manager run programs or read
its own files: no exec / auth-provider plugins, no token/CA/client-certificate file paths, no disabled TLS
verification, and an explicit current-context. The validator is pure and returns one human-readable reason per
problem; the manager puts them into the MultiKueueCluster ``Active=False`` condition message.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import yaml


class KubeconfigError(ValueError):
    """A kubeconfig that cannot or must not be used; ``problems`` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


# Keys under `user:` that point at files on the manager's disk, with the inline alternative to suggest.
_USER_FILE_KEYS = {
    "tokenFile": "token",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}


def load_kubeconfig_text(text: str) -> dict[str, Any]:
    """Parse kubeconfig YAML (no validation beyond "is a mapping"); raises :class:`KubeconfigError`."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError([f"kubeconfig is not valid YAML{where}"]) from None
    if not isinstance(loaded, dict):
        raise KubeconfigError(["kubeconfig is not a YAML mapping"])
    return loaded


def _named(config: Mapping[str, Any], section: str, name: str) -> Mapping[str, Any] | None:
    entries = config.get(section)
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def _check_base64(value: Any, what: str, problems: list[str]) -> None:
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{what} is empty")
        return
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        problems.append(f"{what} is not valid base64")


def _check_cluster(name: str, cluster: Mapping[str, Any], problems: list[str]) -> None:
    where = f'cluster "{name}"'
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        problems.append(f"{where} has no server URL")
    elif not server.startswith("https://"):
        problems.append(f"{where} server {server!r} does not use https")
    if cluster.get("insecure-skip-tls-verify") is True:
        problems.append(f"{where} sets insecure-skip-tls-verify: true; TLS verification must stay on")
    if "certificate-authority" in cluster:
        problems.append(f"{where} references a CA file (certificate-authority); use inline certificate-authority-data")
    if "certificate-authority-data" in cluster:
        _check_base64(cluster["certificate-authority-data"], f"{where} certificate-authority-data", problems)


def _check_user(name: str, user: Mapping[str, Any], problems: list[str]) -> None:
    where = f'user "{name}"'
    if "exec" in user:
        problems.append(f"{where} uses an exec credential plugin; only inline credentials are allowed")
    if "auth-provider" in user:
        problems.append(f"{where} uses an auth-provider plugin; only inline credentials are allowed")
    for key, inline in _USER_FILE_KEYS.items():
        if key in user:
            problems.append(f"{where} references a file ({key}); use inline {inline}")
    has_cert = "client-certificate-data" in user
    has_key = "client-key-data" in user
    if has_cert != has_key:
        problems.append(f"{where} needs both client-certificate-data and client-key-data")
    if has_cert:
        _check_base64(user["client-certificate-data"], f"{where} client-certificate-data", problems)
    if has_key:
        _check_base64(user["client-key-data"], f"{where} client-key-data", problems)


def validate_kubeconfig(config: Mapping[str, Any]) -> list[str]:
    """Problems that make ``config`` unusable or unsafe for a Secret-provided kubeconfig; ``[]`` means OK.

    Only the entries the current context uses are checked (those are the only ones ever loaded).
    """
    current = config.get("current-context")
    if not isinstance(current, str) or not current:
        return ["kubeconfig has no current-context"]
    context_entry = _named(config, "contexts", current)
    context = context_entry.get("context") if context_entry is not None else None
    if not isinstance(context, Mapping):
        return [f'current-context "{current}" is not defined in contexts']

    problems: list[str] = []
    cluster_name = context.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        problems.append(f'context "{current}" names no cluster')
    else:
        cluster_entry = _named(config, "clusters", cluster_name)
        cluster = cluster_entry.get("cluster") if cluster_entry is not None else None
        if not isinstance(cluster, Mapping):
            problems.append(f'cluster "{cluster_name}" (used by context "{current}") is not defined in clusters')
        else:
            _check_cluster(cluster_name, cluster, problems)

    user_name = context.get("user")
    if isinstance(user_name, str) and user_name:
        user_entry = _named(config, "users", user_name)
        user = user_entry.get("user") if user_entry is not None else None
        if not isinstance(user, Mapping):
            problems.append(f'user "{user_name}" (used by context "{current}") is not defined in users')
        else:
            _check_user(user_name, user, problems)
    return problems


def validate_kubeconfig_text(text: str) -> list[str]:
    """:func:`validate_kubeconfig` for YAML text, reporting parse errors as problems too."""
    try:
        config = load_kubeconfig_text(text)
    except KubeconfigError as exc:
        return exc.problems
    return validate_kubeconfig(config)


def parse_validated_kubeconfig(text: str) -> dict[str, Any]:
    """Parse and validate; raises :class:`KubeconfigError` listing every problem."""
    config = load_kubeconfig_text(text)
    problems = validate_kubeconfig(config)
    if problems:
        raise KubeconfigError(problems)
    return config
