"""Certificates and keys for one local cluster: a CA, the apiserver's serving cert, client certs, an SA key, and a
separate front-proxy CA with the client cert the apiserver's aggregator presents to aggregated API servers.

ECDSA P-256 keeps generation fast (milliseconds), which matters because every rig run makes fresh ones.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


class CertificateAuthority:
    """A throwaway CA that signs the serving and client certificates of one cluster."""

    def __init__(self, common_name: str) -> None:
        self._key = _key()
        now = dt.datetime.now(dt.UTC)
        self._name = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def pair(self) -> KeyPair:
        return KeyPair(self._cert.public_bytes(serialization.Encoding.PEM), _key_pem(self._key))

    def issue(
        self, common_name: str, *, org: str | None = None, server_names: tuple[str, ...] = (), client: bool = True
    ) -> KeyPair:
        key = _key()
        now = dt.datetime.now(dt.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, org))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server_names:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            alt: list[x509.GeneralName] = []
            for item in server_names:
                try:
                    alt.append(x509.IPAddress(ipaddress.ip_address(item)))
                except ValueError:
                    alt.append(x509.DNSName(item))
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


APISERVER_NAMES = (
    "127.0.0.1",
    "10.96.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


FRONT_PROXY_CLIENT = "front-proxy-client"
"""The common name of the aggregator's client cert, the one name in --requestheader-allowed-names (kubeadm's)."""


@dataclass(frozen=True)
class ClusterPki:
    """Paths of every PEM file one cluster's processes read."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    clients: dict[str, KeyPair]
    """Client identities by role: admin, controller-manager, scheduler."""
    front_proxy_ca_cert: Path
    """The CA aggregated API servers trust for the aggregator's requests (--requestheader-client-ca-file)."""
    front_proxy_client_cert: Path
    front_proxy_client_key: Path
    """The aggregator's client identity, ``front-proxy-client`` (--proxy-client-cert-file / -key-file)."""


def write_cluster_pki(directory: Path, *, cluster: str) -> ClusterPki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(f"kfed-rig-{cluster}-ca")
    serving = ca.issue("kube-apiserver", server_names=APISERVER_NAMES, client=False)
    clients = {
        "admin": ca.issue("kfed-rig-admin", org="system:masters"),
        "controller-manager": ca.issue("system:kube-controller-manager"),
        "scheduler": ca.issue("system:kube-scheduler"),
    }
    front_proxy_ca = CertificateAuthority(f"kfed-rig-{cluster}-front-proxy-ca")
    front_proxy_client = front_proxy_ca.issue(FRONT_PROXY_CLIENT)
    sa = _key()
    files = {
        "ca.crt": ca.pair.cert_pem,
        "ca.key": ca.pair.key_pem,
        "apiserver.crt": serving.cert_pem,
        "apiserver.key": serving.key_pem,
        "sa.key": _key_pem(sa),
        "sa.pub": sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        "front-proxy-ca.crt": front_proxy_ca.pair.cert_pem,
        "front-proxy-client.crt": front_proxy_client.cert_pem,
        "front-proxy-client.key": front_proxy_client.key_pem,
    }
    for role, pair in clients.items():
        files[f"{role}.crt"] = pair.cert_pem
        files[f"{role}.key"] = pair.key_pem
    for name, data in files.items():
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
    return ClusterPki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        clients=clients,
        front_proxy_ca_cert=directory / "front-proxy-ca.crt",
        front_proxy_client_cert=directory / "front-proxy-client.crt",
        front_proxy_client_key=directory / "front-proxy-client.key",
    )
