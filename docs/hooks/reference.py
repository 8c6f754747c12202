"""mkdocs hook: the config format's field reference, generated from the JSON Schemas at build time.

``mkdocs build`` (``make docs``) calls :func:`on_page_markdown` for every page; on
``config/reference.md`` it replaces the block between the reference markers with
``schemas.reference.markdown()`` of this checkout, so the site never shows a stale table.
The committed block (what GitLab shows) is kept equal by ``tests/unit/test_format_reference.py``.
It never writes a file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = "config/reference.md"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # this checkout's schemas, not an installed copy
    from schemas import reference

    return reference.splice(markdown, reference.markdown())
