"""The config repo format reference: Markdown field tables generated from the JSON Schemas.

Walks each config file's schema (following ``$ref`` into ``common.schema.json``) and emits,
per file kind, its place in the layout and one row per field: dotted path, type, required
or default, what is allowed, and the schema's ``description``. The block between BEGIN and
END of docs/config/reference.md is this output: the docs site's build hook fills it in and a
unit test compares the committed copy. Pure: it reads only the bundled schemas (the
``--write`` entry point below is the one place that touches a file).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from schemas.registry import schema

BEGIN = "<!-- format-reference:begin -->"
END = "<!-- format-reference:end -->"
_LONG_PATTERN = 48  # longer patterns are unreadable in a table: the schema's words stand in
_TYPE_WORDS = {"object": "mapping", "array": "list", "null": "null"}
_PLACEHOLDERS = {
    "env": "<NAME>",
    "assignments": "<service>",
    "images": "<service>",
    "reasons": "<service>",
    "extra_hosts": "<host>",
    "ulimits": "<limit>",
    "options": "<option>",
}


@dataclass(frozen=True)
class FileKind:
    schema: str
    path: str
    heading: str


FILES = (
    FileKind("node", "nodes/<node>.yaml", "Node"),
    FileKind("environment", "environments/<env>/environment.yaml", "Environment"),
    FileKind("network", "environments/<env>/networks/<name>.yaml", "Network"),
    FileKind(
        "service-container",
        "environments/<env>/services/<name>.yaml",
        "Container service (`kind: container`, the default)",
    ),
    FileKind(
        "service-process", "environments/<env>/services/<name>.yaml", "Process service (`kind: process`)"
    ),
    FileKind("placement", "environments/<env>/node.json", "Placement"),
)


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    required: str
    allowed: str
    meaning: str


def _resolve(node: dict[str, Any], doc: str) -> tuple[dict[str, Any], str]:
    """``node`` with its ``$ref`` followed; its own keys (description, default) win."""
    while "$ref" in node:
        target, _, fragment = node["$ref"].partition("#")
        doc = target.removesuffix(".schema.json") or doc
        found: Any = schema(doc)
        for part in fragment.strip("/").split("/") if fragment else ():
            found = found[part]
        node = {**found, **{k: v for k, v in node.items() if k != "$ref"}}
    return node, doc


def _branches(node: dict[str, Any], doc: str) -> list[tuple[dict[str, Any], str]]:
    alternatives = node.get("oneOf") or node.get("anyOf")
    return [_resolve(b, doc) for b in alternatives] if alternatives else [(node, doc)]


def _words(words: list[str]) -> str:
    """``a, b or c``; alternatives of alternatives are flattened (``list of (...)`` is kept)."""
    flat = [w for word in words for w in ([word] if " of " in word else re.split(", | or ", word))]
    unique = list(dict.fromkeys(flat))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " or " + unique[-1]


def _of(word: str) -> str:
    return f"({word})" if " or " in word else word


def _type(node: dict[str, Any], doc: str) -> str:
    if "oneOf" in node or "anyOf" in node:
        return _words([_type(b, d) for b, d in _branches(node, doc)])
    if "const" in node or "enum" in node:
        values = [node["const"]] if "const" in node else node["enum"]
        return _words([type(v).__name__.replace("str", "string") for v in values])
    kind = node.get("type", "any")
    if isinstance(kind, list):
        return _words([str(_TYPE_WORDS.get(k, k)) for k in kind])
    if kind == "array":
        return "list of " + _of(_type(*_resolve(node.get("items", {}), doc)))
    if kind == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
        return "map of " + _of(_type(*_resolve(node["additionalProperties"], doc)))
    words: str = _TYPE_WORDS.get(kind, kind)
    return words


def _code(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return "`" + text.replace("|", "\\|") + "`"


def _allowed(node: dict[str, Any], doc: str, meaning: str | None = None) -> str:
    """Constraints in words; a long pattern or a ``format`` is replaced by the schema's own
    description (or, when that is the row's ``meaning`` already, a pointer to it)."""
    if node.get("description") != meaning:
        meaning = None
    if "oneOf" in node or "anyOf" in node:
        own = {k: node[k] for k in ("description",) if k in node}
        parts = [_allowed({**own, **b}, d, meaning) for b, d in _branches(node, doc)]
        return "; or ".join(p for p in parts if p)
    out = []
    if "const" in node:
        out.append(_code(node["const"]))
    if "enum" in node:
        out.append(", ".join(_code(v) for v in node["enum"]))
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        out.append(f"{low}–{high}")
    elif low is not None:
        out.append(f"≥ {low}")
    if node.get("minLength") and "pattern" not in node:
        out.append("non-empty")
    if node.get("minItems"):
        out.append(f"at least {node['minItems']} item(s)")
    if node.get("maxItems"):
        out.append(f"at most {node['maxItems']:,} items")
    if node.get("maxProperties"):
        out.append(f"at most {node['maxProperties']:,} entries")
    if node.get("uniqueItems"):
        out.append("no duplicates")
    pattern = node.get("pattern")
    in_words = "format" in node or (pattern and len(pattern) > _LONG_PATTERN)
    if in_words and "description" in node:  # a format, or a long pattern: the schema's words
        out.append(node["description"] if meaning is None else "text of the form given at right")
    elif pattern:
        out.append(_code(pattern))
    keys = node.get("propertyNames", {})
    if isinstance(keys, dict) and keys.get("pattern"):
        out.append("keys " + _code(keys["pattern"]))
    examples = node.get("examples")
    if examples:
        out.append("e.g. " + ", ".join(_code(e) for e in examples))
    return "; ".join(out)


def _required(name: str, parent: dict[str, Any], node: dict[str, Any], form: str) -> str:
    if name in parent.get("required", ()):
        return f"**required**{form}"
    if "default" in node:
        return "default " + _code(node["default"])
    return "optional"


def _walk(node: dict[str, Any], doc: str, prefix: str) -> Iterator[Row]:
    """Rows for the fields of an object schema (every form of a oneOf), then nested ones."""
    forms = _branches(node, doc)
    for parent, pdoc in forms:
        for name, sub in (parent.get("properties") or {}).items():
            prop, propdoc = _resolve(sub, pdoc)
            path = f"{prefix}{name}"
            form = " (in this form)" if len(forms) > 1 else ""
            meaning = str(sub.get("description") or prop.get("description") or "")
            allowed = _allowed(_allowed_view(sub, prop, pdoc), propdoc, meaning)
            yield Row(path, _type(prop, propdoc), _required(name, parent, prop, form), allowed, meaning)
            yield from _nested(prop, propdoc, path)


def _allowed_view(sub: dict[str, Any], prop: dict[str, Any], doc: str) -> dict[str, Any]:
    """The resolved schema, with the def's own wording (not the field's meaning) standing in
    for a long pattern: ``memory`` says "512Mi, 4Gi", not the field's purpose."""
    if "$ref" in sub and "description" in sub:
        found, _ = _resolve({"$ref": sub["$ref"]}, doc)
        return {**prop, "description": found.get("description", sub["description"])}
    return prop


def _nested(prop: dict[str, Any], doc: str, path: str) -> Iterator[Row]:
    if any("properties" in b for b, _ in _branches(prop, doc)):
        yield from _walk(prop, doc, path + ".")
        return
    for key, suffix in (("items", "[]"), ("additionalProperties", ".<key>")):
        raw = prop.get(key)
        if not isinstance(raw, dict) or "description" not in raw:
            continue  # a plain list of strings: the field's own row says it all
        item, idoc = _resolve(raw, doc)
        if key == "additionalProperties":
            suffix = "." + _PLACEHOLDERS.get(path.rsplit(".", 1)[-1], "<key>")
        child = path + suffix
        allowed = _allowed({**item, "description": raw["description"]}, idoc, raw["description"])
        yield Row(child, _type(item, idoc), "", allowed, str(raw["description"]))
        yield from _nested(item, idoc, child)


def rows(schema_name: str) -> list[Row]:
    """Every field of one config file kind, in schema order, nested fields after their parent."""
    found = list(_walk(schema(schema_name), schema_name, ""))
    missing = [r.path for r in found if not r.meaning]
    if missing:
        raise ValueError(f"{schema_name}.schema.json: no description for {', '.join(missing)}")
    return found


def _cell(text: str) -> str:
    return re.sub(r"(?<!\\)\|", r"\\|", text.replace("\n", " "))


def markdown() -> str:
    """The generated block: one heading and table per file kind."""
    out = []
    for kind in FILES:
        doc = schema(kind.schema)
        out += [f"## {kind.heading}: `{kind.path}`", "", str(doc.get("description", "")), ""]
        out += ["| field | type | required / default | allowed | meaning |", "|---|---|---|---|---|"]
        for r in rows(kind.schema):
            cells = [f"`{r.path}`", r.type, r.required, r.allowed, r.meaning]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def splice(text: str, block: str, *, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with the part between ``begin`` and ``end`` (this page's markers unless told)
    replaced by ``block``."""
    at, until = text.find(begin), text.find(end)
    if at < 0 or until < at:
        raise ValueError(f"the text has no {begin} ... {end} markers")
    return text[: at + len(begin)] + "\n" + block.rstrip("\n") + "\n" + text[until:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.reference", description=__doc__)
    parser.add_argument("--write", metavar="PAGE", help="replace the marked block in this file")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(markdown())
        return 0
    with open(args.write, encoding="utf-8") as f:
        text = f.read()
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(splice(text, markdown()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
