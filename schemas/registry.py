"""Loading the JSON Schema files and validating payloads against them.

Readers call :func:`check_payload` on every MQTT payload before acting on it; an invalid
payload raises :class:`PayloadError`, which says what is wrong and where in the document.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from schemas.formats import CHECKER

_BASE = "https://phrame.io/schemas/"

SCHEMA_NAMES = tuple(
    sorted(
        p.name.removesuffix(".schema.json")
        for p in resources.files("schemas").joinpath("json").iterdir()
        if p.name.endswith(".schema.json")
    )
)


class PayloadError(ValueError):
    """A document failed its schema; ``errors`` holds ``(json_pointer, message)`` pairs."""

    def __init__(self, schema_name: str, errors: list[tuple[str, str]]) -> None:
        self.schema_name = schema_name
        self.errors = errors
        first = errors[0]
        super().__init__(f"{schema_name}: {first[0] or '/'}: {first[1]}")


@cache
def schema(name: str) -> dict[str, Any]:
    """The schema document named ``name`` (file stem without ``.schema.json``)."""
    text = resources.files("schemas").joinpath("json", f"{name}.schema.json").read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@cache
def _registry() -> Registry:
    return Registry().with_resources(
        (_BASE + f"{n}.schema.json", Resource.from_contents(schema(n))) for n in SCHEMA_NAMES
    )


@cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for schema ``name`` with cross-file ``$ref`` resolved and the
    ``format`` keywords of :mod:`schemas.formats` checked."""
    return Draft202012Validator(schema(name), registry=_registry(), format_checker=CHECKER)


def pointer(path: Any) -> str:
    """JSON pointer (RFC 6901) of a jsonschema error path."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "".join("/" + p for p in parts)


def check_payload(name: str, document: Any) -> None:
    """Raise :class:`PayloadError` listing every violation of schema ``name``."""
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        raise PayloadError(name, [(pointer(e.absolute_path), e.message) for e in errors])
