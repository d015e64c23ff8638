"""Turn the pydantic API models into Kubernetes structural OpenAPI v3 schemas.

The models are the single source of truth for kfed's CRDs: field names, types, limits and enums come from the
pydantic annotations; what pydantic cannot express (list semantics, CEL rules, server-side defaults, formats) is
attached as `Crd` and `Rule` markers. This module walks the models directly (not pydantic's JSON schema) so every
node is typed and inlined, as the apiserver's structural-schema rules require.

It also holds the two pure operations the apiserver performs with such a schema, so callers and tests can
predict what gets stored: `apply_defaults` (structural defaulting) and `prune` (dropping unknown fields).
"""

from __future__ import annotations

import copy
import functools
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, GetCoreSchemaHandler
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, core_schema

JsonDict = dict[str, Any]

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""The pattern Kubernetes publishes for resource.Quantity in CRD schemas."""


@dataclass(frozen=True)
class Rule:
    """One CEL validation (`x-kubernetes-validations` entry) plus, where possible, its Python twin.

    `check` receives the validated model (class-level rules) or field value (field-level rules) and returns True
    when the object is valid. Transition rules (those reading `oldSelf`) have no Python twin: they need the
    previous object, which only the apiserver has.
    """

    rule: str
    message: str
    check: Callable[[Any], bool] | None = None

    @property
    def is_transition(self) -> bool:
        return "oldSelf" in self.rule

    def to_openapi(self) -> JsonDict:
        return {"rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class Crd:
    """CRD-only facts about a field or type, attached as `Annotated` metadata (pydantic ignores it)."""

    defaulted: bool = False
    """Publish the pydantic default as the schema `default` (the apiserver fills it in when absent)."""
    list_type: Literal["atomic", "set", "map"] | None = None
    map_keys: tuple[str, ...] = ()
    map_type: Literal["atomic", "granular"] | None = None
    format: str | None = None
    rules: tuple[Rule, ...] = ()
    int_or_string: bool = False
    pattern: str | None = None
    """A pattern published only in the schema (the model checks it some other way, e.g. int-or-string)."""
    preserve_unknown: bool = False
    description: str | None = None
    extra: tuple[tuple[str, Any], ...] = ()
    """Further schema keys, as (key, value) pairs (kept hashable: markers live inside type annotations)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Make pydantic run the Python twins of this marker's CEL rules on the field value."""
        schema = handler(source)
        checks = [r for r in self.rules if r.check is not None]
        if not checks and self.list_type not in ("set", "map"):
            return schema

        def run(value: Any) -> Any:
            if value is None:
                return value
            if self.list_type in ("set", "map"):
                _check_unique(value, self.map_keys)
            for rule in checks:
                assert rule.check is not None
                if not rule.check(value):
                    raise ValueError(rule.message)
            return value

        return core_schema.no_info_after_validator_function(run, schema)


def _check_unique(items: list[Any], keys: tuple[str, ...]) -> None:
    """The apiserver refuses duplicate entries in `set` lists and duplicate keys in `map` lists."""
    seen: set[Any] = set()
    for item in items:
        key = tuple(_json_attr(item, k) for k in keys) if keys else item
        if key in seen:
            raise ValueError(f"duplicate entry {key!r}")
        seen.add(key)


def _json_attr(item: Any, key: str) -> Any:
    if isinstance(item, BaseModel):
        for name, info in type(item).model_fields.items():
            if (info.alias or name) == key:
                return getattr(item, name)
    return item.get(key) if isinstance(item, dict) else None


class SchemaError(TypeError):
    """A model uses a Python type this generator does not know how to express structurally."""


def model_schema(model: type[BaseModel]) -> JsonDict:
    """The structural schema of one model: an object with every field inlined (a fresh copy each call)."""
    return copy.deepcopy(_model_schema_cached(model))


@functools.cache
def _model_schema_cached(model: type[BaseModel]) -> JsonDict:
    return _build_model_schema(model)


def _build_model_schema(model: type[BaseModel]) -> JsonDict:
    properties: JsonDict = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        properties[key] = field_schema(info, owner=model)
        if info.is_required():
            required.append(key)
    out: JsonDict = {}
    doc = _doc(model)
    if doc:
        out["description"] = doc
    out["type"] = "object"
    out["properties"] = properties
    if required:
        out["required"] = required
    rules: tuple[Rule, ...] = getattr(model, "__crd_rules__", ())
    if rules:
        out["x-kubernetes-validations"] = [r.to_openapi() for r in rules]
    return out


def field_schema(info: FieldInfo, *, owner: type[BaseModel]) -> JsonDict:
    if info.annotation is None:
        raise SchemaError(f"{owner.__name__}: field without annotation")
    schema = type_schema(info.annotation, list(info.metadata))
    if info.description:
        schema = {"description": info.description, **schema}
    markers = [m for m in info.metadata if isinstance(m, Crd)]
    if any(m.defaulted for m in markers):
        schema["default"] = default_value(info)
    return schema


def default_value(info: FieldInfo) -> Any:
    """The JSON form of a field's pydantic default, as the apiserver should apply it."""
    value = info.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return copy.deepcopy(value)


