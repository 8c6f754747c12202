"""config_sync.review_note: what a commit changes on each node, as the MR note and ``phrame plan``."""

from __future__ import annotations

from typing import Any

from config_sync.models import Change
from config_sync.review_note import REVIEW_NOTE_MARKER, item_changes, review_note
from tests.unit.test_sync_publication import SHA1, SHA2, T, render_changed, rendered

__all__ = ["rendered"]  # the module-scoped fixture, shared


def test_item_changes_and_markdown(rendered: dict[str, Any]) -> None:
    new = render_changed(rendered, SHA2)
    items = [t for t in new if "/containers/" in t]
    changed, removed = items[0], items[1]
    new[changed] = {**new[changed], "image": "x:2", "digest": "sha256:" + "e" * 64}
    del new[removed]
    added = T.desired_item("edge-01", "containers", "studio-a.extra.0")
    new[added] = {"digest": "sha256:" + "d" * 64}
    changes = item_changes(rendered, new, T)
    by_action = {c.action: c for c in changes}
    assert set(by_action) == {"add", "change", "remove"}
    assert by_action["change"].fields == ("image",)
    assert by_action["add"].item_id == "studio-a.extra.0"
    text = review_note(changes, [], commit=SHA2, ref="main")
    assert text.startswith(REVIEW_NOTE_MARKER)
    assert "1 to add, 1 to change, 1 to remove" in text
    assert "| change | container |" in text and "`image`" in text


def test_markdown_lists_every_error_and_escapes_pipes() -> None:
    errors = [
        {"file": "a.yaml", "line": 3, "column": 5, "rule": "schema", "message": "x | y"},
        {"file": "b.yaml", "line": 1, "column": 1, "rule": "unknown-node", "message": "no node"},
    ]
    text = review_note([Change("n", "containers", "e.s.0", "add")], errors, commit=SHA1)
    assert "2 problem(s)" in text and "`a.yaml:3:5`" in text and "x \\| y" in text
    assert "unknown-node" in text


def test_no_changes_says_so() -> None:
    assert "No changes" in review_note([], [], commit=SHA1)
