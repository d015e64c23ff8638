"""kfed-manager's own visibility certificate: when a Secret's pair will not do, and the pairs it makes."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ssl
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509

from manager.decisions.visibility_certificate import (
    RENEW_BEFORE,
    SERVING_DAYS,
    Pair,
    ca_problem,
    new_pair,
    pair_from_secret,
    pair_problem,
    service_names,
)

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
NAMES = service_names("kfed-manager-visibility", "kfed-system")


@pytest.fixture(scope="module")
def pair() -> Pair:
    return new_pair(names=NAMES, now=NOW)


def test_the_names_include_the_one_the_aggregator_checks() -> None:
    assert "kfed-manager-visibility.kfed-system.svc" in NAMES


def test_a_new_pair_does_and_survives_the_secret(pair: Pair) -> None:
    assert pair_problem(pair, names=NAMES, now=NOW) is None
    data = pair.secret_data()
    assert sorted(data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert pair_from_secret(data) == pair


def test_a_new_pair_is_verified_by_its_ca_for_the_service_name(tmp_path: Path) -> None:
    pair = new_pair(names=NAMES, now=dt.datetime.now(dt.UTC))  # the TLS stack checks validity against the clock
    (tmp_path / "ca.crt").write_bytes(pair.ca)
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    (tmp_path / "tls.crt").write_bytes(pair.cert)
    (tmp_path / "tls.key").write_bytes(pair.key)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(client_in, client_out, server_hostname="kfed-manager-visibility.kfed-system.svc")
    s = server.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):  # drive the handshake in memory; the client raises if the certificate does not verify
        for side in (c, s):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    c.do_handshake()
    assert c.getpeercert() is not None


def test_missing_or_broken_data_needs_a_new_pair(pair: Pair) -> None:
    assert pair_problem(pair_from_secret(None), names=NAMES, now=NOW) == "no certificate yet"
    partial = {k: v for k, v in pair.secret_data().items() if k != "ca.crt"}
    assert pair_from_secret(partial) is None
    assert pair_from_secret({**pair.secret_data(), "tls.key": "not base64!"}) is None
    garbled = replace(pair, cert=b"-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n")
    assert (pair_problem(garbled, names=NAMES, now=NOW) or "").startswith("the certificate does not parse")


def test_a_pair_from_another_ca_or_key_is_refused(pair: Pair) -> None:
    other = new_pair(names=NAMES, now=NOW)
    foreign = replace(pair, ca=other.ca, ca_key=other.ca_key)
    assert (pair_problem(foreign, names=NAMES, now=NOW) or "").startswith("tls.crt is not signed by ca.crt")
    assert pair_problem(replace(pair, key=other.key), names=NAMES, now=NOW) == "tls.key is not the key of tls.crt"
    assert ca_problem(replace(pair, ca_key=other.ca_key), now=NOW) == "ca.key is not the key of ca.crt"


def test_a_renewed_serving_certificate_keeps_the_ca_and_so_the_ca_bundle(pair: Pair) -> None:
    later = NOW + dt.timedelta(days=SERVING_DAYS - 10)
    assert pair_problem(pair, names=NAMES, now=later) is not None
    assert ca_problem(pair, now=later) is None
    renewed = new_pair(names=NAMES, now=later, keep_ca=pair)
    assert (renewed.ca, renewed.ca_key) == (pair.ca, pair.ca_key)
    assert renewed.cert != pair.cert
    assert pair_problem(renewed, names=NAMES, now=later) is None


def test_a_ca_near_its_end_is_replaced(pair: Pair) -> None:
    ends = x509.load_pem_x509_certificate(pair.ca).not_valid_after_utc
    problem = ca_problem(pair, now=ends - dt.timedelta(days=1))
    assert problem is not None
    assert "the CA ends" in problem


def test_a_pair_for_other_names_is_made_again(pair: Pair) -> None:
    renamed = service_names("other", "kfed-system")
    assert pair_problem(pair, names=renamed, now=NOW) == (
        "the certificate does not name other, other.kfed-system, other.kfed-system.svc, "
        "other.kfed-system.svc.cluster.local"
    )


def test_a_pair_is_renewed_before_it_ends(pair: Pair) -> None:
    ends = x509.load_pem_x509_certificate(pair.cert).not_valid_after_utc
    assert ends - NOW >= dt.timedelta(days=SERVING_DAYS - 1)
    assert pair_problem(pair, names=NAMES, now=ends - RENEW_BEFORE - dt.timedelta(hours=1)) is None
    problem = pair_problem(pair, names=NAMES, now=ends - RENEW_BEFORE + dt.timedelta(hours=1))
    assert problem is not None
    assert "within 30 days" in problem


def test_the_secret_data_is_base64_pem(pair: Pair) -> None:
    assert base64.b64decode(pair.secret_data()["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