def type_schema(tp: Any, metadata: list[Any]) -> JsonDict:
    """Schema for a (possibly Annotated / Optional) type plus constraint metadata collected on the way."""
    tp, metadata = _unwrap(tp, metadata)
    markers = [m for m in metadata if isinstance(m, Crd)]
    if any(m.int_or_string for m in markers):
        schema: JsonDict = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    elif any(m.preserve_unknown for m in markers):
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    else:
        schema = _plain_schema(tp)
    _apply_constraints(schema, metadata)
    for marker in markers:
        _apply_marker(schema, marker)
    return schema


def _unwrap(tp: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            args = get_args(tp)
            tp = args[0]
            metadata = [*metadata, *_flatten_meta(args[1:])]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
            # A union of scalars is only allowed when a marker says how to publish it (int-or-string).
            if any(isinstance(m, Crd) and m.int_or_string for m in metadata):
                return tp, metadata
            raise SchemaError(f"union {tp!r} has no structural form; mark it int_or_string or split it")
        return tp, metadata


def _flatten_meta(items: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, FieldInfo):
            out.extend(item.metadata)
        else:
            out.append(item)
    return out


def _plain_schema(tp: Any) -> JsonDict:
    origin = get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return model_schema(tp)
    if origin is Literal:
        values = list(get_args(tp))
        if all(isinstance(v, str) for v in values):
            return {"type": "string", "enum": values}
        raise SchemaError(f"only string enums are supported, got {tp!r}")
    if origin is list:
        (item,) = get_args(tp)
        return {"type": "array", "items": type_schema(item, [])}
    if origin is dict:
        key, value = get_args(tp)
        if key is not str:
            raise SchemaError(f"map keys must be strings, got {key!r}")
        if value is Any:
            raise SchemaError("dict[str, Any] needs Crd(preserve_unknown=True)")
        return {"type": "object", "additionalProperties": type_schema(value, [])}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    raise SchemaError(f"no structural schema for {tp!r}")


def _apply_constraints(schema: JsonDict, metadata: list[Any]) -> None:
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        kind = "int-or-string"
    length_key = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}.get(
        str(kind), ("minProperties", "maxProperties")
    )
    for item in metadata:
        if isinstance(item, annotated_types.MinLen):
            schema[length_key[0]] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema[length_key[1]] = item.max_length
        elif isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, annotated_types.Gt):
            schema["minimum"] = item.gt
            schema["exclusiveMinimum"] = True
        elif getattr(item, "pattern", None) is not None and not isinstance(item, Crd):
            schema["pattern"] = item.pattern


def _apply_marker(schema: JsonDict, marker: Crd) -> None:
    if marker.description:
        schema["description"] = marker.description
    if marker.format:
        schema["format"] = marker.format
    if marker.pattern:
        schema["pattern"] = marker.pattern
    if marker.list_type:
        schema["x-kubernetes-list-type"] = marker.list_type
    if marker.map_keys:
        schema["x-kubernetes-list-map-keys"] = list(marker.map_keys)
    if marker.map_type:
        schema["x-kubernetes-map-type"] = marker.map_type
    if marker.rules:
        schema.setdefault("x-kubernetes-validations", []).extend(r.to_openapi() for r in marker.rules)
    schema.update(dict(marker.extra))


def _doc(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""
    if doc.startswith(f"{model.__name__}(") or "Usage docs" in doc:
        return ""
    return " ".join(doc.split())


# ---------------------------------------------------------------------------------------------------------------
# What the apiserver does with a structural schema.


def apply_defaults(schema: Mapping[str, Any], obj: Any) -> Any:
    """Return a copy of `obj` with schema defaults filled in top-down, as the apiserver defaults CRD objects."""
    obj = copy.deepcopy(obj)
    _default_in_place(schema, obj)
    return obj


def _default_in_place(schema: Mapping[str, Any], obj: Any) -> None:
    if isinstance(obj, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                _default_in_place(sub, obj[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, value in obj.items():
                if key not in props:
                    _default_in_place(extra, value)
    elif isinstance(obj, list) and "items" in schema:
        for item in obj:
            _default_in_place(schema["items"], item)


def prune(schema: Mapping[str, Any], obj: Any) -> Any:
    """Return a copy of an object without the fields its schema does not declare (the apiserver's pruning).

    `metadata` at the root is left alone: the apiserver owns it and keeps every ObjectMeta field. Useful to read
    objects written by a newer Kueue than the one kfed models: prune, then validate.
    """
    out = _prune(schema, obj)
    if isinstance(obj, dict) and isinstance(out, dict) and "metadata" in obj:
        out["metadata"] = copy.deepcopy(obj["metadata"])
    return out


def _prune(schema: Mapping[str, Any], obj: Any) -> Any:
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return copy.deepcopy(obj)
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        out: JsonDict = {}
        for key, value in obj.items():
            if key in props:
                out[key] = _prune(props[key], value)
            elif isinstance(extra, Mapping):
                out[key] = _prune(extra, value)
        return out
    if isinstance(obj, list) and "items" in schema:
        return [_prune(schema["items"], item) for item in obj]
    return copy.deepcopy(obj)


def walk(schema: Mapping[str, Any], path: str = "") -> typing.Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node with a readable path, for checks over the whole tree."""
    yield path or ".", schema
    for key, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), Mapping):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")
    for i, sub in enumerate(schema.get("anyOf", [])):
        yield from walk(sub, f"{path}<anyOf{i}>")
