"""The visibility API's CA and serving certificate when kfed-manager keeps them itself, as pure functions.

The chart's default makes the pair at ``helm install`` (``genCA``) and keeps it on upgrades through ``lookup``.
Where ``lookup`` sees nothing (``helm template``, Argo CD, Flux) every render would make a new pair, so the Secret and
the APIService's ``caBundle`` would change on each sync. With ``visibility.certificate.generatedBy: kfed-manager`` the
chart renders neither, and kfed-manager (``manager.visibility_certificate``) makes the pair once, stores it in the
Secret, renews it before it expires, and writes the CA into the APIService, as Kueue's internal certificate
management does for its webhooks. This module decides when a Secret's pair will not do and makes a new one.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)
"""A serving certificate this close to its end is replaced (the CA with it: both are kfed-manager's own)."""
KEYS = ("ca.crt", "tls.crt", "tls.key")


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names a client may use for the Service; the aggregator checks ``<service>.<namespace>.svc``."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


@dataclass(frozen=True)
class Pair:
    """A CA and the serving certificate it signed, as PEM."""

    ca: bytes
    cert: bytes
    key: bytes

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64), keys ``ca.crt``, ``tls.crt``, ``tls.key``."""
        return {
            name: base64.b64encode(pem).decode() for name, pem in zip(KEYS, (self.ca, self.cert, self.key), strict=True)
        }


def pair_from_secret(data: Mapping[str, str] | None) -> Pair | None:
    """The pair in a Secret's ``data``; None when a key is missing or not base64."""
    try:
        ca, cert, key = (base64.b64decode((data or {})[name], validate=True) for name in KEYS)
    except (KeyError, binascii.Error, TypeError):
        return None
    return Pair(ca=ca, cert=cert, key=key)


def pair_problem(pair: Pair | None, *, names: tuple[str, ...], now: dt.datetime) -> str | None:
    """Why ``pair`` will not serve ``names`` (a new pair is needed), or None when it will."""
    if pair is None:
        return "no certificate yet"
    try:
        ca = x509.load_pem_x509_certificate(pair.ca)
        cert = x509.load_pem_x509_certificate(pair.cert)
        key = serialization.load_pem_private_key(pair.key, password=None)
    except ValueError as err:
        return f"the certificate does not parse: {err}"
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        return "tls.key is not the key of tls.crt"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as err:
        return f"tls.crt is not signed by ca.crt: {err or type(err).__name__}"
    try:
        alternative = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        listed = set(alternative.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        listed = set()
    missing = [name for name in names if name not in listed]
    if missing:
        return f"the certificate does not name {', '.join(missing)}"
    ends = min(cert.not_valid_after_utc, ca.not_valid_after_utc)
    if ends - now <= RENEW_BEFORE:
        return f"the certificate ends {ends.isoformat()}, within {RENEW_BEFORE.days} days"
    return None


def new_pair(*, names: tuple[str, ...], now: dt.datetime) -> Pair:
    """A new CA (ten years) and a serving certificate for ``names`` it signed (one year), ECDSA P-256."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{names[0]}-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[min(2, len(names) - 1)])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SERVING_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return Pair(
        ca=ca.public_bytes(serialization.Encoding.PEM),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
