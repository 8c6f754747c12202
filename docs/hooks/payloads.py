"""mkdocs hook and script: the payload of every MQTT topic, generated from the JSON Schemas.

``mkdocs build`` (``make docs``) calls :func:`on_page_markdown`; on the topics page it
replaces the block between BEGIN and END with :func:`markdown`: per topic kind of
``schemas.topics.SCHEMA_OF``, its topic, schema file, writer, and one row per top-level
field (type, required, the schema's description). ``python docs/hooks/payloads.py --write``
rewrites the committed copy, which ``tests/unit/test_docs_site.py`` compares. Reads only
the bundled schemas; writes a file only with ``--write``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = "architecture/topics.md"
BEGIN, END = "<!-- payloads:begin -->", "<!-- payloads:end -->"
# who writes each kind, and whether it is retained (the writers the ACL of `phrame broker-config` grants)
WRITERS = {
    "desired": "config-sync only; retained, QoS 1",
    ("desired", "placement"): "placement only; retained, QoS 1",
    ("desired", "audit"): "the service it names (`config-sync` or `topic-api`) only; retained, QoS 1",
    "actual": "the node's own agent only; retained",
    ("actual", "reply"): "the node's own agent only, once per command; QoS 1, not retained",
    "cmd": "the topic API (`POST /api/nodes/{node}/containers/{id}/restart`); not retained",
    ("cmd", "logs"): "the topic API (`POST /api/nodes/{node}/containers/{id}/logs`); not retained",
}


def _schemas() -> tuple[dict[tuple[str, str], str], Any]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # this checkout's schemas, not an installed copy
    from schemas.registry import schema
    from schemas.topics import SCHEMA_OF

    return SCHEMA_OF, schema


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "$ref" in prop:
        target = prop["$ref"].rsplit("/", 1)[-1]
        return f"object (`{target}`)" if target.endswith(".schema.json") else target
    for key in ("oneOf", "anyOf"):
        if key in prop:
            return " or ".join(_type(p) for p in prop[key])
    kind = prop.get("type", "any")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def markdown() -> str:
    """The generated block: one heading and field table per topic kind."""
    schema_of, schema = _schemas()
    out: list[str] = []
    for (plane, kind), name in schema_of.items():
        doc = schema(name)
        title = str(doc.get("title", name))
        topic = title[title.find("(") + 1 : title.rfind(")")] if "(" in title else name
        writer = WRITERS.get((plane, kind)) or WRITERS[plane]
        out += [f"### `{topic}`", ""]
        out += [f"{title.split(' (')[0]}. Schema `schemas/json/{name}.schema.json`; written by {writer}."]
        if doc.get("description"):
            out += ["", str(doc["description"])]
        out += ["", "| field | type | required | meaning |", "|---|---|---|---|"]
        required = set(doc.get("required", ()))
        for field, prop in doc.get("properties", {}).items():
            cells = [
                f"`{field}`",
                _type(prop),
                "yes" if field in required else "",
                prop.get("description", ""),
            ]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def splice(text: str, block: str) -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # this checkout's schemas, not an installed copy
    from schemas import reference

    return reference.splice(text, block, begin=BEGIN, end=END)


def on_page_markdown(markdown_text: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown_text
    return splice(markdown_text, markdown())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help=f"rewrite the block of docs/{PAGE}")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(markdown())
        return 0
    page = ROOT / "docs" / PAGE
    page.write_text(splice(page.read_text("utf-8"), markdown()), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
