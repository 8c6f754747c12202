"""The documentation site (docs/, mkdocs.yml) and the README that points into it: the generated
payload tables match the schemas, every page is in the nav, every relative link resolves, no
page cites a document the repository does not hold. Reads files only; ``make docs`` (the
strict mkdocs build, in .ci/run) checks the rendered site and its anchors."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")
CITATION = re.compile(r"DESIGN §|DESIGN\.md|ISSUE ?[0-9]|[Ii]ssue [0-9]|issue-[0-9]")


def _hook(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _local_links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text("utf-8"), flags=re.S | re.M)
    return [m.group(1) for m in LINK.finditer(text) if "://" not in m.group(1)]


def test_the_topics_page_payload_tables_match_the_schemas() -> None:
    payloads = _hook("payloads")
    page = (DOCS / payloads.PAGE).read_text("utf-8")
    assert payloads.splice(page, payloads.markdown()) == page, (
        "docs/architecture/topics.md's payload tables are stale: run "
        "`./.venv/bin/python docs/hooks/payloads.py --write` and commit the result"
    )
    for name in ("desired-manifest", "actual-heartbeat", "cmd-restart"):
        assert f"schemas/json/{name}.schema.json" in page


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text("utf-8").split("\nnav:", 1)[1]
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert pages - listed == set(), "pages missing from mkdocs.yml's nav"
    assert listed - pages == set(), "nav entries without a page"


def test_relative_links_resolve() -> None:
    broken = []
    for page in [ROOT / "README.md", *PAGES]:
        for target in _local_links(page):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_the_readme_is_short_and_points_into_the_site() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make up" in readme and "make test" in readme
    linked = {(ROOT / t).resolve() for t in _local_links(ROOT / "README.md")}
    for page in ("index.md", "getting-started.md", "config/format.md", "architecture/index.md"):
        assert (DOCS / page).resolve() in linked, page


def test_no_page_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
        for page in [ROOT / "README.md", *PAGES]
        for n, line in enumerate(page.read_text("utf-8").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not found, found
