"""Loading the JSON Schema files and validating payloads against them.

Readers call :func:`check_payload` on every MQTT payload before acting on it; an invalid
payload raises :class:`PayloadError`, which says what is wrong and where in the document.
Two engines, one verdict: jsonschema_rs (Rust) says whether a document is valid, quickly;
jsonschema (Python) words the errors of any document it does not call valid. The fast one
is only ever trusted to say "valid" (a test holds it to the Python one's verdict).
"""

from __future__ import annotations

import json
import logging
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from schemas.formats import CHECKER

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - a dependency; without it every check is Python's
    jsonschema_rs = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

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


# keywords beside a ``$ref`` that do not validate: a ``$ref`` with only these is replaced
# by its target (every ``$ref`` of schemas/json is; a test keeps it so)
_ANNOTATIONS = frozenset(("$ref", "$comment", "description", "title", "default", "examples"))
_DATA = frozenset(("enum", "const", "default", "examples"))  # values, never schemas


def _inline(node: Any, resolver: Any, open_refs: frozenset[int]) -> Any:
    """``node`` with each ``$ref`` replaced by what it names, resolved once here: jsonschema
    would look it up again (a URL join and a JSON-pointer walk) at every value it checks.
    Error paths are unchanged: jsonschema never puts ``$ref`` in them. A cycle stays a ref."""
    if isinstance(node, list):
        return [_inline(item, resolver, open_refs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and _ANNOTATIONS.issuperset(node):
        resolved = resolver.lookup(ref)
        if id(resolved.contents) not in open_refs:
            return _inline(resolved.contents, resolved.resolver, open_refs | {id(resolved.contents)})
    return {k: v if k in _DATA else _inline(v, resolver, open_refs) for k, v in node.items()}


@cache
def inlined(name: str) -> dict[str, Any]:
    """Schema ``name`` with its ``$ref`` resolved in place (what :func:`validator` checks)."""
    doc: dict[str, Any] = _inline(
        schema(name), _registry().resolver(_BASE + f"{name}.schema.json"), frozenset()
    )
    return doc


@cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for schema ``name`` with cross-file ``$ref`` resolved (once, in
    place) and the ``format`` keywords of :mod:`schemas.formats` checked. One per schema
    per process: callers never build their own."""
    return Draft202012Validator(inlined(name), registry=_registry(), format_checker=CHECKER)


class _Format:
    """A ``format`` keyword for jsonschema_rs, checked by schemas.formats on any value type,
    as jsonschema does (``ulimit`` checks a mapping; jsonschema_rs checks formats on strings
    only, so the schema it gets names them ``x-phrame-format``)."""

    def __init__(self, _parent: Any, value: Any, _path: Any) -> None:
        found = CHECKER.checkers.get(value)
        self.check = found[0] if found else None

    def validate(self, instance: Any) -> None:
        if self.check is not None and not self.check(instance):  # its ValueError says why
            raise ValueError("format")


def _rust_formats(node: Any) -> Any:
    if isinstance(node, list):
        return [_rust_formats(item) for item in node]
    if not isinstance(node, dict):
        return node
    renamed = {"x-phrame-format" if k == "format" and isinstance(v, str) else k: v for k, v in node.items()}
    return {k: v if k in _DATA else _rust_formats(v) for k, v in renamed.items()}


@cache
def _fast(name: str) -> Any:
    """jsonschema_rs's validator of schema ``name`` (same formats, every ``$ref`` inlined),
    or None when it cannot be built: then only the Python validator is used."""
    if jsonschema_rs is None:
        return None
    try:
        return jsonschema_rs.Draft202012Validator(
            _rust_formats(inlined(name)), keywords={"x-phrame-format": _Format}, validate_formats=False
        )
    except Exception as e:  # a pattern its regex engine refuses, say: Python checks alone
        log.warning("schema %s: no fast validator (%s); jsonschema alone checks it", name, e)
        return None


def surely_valid(name: str, document: Any) -> bool:
    """True when ``document`` is valid under schema ``name`` (the fast validator says so);
    False when it is not, or the fast one cannot tell: ask :func:`validator` then."""
    fast = _fast(name)
    if fast is None:
        return False
    try:
        return bool(fast.is_valid(document))
    except Exception:  # a value it cannot convert (an integer past 64 bits): Python decides
        return False


def pointer(path: Any) -> str:
    """JSON pointer (RFC 6901) of a jsonschema error path."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "".join("/" + p for p in parts)


def check_payload(name: str, document: Any) -> None:
    """Raise :class:`PayloadError` listing every violation of schema ``name``."""
    if surely_valid(name, document):
        return
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        raise PayloadError(name, [(pointer(e.absolute_path), e.message) for e in errors])
