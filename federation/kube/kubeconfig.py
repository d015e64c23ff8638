"""Validation of kubeconfigs that come from MultiKueueClusters (a Secret, or a file under one directory).

Whoever may write a MultiKueueCluster or its Secret must not be able to make the manager run programs, read its
own files or send credentials in clear: a worker kubeconfig must be self-contained (no exec / auth-provider
plugins, no token/CA/client-certificate file paths), keep TLS verification on, not use basic auth, and name its
current-context. A ``locationType: Path`` kubeconfig is read only from inside one configured directory (Kueue's
``/etc/multikueue/kubeconfigs``): no ``..``, and its real path (symlinks resolved) must stay inside.

The validator is pure and returns one human-readable reason per problem, each marked malformed or insecure, so
the manager can use Kueue's reasons (``BadKubeConfig``, ``InsecureKubeConfig``) in the MultiKueueCluster
``Active=False`` condition.
"""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

DEFAULT_KUBECONFIG_DIR = "/etc/multikueue/kubeconfigs"
"""Where Kueue accepts ``locationType: Path`` kubeconfigs (its MultiKueueKubeConfigPathValidation prefix)."""


@dataclass(frozen=True, slots=True)
class Problem:
    message: str
    insecure: bool = False
    """True for a form refused because it is unsafe (plugins, file references, no TLS verification, basic auth);
    False for one that is missing or malformed."""


class KubeconfigError(ValueError):
    """A kubeconfig that cannot or must not be used; ``problems`` lists every reason.

    ``insecure`` is True when any problem is an unsafe form (Kueue's ``InsecureKubeConfig``), else the kubeconfig
    is missing or malformed (Kueue's ``BadKubeConfig``).
    """

    def __init__(self, problems: Sequence[str | Problem], *, insecure: bool = False) -> None:
        self.problems = [p.message if isinstance(p, Problem) else p for p in problems]
        self.insecure = insecure or any(isinstance(p, Problem) and p.insecure for p in problems)
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


def _check_base64(value: Any, what: str, problems: list[Problem]) -> None:
    if not isinstance(value, str) or not value.strip():
        problems.append(Problem(f"{what} is empty"))
        return
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        problems.append(Problem(f"{what} is not valid base64"))


def _url_problem(server: str) -> str | None:
    """What keeps ``server`` from being a URL a client can connect to (no host, a malformed IPv6 address, a port
    that is not a number from 1 to 65535), or None."""
    try:
        url = urlsplit(server)
        port = url.port
    except ValueError as err:
        return str(err)
    if not url.hostname:
        return "it names no host"
    if port == 0:
        return "port 0"
    return None


def _check_cluster(name: str, cluster: Mapping[str, Any], problems: list[Problem]) -> None:
    where = f'cluster "{name}"'
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        problems.append(Problem(f"{where} has no server URL"))
    elif not server.startswith("https://"):
        problems.append(Problem(f"{where} server {server!r} does not use https", insecure=True))
    else:
        broken = _url_problem(server)
        if broken is not None:
            problems.append(Problem(f"{where} server {server!r} is not a valid URL: {broken}"))
    if cluster.get("insecure-skip-tls-verify") is True:
        problems.append(
            Problem(f"{where} sets insecure-skip-tls-verify: true; TLS verification must stay on", insecure=True)
        )
    if "certificate-authority" in cluster:
        problems.append(
            Problem(
                f"{where} references a CA file (certificate-authority); use inline certificate-authority-data",
                insecure=True,
            )
        )
    if "certificate-authority-data" in cluster:
        _check_base64(cluster["certificate-authority-data"], f"{where} certificate-authority-data", problems)


def _check_user(name: str, user: Mapping[str, Any], problems: list[Problem]) -> None:
    where = f'user "{name}"'
    if "exec" in user:
        problems.append(
            Problem(f"{where} uses an exec credential plugin; only inline credentials are allowed", insecure=True)
        )
    if "auth-provider" in user:
        problems.append(
            Problem(f"{where} uses an auth-provider plugin; only inline credentials are allowed", insecure=True)
        )
    if "username" in user or "password" in user:
        problems.append(
            Problem(
                f"{where} uses basic auth (username/password), which is not allowed; "
                "use a token or a client certificate",
                insecure=True,
            )
        )
    for key, inline in _USER_FILE_KEYS.items():
        if key in user:
            problems.append(Problem(f"{where} references a file ({key}); use inline {inline}", insecure=True))
    has_cert = "client-certificate-data" in user
    has_key = "client-key-data" in user
    if has_cert != has_key:
        problems.append(Problem(f"{where} needs both client-certificate-data and client-key-data"))
    if has_cert:
        _check_base64(user["client-certificate-data"], f"{where} client-certificate-data", problems)
    if has_key:
        _check_base64(user["client-key-data"], f"{where} client-key-data", problems)


