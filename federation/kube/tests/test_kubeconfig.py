from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.kube.kubeconfig import (
    KubeconfigError,
    kubeconfig_path_problem,
    kubeconfig_problems,
    parse_validated_kubeconfig,
    read_kubeconfig_file,
    server_address,
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
        ({"username": "admin", "password": "secret"}, "basic auth"),
        ({"password": "secret"}, "basic auth"),
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
        ({"server": "https://[::1"}, "is not a valid URL: Invalid IPv6 URL"),
        ({"server": "https://x:99999"}, "is not a valid URL: Port out of range"),
        ({"server": "https://x:api"}, "is not a valid URL: Port could not be cast"),
        ({"server": "https://:6443"}, "is not a valid URL: it names no host"),
        ({"server": "https://x:0"}, "is not a valid URL: port 0"),
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


@pytest.mark.parametrize(
    ("user", "cluster", "insecure"),
    [
        ({"username": "admin", "password": "secret"}, None, True),
        ({"exec": {"command": "aws"}}, None, True),
        ({"tokenFile": "/t"}, None, True),
        (None, {"server": "https://x", "insecure-skip-tls-verify": True}, True),
        (None, {"server": "http://x"}, True),
        ({"client-certificate-data": B64}, None, False),
        (None, {"certificate-authority-data": B64}, False),
        (None, {"server": "https://x", "certificate-authority-data": "%%%"}, False),
    ],
)
def test_problems_say_whether_they_are_insecure_or_malformed(
    user: dict[str, Any] | None, cluster: dict[str, Any] | None, insecure: bool
) -> None:
    problems = kubeconfig_problems(kubeconfig(user=user, cluster=cluster))
    assert [p.insecure for p in problems] == [insecure]
    with pytest.raises(KubeconfigError) as info:
        parse_validated_kubeconfig(yaml.safe_dump(kubeconfig(user=user, cluster=cluster)))
    assert info.value.insecure is insecure


def test_a_malformed_and_an_insecure_problem_together_are_insecure() -> None:
    cfg = kubeconfig(user={"username": "u", "client-certificate-data": B64})
    with pytest.raises(KubeconfigError) as info:
        parse_validated_kubeconfig(yaml.safe_dump(cfg))
    assert len(info.value.problems) == 2
    assert info.value.insecure


def test_unparseable_text_is_malformed_not_insecure() -> None:
    with pytest.raises(KubeconfigError) as info:
        parse_validated_kubeconfig("a: [")
    assert not info.value.insecure


DIR = "/etc/multikueue/kubeconfigs"


@pytest.mark.parametrize(
    ("location", "needle"),
    [
        ("", "must not be empty"),
        ("worker-1.yaml", "not absolute"),
        (f"{DIR}/../../../../etc/passwd", "contains '..'"),
        (f"{DIR}/sub/../worker-1.yaml", "contains '..'"),
        ("/etc/passwd", "outside /etc/multikueue/kubeconfigs"),
        ("/etc/multikueue/kubeconfigs-evil/w.yaml", "outside"),
        (DIR, "outside"),
        (f"{DIR}/", "outside"),
        ("/etc/multikueue/kubeconfigs\0/w", "NUL"),
    ],
)
def test_path_locations_outside_the_directory_are_refused(location: str, needle: str) -> None:
    problem = kubeconfig_path_problem(location, DIR)
    assert needle in problem
    if location:
        assert DIR in problem or "NUL" in problem


@pytest.mark.parametrize("location", [f"{DIR}/worker-1.yaml", f"{DIR}/team-a/worker-1.yaml", f"{DIR}//w.yaml"])
def test_path_locations_inside_the_directory_are_accepted(location: str) -> None:
    assert kubeconfig_path_problem(location, DIR) == ""
    assert kubeconfig_path_problem(location, DIR + "/") == ""


def test_read_kubeconfig_file_reads_inside_and_refuses_symlinks_out(tmp_path: Path) -> None:
    allowed = tmp_path / "kubeconfigs"
    allowed.mkdir()
    (allowed / "w1.yaml").write_text("current-context: w1\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for you\n")
    os.symlink(secret, allowed / "escape.yaml")
    os.symlink(allowed / "w1.yaml", allowed / "alias.yaml")
    os.symlink(tmp_path, allowed / "up")

    assert read_kubeconfig_file(str(allowed / "w1.yaml"), str(allowed)) == "current-context: w1\n"
    assert read_kubeconfig_file(str(allowed / "alias.yaml"), str(allowed)) == "current-context: w1\n"
    for escaping in (allowed / "escape.yaml", allowed / "up" / "secret.txt"):
        with pytest.raises(KubeconfigError) as info:
            read_kubeconfig_file(str(escaping), str(allowed))
        assert "resolves to" in str(info.value)
        assert str(secret) in str(info.value)
        assert not info.value.insecure
    with pytest.raises(KubeconfigError) as info:
        read_kubeconfig_file(str(allowed / "missing.yaml"), str(allowed))
    assert "cannot read kubeconfig file" in str(info.value)
    with pytest.raises(KubeconfigError, match=r"contains '\.\.'"):
        read_kubeconfig_file(f"{allowed}/../secret.txt", str(allowed))


@pytest.mark.parametrize(
    ("cluster", "address"),
    [
        ({"server": "https://10.0.0.1:6443"}, "https://10.0.0.1:6443"),
        ({"server": "HTTPS://API.Example.COM/"}, "https://api.example.com:443"),
        ({"server": "https://api.example.com:443/prefix/"}, "https://api.example.com:443/prefix"),
        ({"server": "https://[::1]:6443"}, "https://[::1]:6443"),
        ({"server": "https://10.0.0.1:6443", "tls-server-name": "w2"}, "https://10.0.0.1:6443 (tls-server-name w2)"),
        (
            {"server": "https://10.0.0.1:6443", "proxy-url": "http://p:3128"},
            "https://10.0.0.1:6443 (proxy-url http://p:3128)",
        ),
    ],
)
def test_the_server_address_is_the_url_in_one_spelling_with_what_else_picks_the_server(
    cluster: dict[str, Any], address: str
) -> None:
    assert server_address(kubeconfig(cluster={**cluster, "certificate-authority-data": B64})) == address
