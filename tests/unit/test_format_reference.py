"""The docs' config repo field reference cannot drift from the JSON Schemas: its field
tables are regenerated and compared, every schema property must carry a description, and
every example file of the format page must validate as part of one repository."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from phrame.config_repo import load_directory, validate
from schemas import reference

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FORMAT_PAGE = DOCS / "config" / "format.md"
REFERENCE_PAGE = DOCS / "config" / "reference.md"
CONFIG_SCHEMAS = ("common", *(kind.schema for kind in reference.FILES))
REGENERATE = (
    "run `./.venv/bin/python -m schemas.reference --write docs/config/reference.md` and commit the result"
)


def _section() -> str:
    return FORMAT_PAGE.read_text("utf-8")


def _properties(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every entry of every ``properties`` in a schema document, wherever it is nested."""
    if isinstance(node, dict):
        for name, sub in (node.get("properties") or {}).items():
            yield f"{where}/properties/{name}", sub
        for key, sub in node.items():
            yield from _properties(sub, f"{where}/{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _properties(sub, f"{where}/{i}")


def test_every_config_property_has_a_description() -> None:
    missing = []
    for name in CONFIG_SCHEMAS:
        doc = json.loads((ROOT / "schemas" / "json" / f"{name}.schema.json").read_text("utf-8"))
        missing += [f"{name}.schema.json#{w}" for w, sub in _properties(doc, "") if "description" not in sub]
    assert not missing, "add a one-line 'description' to: " + ", ".join(missing)


def test_reference_page_tables_match_the_schemas() -> None:
    text = REFERENCE_PAGE.read_text("utf-8")
    assert reference.BEGIN in text and reference.END in text, (
        f"docs/config/reference.md has no reference block: {REGENERATE}"
    )
    assert reference.splice(text, reference.markdown()) == text, (
        f"docs/config/reference.md's field tables are stale: {REGENERATE}"
    )


def test_every_property_has_a_row() -> None:
    table = reference.markdown()
    for kind in reference.FILES:
        paths = {row.path for row in reference.rows(kind.schema)}
        top = reference.schema(kind.schema)["properties"]
        assert set(top) <= paths, kind.schema
        for path in paths:
            assert f"| `{path}` |" in table
    nested = {row.path for row in reference.rows("service-container")}
    assert {"healthcheck.interval", "resources.memory", "placement.spread", "env.<NAME>.file"} <= nested
    assert {"ports[]", "labels.<key>"} <= nested


def test_rows_say_required_default_and_allowed() -> None:
    rows = {r.path: r for r in reference.rows("service-container")}
    assert rows["image"].required == "**required**"
    assert rows["replicas"].required == "default `1`" and "0–1000" in rows["replicas"].allowed
    assert rows["restart"].allowed == "`no`, `always`, `on-failure`, `unless-stopped`"
    assert rows["resources.memory"].allowed.startswith("bytes with an optional unit")
    network = {r.path: r for r in reference.rows("network")}
    assert network["driver"].required == "default `bridge`"


def test_splice_needs_both_markers() -> None:
    block = reference.markdown()
    with pytest.raises(ValueError, match="markers"):
        reference.splice("# no markers here\n", block)
    text = f"a\n{reference.BEGIN}\nold\n{reference.END}\nb\n"
    assert reference.splice(text, "new\n") == f"a\n{reference.BEGIN}\nnew\n{reference.END}\nb\n"


_EXAMPLE = re.compile(r"^```yaml\n# file: (\S+)\n(.*?)^```$", re.S | re.M)
_JSON_EXAMPLE = re.compile(r"^```json\n(\{\n  \"schema\": \"phrame\.placement/v1\".*?)^```$", re.S | re.M)


def test_format_page_examples_validate(tmp_path: Path) -> None:
    section = _section()
    files = {path: body for path, body in _EXAMPLE.findall(section)}
    placement = _JSON_EXAMPLE.findall(section)
    assert len(placement) == 1, "one node.json example on the page"
    env = json.loads(placement[0])["environment"]
    files[f"environments/{env}/node.json"] = placement[0]
    kinds = {p.split("/")[0] if p.startswith("nodes/") else p.split("/")[-2] for p in files}
    assert kinds >= {"nodes", env, "networks", "services"}, sorted(files)
    bodies = [b for p, b in files.items() if "/services/" in p]
    assert any("kind: process" in b for b in bodies) and any("kind: process" not in b for b in bodies)
    for path, body in files.items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, "utf-8")
    repo, read = load_directory(tmp_path)
    problems = validate(repo, read)
    assert not problems, "\n".join(p.format() for p in problems)
    assert len(repo.nodes) >= 1 and env in repo.environments


def test_pattern_errors_quote_the_description(tmp_path: Path) -> None:
    """The validator words a pattern error with the schema's description, so the words
    added for the reference are also what a user sees for a malformed value; a ``format``
    error gives the check's own reason."""
    files = {
        "nodes/n1.yaml": "name: n1\n",
        "environments/lab/environment.yaml": "name: lab\n",
        "environments/lab/networks/net.yaml": "name: net\nsubnet: 10.0.0.0\n",
        "environments/lab/services/web.yaml": "name: web\nimage: my app:1\nplacement:\n  node: n1\n",
    }
    for path, body in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body, "utf-8")
    repo, read = load_directory(tmp_path)
    messages = {p.file.rsplit("/", 1)[-1]: p.message for p in validate(repo, read)}
    assert messages["web.yaml"].startswith("'my app:1' is not valid: a Docker image reference")
    # a format check (schemas.formats) says why in its own words
    assert messages["net.yaml"] == (
        "'10.0.0.0' is not valid: a subnet needs a prefix length after '/', such as 10.77.0.0/24"
    )


def test_fixture_readmes_point_at_pages_of_the_docs() -> None:
    """They once pointed at a DESIGN.md that is not in the project; now at the docs' pages."""
    for doc in sorted((ROOT / "fixtures").rglob("README.md")):
        text = doc.read_text("utf-8")
        assert "DESIGN.md" not in text, (
            f"{doc.relative_to(ROOT)} names DESIGN.md, which is not in the project"
        )
        for page, section in re.findall(r'(docs/[\w/.-]+\.md), section "([^"]+)"', text):
            headings = set(re.findall(r"^#+ (.+)$", (ROOT / page).read_text("utf-8"), re.M))
            assert section in headings, f"{doc.relative_to(ROOT)}: {page} has no section {section!r}"
        assert 'README, section "' not in text, f"{doc.relative_to(ROOT)}: name a page of docs/ instead"