def kubeconfig_problems(config: Mapping[str, Any]) -> list[Problem]:
    """Problems that make ``config`` unusable or unsafe for a MultiKueueCluster kubeconfig; ``[]`` means OK.

    Only the entries the current context uses are checked (those are the only ones ever loaded).
    """
    current = config.get("current-context")
    if not isinstance(current, str) or not current:
        return [Problem("kubeconfig has no current-context")]
    context_entry = _named(config, "contexts", current)
    context = context_entry.get("context") if context_entry is not None else None
    if not isinstance(context, Mapping):
        return [Problem(f'current-context "{current}" is not defined in contexts')]

    problems: list[Problem] = []
    cluster_name = context.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        problems.append(Problem(f'context "{current}" names no cluster'))
    else:
        cluster_entry = _named(config, "clusters", cluster_name)
        cluster = cluster_entry.get("cluster") if cluster_entry is not None else None
        if not isinstance(cluster, Mapping):
            problems.append(
                Problem(f'cluster "{cluster_name}" (used by context "{current}") is not defined in clusters')
            )
        else:
            _check_cluster(cluster_name, cluster, problems)

    user_name = context.get("user")
    if isinstance(user_name, str) and user_name:
        user_entry = _named(config, "users", user_name)
        user = user_entry.get("user") if user_entry is not None else None
        if not isinstance(user, Mapping):
            problems.append(Problem(f'user "{user_name}" (used by context "{current}") is not defined in users'))
        else:
            _check_user(user_name, user, problems)
    return problems


def validate_kubeconfig(config: Mapping[str, Any]) -> list[str]:
    """The messages of :func:`kubeconfig_problems`."""
    return [problem.message for problem in kubeconfig_problems(config)]


def validate_kubeconfig_text(text: str) -> list[str]:
    """:func:`validate_kubeconfig` for YAML text, reporting parse errors as problems too."""
    try:
        config = load_kubeconfig_text(text)
    except KubeconfigError as exc:
        return exc.problems
    return validate_kubeconfig(config)


def parse_validated_kubeconfig(text: str) -> dict[str, Any]:
    """Parse and validate; raises :class:`KubeconfigError` listing every problem (``insecure`` when any is)."""
    config = load_kubeconfig_text(text)
    problems = kubeconfig_problems(config)
    if problems:
        raise KubeconfigError(problems)
    return config


def server_address(config: Mapping[str, Any]) -> str:
    """Where a validated kubeconfig's current context connects: its server URL with the scheme and host in lower
    case, the port written out and no trailing slash, followed by the TLS server name or the proxy it names, if
    any. Two kubeconfigs with the same address reach the same API server (the reverse need not hold: one server
    may be reached by several names)."""
    context = (_named(config, "contexts", str(config["current-context"])) or {})["context"]
    cluster = (_named(config, "clusters", str(context["cluster"])) or {})["cluster"]
    url = urlsplit(str(cluster["server"]))
    host = url.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = url.port or (443 if url.scheme.lower() == "https" else 80)
    address = f"{url.scheme.lower()}://{host}:{port}{url.path.rstrip('/')}"
    for key in ("tls-server-name", "proxy-url"):
        if cluster.get(key):
            address += f" ({key} {cluster[key]})"
    return address


def kubeconfig_path_problem(location: str, directory: str) -> str:
    """Why a ``locationType: Path`` kubeconfig ``location`` must not be read ("" when it may), lexically.

    It must be an absolute path with no ``..`` segment inside ``directory``. Symlinks are checked by
    :func:`read_kubeconfig_file` once the path is resolved.
    """
    allowed = f"kubeconfig files are only read from under {directory}"
    if not location:
        return "kubeconfig path must not be empty"
    if "\0" in location:
        return "kubeconfig path contains a NUL character"
    if not posixpath.isabs(location):
        return f"kubeconfig path {location!r} is not absolute; {allowed}"
    if ".." in location.split("/"):
        return f"kubeconfig path {location!r} contains '..'; {allowed}"
    if not _inside(posixpath.normpath(location), posixpath.normpath(directory)):
        return f"kubeconfig path {location!r} is outside {directory}; {allowed}"
    return ""


def _inside(path: str, directory: str) -> bool:
    return path != directory and path.startswith(directory.rstrip("/") + "/")


def read_kubeconfig_file(location: str, directory: str) -> str:
    """The text of the kubeconfig file ``location``, which must lie inside ``directory`` also once symlinks are
    resolved; raises :class:`KubeconfigError` saying why not (a problem of the MultiKueueCluster: ``BadKubeConfig``).
    """
    problem = kubeconfig_path_problem(location, directory)
    if problem:
        raise KubeconfigError([problem])
    real = os.path.realpath(location)
    real_directory = os.path.realpath(directory)
    if not _inside(real, real_directory):
        raise KubeconfigError(
            [
                f"kubeconfig path {location!r} resolves to {real!r}, outside {directory}; "
                f"kubeconfig files are only read from under {directory}"
            ]
        )
    try:
        with open(real, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise KubeconfigError([f"cannot read kubeconfig file {location}: {why}"]) from err
