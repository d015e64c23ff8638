from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from federation.kube.kubeconfig import (
    KubeconfigError,
    parse_validated_kubeconfig,
    validate_kubeconfig,
    validate_kubeconfig_text,
)

B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n").decode()


def kubeconfig(*, cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "w1",
        "contexts": [{"name": "w1", "context": {"cluster": "c1", "user": "u1"}}],
        "clusters": [
            {"name": "c1", "cluster": cluster or {"server": "https://10.0.0.1:6443", "certificate-authority-data": B64}}
        ],
        "users": [{"name": "u1", "user": user or {"token": "abc"}}],
    }


def test_valid_token_kubeconfig_has_no_problems() -> None:
    assert validate_kubeconfig(kubeconfig()) == []


def test_valid_client_cert_kubeconfig_has_no_problems() -> None:
    cfg = kubeconfig(user={"client-certificate-data": B64, "client-key-data": B64})
    assert validate_kubeconfig(cfg) == []
    assert parse_validated_kubeconfig(yaml.safe_dump(cfg))["current-context"] == "w1"


@pytest.mark.parametrize(
    ("user", "needle"),
    [
        ({"exec": {"command": "aws"}}, "exec credential plugin"),
        ({"auth-provider": {"name": "gcp"}}, "auth-provider plugin"),
        ({"tokenFile": "/var/run/token"}, "tokenFile"),
        ({"client-certificate": "/c.pem", "client-key-data": B64}, "client-certificate"),
        ({"client-certificate-data": B64, "client-key": "/k.pem"}, "client-key"),
        ({"client-certificate-data": B64}, "needs both"),
        ({"client-certificate-data": "%%%", "client-key-data": B64}, "not valid base64"),
    ],
)
def test_user_problems(user: dict[str, Any], needle: str) -> None:
    problems = validate_kubeconfig(kubeconfig(user=user))
    assert any(needle in p for p in problems), problems
    assert all('user "u1"' in p for p in problems)


@pytest.mark.parametrize(
    ("cluster", "needle"),
    [
        ({"server": "https://x", "insecure-skip-tls-verify": True}, "insecure-skip-tls-verify"),
        ({"server": "https://x", "certificate-authority": "/ca.pem"}, "CA file"),
        ({"server": "http://x"}, "does not use https"),
        ({"certificate-authority-data": B64}, "no server URL"),
        ({"server": "https://x", "certificate-authority-data": ""}, "is empty"),
    ],
)
def test_cluster_problems(cluster: dict[str, Any], needle: str) -> None:
    problems = validate_kubeconfig(kubeconfig(cluster=cluster))
    assert any(needle in p for p in problems), problems


def test_insecure_false_is_fine() -> None:
    cfg = kubeconfig(cluster={"server": "https://x", "insecure-skip-tls-verify": False})
    assert validate_kubeconfig(cfg) == []


def test_missing_current_context() -> None:
    cfg = kubeconfig()
    del cfg["current-context"]
    assert validate_kubeconfig(cfg) == ["kubeconfig has no current-context"]


def test_current_context_not_defined() -> None:
    cfg = kubeconfig()
    cfg["current-context"] = "nope"
    assert validate_kubeconfig(cfg) == ['current-context "nope" is not defined in contexts']


def test_undefined_cluster_and_user() -> None:
    cfg = kubeconfig()
    cfg["clusters"] = []
    cfg["users"] = []
    problems = validate_kubeconfig(cfg)
    assert len(problems) == 2
    assert 'cluster "c1"' in problems[0]
    assert 'user "u1"' in problems[1]


def test_every_problem_is_reported_once() -> None:
    cfg = kubeconfig(
        cluster={"server": "https://x", "insecure-skip-tls-verify": True, "certificate-authority": "/ca"},
        user={"exec": {"command": "x"}, "tokenFile": "/t"},
    )
    problems = validate_kubeconfig(cfg)
    assert len(problems) == 4
    with pytest.raises(KubeconfigError) as info:
        parse_validated_kubeconfig(yaml.safe_dump(cfg))
    assert info.value.problems == problems
    assert str(info.value) == "; ".join(problems)


def test_unused_entries_are_not_checked() -> None:
    cfg = kubeconfig()
    cfg["users"].append({"name": "other", "user": {"exec": {"command": "x"}}})
    assert validate_kubeconfig(cfg) == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [("a: [", "not valid YAML at line"), ("- 1\n- 2\n", "not a YAML mapping"), ("", "not a YAML mapping")],
)
def test_text_problems(text: str, needle: str) -> None:
    problems = validate_kubeconfig_text(text)
    assert len(problems) == 1
    assert needle in problems[0]
