"""Ordering two resourceVersions of one resource type, as Kubernetes allows since v1.35.

kube-apiserver's resourceVersions are decimal integers that only grow within a resource type (KEP-5504, Comparable
Resource Version, stable in v1.35; the API concepts page says so too), for built-in types and custom resources
alike. An extension API server may use another form, so a version that is not a plain decimal integer without a
leading zero is compared for equality only: neither is then known to be newer.
"""

from __future__ import annotations


def _integer(version: str) -> bool:
    return version.isascii() and version.isdigit() and (version == "0" or not version.startswith("0"))


def not_older(seen: str, written: str) -> bool:
    """Whether ``seen`` is ``written`` or a later version of the same resource type (False when either is not in
    kube-apiserver's form and they differ)."""
    if seen == written:
        return True
    if _integer(seen) and _integer(written):
        return (len(seen), seen) > (len(written), written)  # the integers' order, without parsing them
    return False
