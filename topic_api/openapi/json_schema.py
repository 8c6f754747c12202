"""Typed models (TypedDicts) turned into OpenAPI 3.0 schemas, for the generated document.

:mod:`topic_api.openapi.document` hands each answer's model to a :class:`SchemaBook`; the
models live in :mod:`topic_api.models`. Types map as JSON does: ``str``, ``int``, ``float``,
``bool``, ``Literal`` (an enum), ``list[X]``, ``dict[str, X]``, ``Any`` (any value),
``X | None`` (nullable), a TypedDict (an object: its required keys, no others unless opened).
``Annotated[X, Doc(...), Min(...)]`` adds a description or a minimum. A TypedDict registered
as a component is referred to by ``$ref``; any other is written inline. Raises on a type it
cannot write rather than guessing.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints

Schema = dict[str, Any]
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Doc:
    """``Annotated`` metadata: the field's description."""

    text: str


@dataclass(frozen=True)
class Min:
    """``Annotated`` metadata: the number's minimum."""

    value: int


def is_typed_dict(t: Any) -> bool:
    return isinstance(t, type) and typing.is_typeddict(t)


class SchemaBook:
    """The components (``#/components/schemas``) and the schemas that refer to them."""

    def __init__(self) -> None:
        self.components: dict[str, Schema] = {}
        self._named: dict[type, str] = {}
        self._open: set[type] = set()

    def publish(self, models: Sequence[type], *, open_to_more: Collection[type] = ()) -> None:
        """Publish ``models`` as components under their class names (``open_to_more``: keys
        beyond their own are allowed); all are named before any is written, so they refer
        to each other by ``$ref`` whatever the order."""
        self._named.update({m: m.__name__ for m in models})
        self._open.update(open_to_more)
        for model in models:
            self.components[model.__name__] = self.object_schema(model)

    def ref(self, model: type) -> Schema:
        if model not in self._named:
            raise ValueError(f"{model.__name__} is no component: add it to the book first")
        return {"$ref": f"#/components/schemas/{self._named[model]}"}

    def schema(self, t: Any) -> Schema:
        """The schema of one annotation."""
        origin, args = get_origin(t), get_args(t)
        if origin is typing.Annotated:
            out = self.schema(args[0])
            for meta in args[1:]:
                if isinstance(meta, Doc):
                    out["description"] = meta.text
                elif isinstance(meta, Min):
                    out["minimum"] = meta.value
            return out
        if origin in (Required, NotRequired):
            return self.schema(args[0])
        if origin in (Union, types.UnionType):
            kept = [a for a in args if a is not type(None)]
            if len(kept) != 1 or len(kept) == len(args):
                raise TypeError(f"only X | None is written, not {t}")
            inner = kept[0]
            if is_typed_dict(inner):  # siblings of a $ref are ignored: nullable is written inline
                return {**self.object_schema(inner), "nullable": True}
            return {**self.schema(inner), "nullable": True}
        if t is Any:
            return {}
        if t in _SCALARS:
            return {"type": _SCALARS[t]}
        if origin is Literal:
            return {"type": "string", "enum": list(args)}
        if origin is list:
            return {"type": "array", "items": self.schema(args[0])}
        if origin is dict:
            value = args[1]
            return {"type": "object", "additionalProperties": True if value is Any else self.schema(value)}
        if is_typed_dict(t):
            return self.ref(t) if t in self._named else self.object_schema(t)
        raise TypeError(f"no JSON schema for {t!r}")

    def object_schema(self, model: type) -> Schema:
        hints = get_type_hints(model, include_extras=True)
        total = bool(getattr(model, "__total__", True))
        # read off the hints: ``__required_keys__`` misses a NotRequired written as a string
        # (``from __future__ import annotations``) before Python 3.12
        required = [
            k
            for k, t in hints.items()
            if get_origin(t) is Required or (total and get_origin(t) is not NotRequired)
        ]
        return {
            "type": "object",
            "required": required,
            "properties": {k: self.schema(t) for k, t in hints.items()},
            "additionalProperties": model in self._open,
        }
