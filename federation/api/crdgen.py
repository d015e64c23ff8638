"""Generate kfed's CustomResourceDefinitions from the API models.

`render_crds()` is pure (file name -> YAML text); `python -m federation.api.crdgen CHARTS_DIR` (what `make crds`
runs) writes the same files into both charts' `crds/` directories, since the manager's cluster and every worker
need the Kueue kinds and ClusterCapacity alike. A unit test fails when the committed files differ.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from federation.api.base import ApiObject
from federation.api.kinds import ALL_KINDS
from federation.api.schema import JsonDict, model_schema

CHARTS = ("kfed-manager", "kfed-agent")
HEADER = "# Generated from federation/api by `make crds` (python -m federation.api.crdgen charts). Do not edit.\n"


def file_name(kind: type[ApiObject]) -> str:
    return f"{kind.crd.group}_{kind.crd.plural}.yaml"


def openapi_schema(kind: type[ApiObject]) -> JsonDict:
    """The version's openAPIV3Schema: the model's schema with the root fields Kubernetes owns left open."""
    schema = model_schema(kind)
    props = schema["properties"]
    props["apiVersion"] = {
        "description": "APIVersion defines the versioned schema of this representation of an object.",
        "type": "string",
    }
    props["kind"] = {"description": "Kind is a string value representing the REST resource.", "type": "string"}
    props["metadata"] = {"type": "object"}
    required = [r for r in schema.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return schema


def crd(kind: type[ApiObject]) -> JsonDict:
    res = kind.crd
    names: JsonDict = {
        "kind": res.kind,
        "listKind": f"{res.kind}List",
        "plural": res.plural,
        "singular": res.singular,
    }
    if res.short_names:
        names["shortNames"] = list(res.short_names)
    if res.categories:
        names["categories"] = list(res.categories)
    version: JsonDict = {"name": res.version, "served": True, "storage": True}
    if res.printer_columns:
        version["additionalPrinterColumns"] = [_column(c) for c in res.printer_columns]
    version["schema"] = {"openAPIV3Schema": openapi_schema(kind)}
    if res.status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": res.crd_name, "labels": {"app.kubernetes.io/part-of": "kfed"}},
        "spec": {"group": res.group, "names": names, "scope": res.scope, "versions": [version]},
    }


def _column(column: Any) -> JsonDict:
    out: JsonDict = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    if column.description:
        out["description"] = column.description
    if column.priority:
        out["priority"] = column.priority
    return out


def render_crds() -> dict[str, str]:
    """Every CRD as YAML text, keyed by file name (`<group>_<plural>.yaml`)."""
    return {file_name(kind): HEADER + _to_yaml(crd(kind)) for kind in ALL_KINDS}


def _to_yaml(data: JsonDict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120, allow_unicode=True)


def write_crds(charts_dir: Path) -> list[Path]:
    """Write the CRDs into every chart's crds/ directory, removing generated files that no longer exist."""
    rendered = render_crds()
    written: list[Path] = []
    for chart in CHARTS:
        target = charts_dir / chart / "crds"
        target.mkdir(parents=True, exist_ok=True)
        for stale in target.glob("*.yaml"):
            if stale.name not in rendered:
                stale.unlink()
        for name, text in rendered.items():
            path = target / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m federation.api.crdgen CHARTS_DIR", file=sys.stderr)
        return 2
    paths = write_crds(Path(args[0]))
    print(f"wrote {len(paths)} CRD files under {args[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
