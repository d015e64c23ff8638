"""Kubeconfig files with every credential inline, the only form kfed-manager accepts for worker clusters."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from e2e.rig.pki import KeyPair


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render_kubeconfig(*, cluster: str, server: str, ca_pem: bytes, client: KeyPair, user: str = "admin") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}],
        "users": [
            {
                "name": f"{cluster}-{user}",
                "user": {
                    "client-certificate-data": _b64(client.cert_pem),
                    "client-key-data": _b64(client.key_pem),
                },
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-{user}"}}],
        "current-context": cluster,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write_kubeconfig(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path
