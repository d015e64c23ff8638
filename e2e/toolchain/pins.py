"""The pinned versions of every binary the rig runs. Changing a pin changes the cache key, nothing else."""

from __future__ import annotations

from dataclasses import dataclass

KUBERNETES = "v1.36.3"
"""k8s.io/kubernetes; every staging module (k8s.io/api, k8s.io/client-go, ...) is pinned to the matching v0.x."""
ETCD = "v3.6.16"
KWOK = "v0.8.0"
HELM = "v4.3.1"
KUEUE = "v0.19.1"
"""Stock Kueue for the compare bench only (e2e/toolchain/kueue.py builds it on demand, outside `make toolchain`)."""
MIN_GO = (1, 26)
"""Kubernetes v1.36 declares `go 1.26.0` in its go.mod."""

# Bump when the way binaries are built changes, so caches built the old way are not reused.
RECIPE = 1


@dataclass(frozen=True)
class Component:
    """One Go module built into one or more binaries."""

    name: str
    module: str
    version: str
    packages: tuple[str, ...]
    """Main packages to build; each becomes a binary named after its last path element (or ``binary_names``)."""
    binary_names: tuple[str, ...]
    ldflags: tuple[str, ...] = ()


def _kube_version_flags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


COMPONENTS: tuple[Component, ...] = (
    Component(
        name="etcd",
        module="go.etcd.io/etcd/server/v3",
        version=ETCD,
        packages=("go.etcd.io/etcd/server/v3",),
        binary_names=("etcd",),
    ),
    Component(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=KUBERNETES,
        packages=(
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
        ),
        binary_names=("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"),
        ldflags=_kube_version_flags(KUBERNETES),
    ),
    Component(
        name="kwok",
        module="sigs.k8s.io/kwok",
        version=KWOK,
        packages=("sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"),
        binary_names=("kwok", "kwokctl"),
        ldflags=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={KWOK}",),
    ),
    Component(
        name="helm",
        module="helm.sh/helm/v4",
        version=HELM,
        packages=("helm.sh/helm/v4/cmd/helm",),
        binary_names=("helm",),
        ldflags=(f"-X helm.sh/helm/v4/internal/version.version={HELM}",),
    ),
)
