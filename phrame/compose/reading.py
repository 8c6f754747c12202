"""Reading a compose file with the config repo's YAML reader: the same hazards refused
(duplicate keys, alias bombs, tabs, deep nesting), every error with its line."""

from __future__ import annotations

from phrame.compose.models import ComposeError
from phrame.config_repo.model import Document
from phrame.config_repo.yaml_reading import parse_yaml

FILE = "compose file"


def read_compose(text: str) -> Document:
    doc, problems = parse_yaml(FILE, text.encode("utf-8", "surrogatepass"))
    if problems or doc is None:
        p = problems[0] if problems else None
        if p is None:
            raise ComposeError("cannot read the file")
        raise ComposeError(f"{p.rule}: {p.message}", line=p.line, column=p.column)
    if not isinstance(doc.data, dict):
        raise ComposeError("a compose file is a mapping with a services: key")
    services = doc.data.get("services")
    if not isinstance(services, dict):
        line, col = doc.position(["services"], key=True) if "services" in doc.data else (1, 1)
        raise ComposeError("no services: mapping (compose file format 1 is not read)", line=line, column=col)
    for name, spec in services.items():
        if not isinstance(spec, dict) and spec is not None:
            line, col = doc.position(["services", name])
            raise ComposeError(f"service {name!r} is not a mapping", line=line, column=col)
    for top in ("networks", "volumes"):
        if doc.data.get(top) is not None and not isinstance(doc.data[top], dict):
            line, col = doc.position([top])
            raise ComposeError(f"{top}: is not a mapping", line=line, column=col)
    return doc
