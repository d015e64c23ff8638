from e2e.toolchain import pins
from e2e.toolchain.build import go_binary_name, staging_replacements

KUBE_GOMOD = """\
module k8s.io/kubernetes

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-openapi => k8s.io/kube-openapi v0.0.0-2025
)
"""


def test_staging_modules_map_to_the_published_minor_release() -> None:
    assert staging_replacements(KUBE_GOMOD, "v1.36.3") == [("k8s.io/api", "v0.36.3"), ("k8s.io/client-go", "v0.36.3")]


def test_binary_name_skips_major_version_suffix() -> None:
    assert go_binary_name("go.etcd.io/etcd/server/v3") == "server"
    assert go_binary_name("k8s.io/kubernetes/cmd/kubectl") == "kubectl"


def test_every_component_names_one_binary_per_package() -> None:
    for comp in pins.COMPONENTS:
        assert len(comp.packages) == len(comp.binary_names), comp.name
    kube = next(c for c in pins.COMPONENTS if c.name == "kubernetes")
    assert f"-X k8s.io/component-base/version.gitVersion={pins.KUBERNETES}" in kube.ldflags
