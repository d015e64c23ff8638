"""The visibility API's CA and serving certificate when kfed-manager keeps them itself, as pure functions.

The chart's default makes the pair at ``helm install`` (``genCA``) and keeps it on upgrades through ``lookup``.
Where ``lookup`` sees nothing (``helm template``, Argo CD, Flux) every render would make a new pair, so the Secret and
the APIService's ``caBundle`` would change on each sync. With ``visibility.certificate.generatedBy: kfed-manager`` the
chart renders neither, and kfed-manager (``manager.visibility_certificate``) makes them once, stores them in the
Secret, renews them before they end, and writes the CA into the APIService, as Kueue's internal certificate
management does for its webhooks. This module decides when a Secret's pair will not do and makes a new one.

The Secret keeps the CA's key too, so renewing the serving certificate (yearly) keeps the CA (ten years): the
APIService's ``caBundle`` does not change, and a replica still serving the previous certificate for up to a minute
is still verified. Only a CA that is missing, broken or near its own end is replaced, and the caBundle with it.
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
"""A certificate this close to its end is replaced."""
KEYS = ("ca.crt", "ca.key", "tls.crt", "tls.key")


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names a client may use for the Service; the aggregator checks ``<service>.<namespace>.svc``."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


@dataclass(frozen=True)
class Pair:
    """A CA with its key and the serving certificate it signed with its key, as PEM."""

    ca: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64), keys ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``."""
        pems = (self.ca, self.ca_key, self.cert, self.key)
        return {name: base64.b64encode(pem).decode() for name, pem in zip(KEYS, pems, strict=True)}


def pair_from_secret(data: Mapping[str, str] | None) -> Pair | None:
    """The pair in a Secret's ``data``; None when a key is missing or not base64."""
    try:
        ca, ca_key, cert, key = (base64.b64decode((data or {})[name], validate=True) for name in KEYS)
    except (KeyError, binascii.Error, TypeError):
        return None
    return Pair(ca=ca, ca_key=ca_key, cert=cert, key=key)


def _public(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _spki(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def ca_problem(pair: Pair | None, *, now: dt.datetime) -> str | None:
    """Why the pair's CA cannot sign a new serving certificate (a new CA is needed), or None when it can."""
    if pair is None:
        return "no certificate yet"
    try:
        ca = x509.load_pem_x509_certificate(pair.ca)
        if not isinstance(serialization.load_pem_private_key(pair.ca_key, password=None), ec.EllipticCurvePrivateKey):
            return "ca.key is not an ECDSA key (kfed-manager makes its CA's keys ECDSA P-256)"
        if _public(pair.ca_key) != _spki(ca):
            return "ca.key is not the key of ca.crt"
    except (ValueError, TypeError) as err:
        return f"the CA does not parse: {err}"
    if ca.not_valid_after_utc - now <= RENEW_BEFORE:
        return f"the CA ends {ca.not_valid_after_utc.isoformat()}, within {RENEW_BEFORE.days} days"
    return None


def pair_problem(pair: Pair | None, *, names: tuple[str, ...], now: dt.datetime) -> str | None:
    """Why ``pair`` will not serve ``names`` (a new serving certificate is needed), or None when it will."""
    if (problem := ca_problem(pair, now=now)) is not None or pair is None:
        return problem
    try:
        ca = x509.load_pem_x509_certificate(pair.ca)
        cert = x509.load_pem_x509_certificate(pair.cert)
        if _public(pair.key) != _spki(cert):
            return "tls.key is not the key of tls.crt"
    except (ValueError, TypeError) as err:
        return f"the certificate does not parse: {err}"
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
    if cert.not_valid_after_utc - now <= RENEW_BEFORE:
        return f"the certificate ends {cert.not_valid_after_utc.isoformat()}, within {RENEW_BEFORE.days} days"
    return None


def _new_ca(name: str, now: dt.datetime) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return ca.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def new_pair(*, names: tuple[str, ...], now: dt.datetime, keep_ca: Pair | None = None) -> Pair:
    """A serving certificate for ``names`` (one year, ECDSA P-256) signed by ``keep_ca``'s CA, or by a new CA (ten
    years) when ``keep_ca`` is None (the caller keeps a CA only when :func:`ca_problem` finds nothing)."""
    ca_pem, ca_key_pem = (keep_ca.ca, keep_ca.ca_key) if keep_ca is not None else _new_ca(f"{names[0]}-ca", now)
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey), "kfed-manager's CA keys are ECDSA"
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[min(2, len(names) - 1)])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SERVING_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return Pair(ca=ca_pem, ca_key=ca_key_pem, cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key))
