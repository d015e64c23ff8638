"""Base classes every API model derives from, and the description of a kind as a Kubernetes resource.

`KubeModel` fixes the conventions once: camelCase JSON names (Python code may use either), unknown fields
refused (like `kubectl apply`'s strict field validation), and serialisation that omits every field the object
did not set, so `model_validate(x).model_dump(...) == x` and server-side defaults are left to the apiserver.
Class-level CEL rules declared in `__crd_rules__` are also checked in Python when they have a Python twin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from federation.api.meta import ObjectMeta
from federation.api.schema import Rule


class KubeModel(BaseModel):
    """A piece of a Kubernetes object: camelCase on the wire, strict about unknown fields, unset stays unset."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )

    __crd_rules__: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        for rule in type(self).__crd_rules__:
            if rule.check is not None and not rule.check(self):
                raise ValueError(rule.message)
        return self

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            present = self.model_fields_set
            for name, field in type(self).model_fields.items():
                if name not in present:
                    data.pop(field.alias or name, None)
                    data.pop(name, None)
        return data


Scope = Literal["Namespaced", "Cluster"]


@dataclass(frozen=True)
class PrinterColumn:
    """One `additionalPrinterColumns` entry (what `kubectl get` shows)."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class CrdInfo:
    """How a kind is served: its group/version, names, scope and what `kubectl get` prints."""

    group: str
    version: str
    kind: str
    plural: str
    scope: Scope
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"


KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/{KUEUE_VERSION}"
KFED_GROUP = "kfed.io"
KFED_VERSION = "v1alpha1"
KFED_API_VERSION = f"{KFED_GROUP}/{KFED_VERSION}"

# Kueue describes the Age column of each of its kinds so (its Workload's words, copied)
AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time this workload was created")


class ApiObject(KubeModel):
    """A top-level object. Subclasses narrow `api_version`/`kind` to literals and set `resource`."""

    crd: ClassVar[CrdInfo]

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _always_typed(self) -> Self:
        # apiVersion and kind are always serialised, even when the object was built in Python without them.
        self.model_fields_set.update({"api_version", "kind"})
        return self

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    def to_manifest(self) -> dict[str, Any]:
        """The object as JSON-ready data for the apiserver (what `kubectl apply -f` would send)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
