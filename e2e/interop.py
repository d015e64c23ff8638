"""Kueue's side of a mixed federation, for the drop-in tests: the credential Kueue documents for a MultiKueue manager
on a worker, and pointing a MultiKueueCluster at it.

Kueue's setup guide (site/static/examples/multikueue/create-multikueue-kubeconfig.sh, v0.19) makes a
ServiceAccount ``multikueue-sa`` in ``kueue-system`` on each worker, bound to a ClusterRole with only what the
MultiKueue manager does there, and wraps a token of it in a kubeconfig. ``KUEUE_MANAGER_RULES`` are that role's
rules for batch/Job and Kueue's own objects (its rules for JobSet, Kubeflow, Ray, LeaderWorkerSet and AppWrapper
are for integrations the rig does not run). Nothing in it covers ``clustercapacities.kfed.io``.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import yaml

from e2e.rig.controllers import KFED_NAMESPACE

if TYPE_CHECKING:
    from e2e.rig.federation import Federation

KUEUE_NAMESPACE = "kueue-system"
MULTIKUEUE_SA = "multikueue-sa"

KUEUE_MANAGER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
]


def kueue_manager_kubeconfig(fed: Federation, worker: str, *, rules: list[dict[str, Any]] | None = None) -> str:
    """What create-multikueue-kubeconfig.sh makes on ``worker``: a kubeconfig with a token of ``multikueue-sa``,
    whose ClusterRole has only ``KUEUE_MANAGER_RULES`` (or ``rules``)."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": MULTIKUEUE_SA, "namespace": KUEUE_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{MULTIKUEUE_SA}-role"},
            "rules": KUEUE_MANAGER_RULES if rules is None else rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{MULTIKUEUE_SA}-crb"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{MULTIKUEUE_SA}-role",
            },
            "subjects": [{"kind": "ServiceAccount", "name": MULTIKUEUE_SA, "namespace": KUEUE_NAMESPACE}],
        },
    ]
    fed.kubectl(worker, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    token = fed.kubectl(
        worker, "-n", KUEUE_NAMESPACE, "create", "token", MULTIKUEUE_SA, "--duration=48h"
    ).stdout.strip()
    admin = yaml.safe_load(fed.kubeconfig(worker).read_text())["clusters"][0]["cluster"]
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": worker, "cluster": {k: admin[k] for k in ("server", "certificate-authority-data")}}],
            "users": [{"name": MULTIKUEUE_SA, "user": {"token": token}}],
            "contexts": [{"name": worker, "context": {"cluster": worker, "user": MULTIKUEUE_SA}}],
            "current-context": worker,
        }
    )


def use_kubeconfig(fed: Federation, worker: str, text: str, *, namespace: str = KFED_NAMESPACE) -> None:
    """Replace the kubeconfig in the Secret of ``worker``'s MultiKueueCluster (``<worker>-kubeconfig``)."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{worker}-kubeconfig", "namespace": namespace},
        "data": {"kubeconfig": base64.b64encode(text.encode()).decode()},
    }
    fed.kubectl("manager", "apply", "-f", "-", input=json.dumps(secret))
