"""A light ObjectMeta: the metadata fields kfed reads or writes, with every other field kept as-is.

Objects read from an apiserver carry more metadata than kfed uses (managedFields, generateName, ...). Those are
preserved as extra fields so an object read, changed and written back loses nothing. This model deliberately does
not derive from `KubeModel` (which refuses unknown fields) to avoid an import cycle and because metadata is the one
place where unknown fields are normal.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from federation.api.common import Bool, Int64, Time


class _MetaModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for name, field in type(self).model_fields.items():
                if name not in self.model_fields_set:
                    data.pop(field.alias or name, None)
                    data.pop(name, None)
        return data


class OwnerReference(_MetaModel):
    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str
    uid: str
    controller: Bool | None = None
    block_owner_deletion: Bool | None = None


class ObjectMeta(_MetaModel):
    """metav1.ObjectMeta, the fields kfed uses typed; any other metadata field preserved untouched."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: Int64 | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None

    def label(self, key: str) -> str | None:
        return (self.labels or {}).get(key)

    def annotation(self, key: str) -> str | None:
        return (self.annotations or {}).get(key)
