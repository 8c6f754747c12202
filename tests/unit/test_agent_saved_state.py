"""The saved desired state: only a complete view is written; a file that fails any check is refused."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from node_agent.desired import DesiredStore
from node_agent.models import DesiredState
from node_agent.saved_state import SavedState, SavedStateError, checksum
from schemas import Topics
from tests.support import agent_support as spec

NODE = "edge-1"


def complete(*names: str, generation: int = 1) -> DesiredState:
    store = DesiredStore(Topics(), NODE)
    specs = [spec.container("shop", name) for name in names]
    store.apply_all(spec.topic_messages(spec.topics_doc(NODE, specs)))
    desired = store.snapshot()
    assert desired.is_complete and desired.manifest is not None
    return desired


def rewrite(path: Path, change) -> None:
    doc = json.loads(path.read_bytes())
    change(doc)
    path.write_text(json.dumps(doc))


def test_a_complete_view_is_saved_private_and_read_back(tmp_path: Path):
    saved = SavedState(tmp_path, NODE)
    desired = complete("web", "db")
    assert saved.save(desired, saved_at=1.0)
    assert stat.S_IMODE(saved.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.folder.stat().st_mode) == 0o700
    assert not saved.save(desired, saved_at=2.0)  # unchanged: not written again
    back = SavedState(tmp_path, NODE).load()
    assert back == desired


def test_a_partial_view_is_never_saved(tmp_path: Path):
    saved = SavedState(tmp_path, NODE)
    desired = complete("web", "db")
    missing_db = DesiredState(
        containers={k: v for k, v in desired.containers.items() if "db" not in k}, manifest=desired.manifest
    )
    assert not saved.save(missing_db, saved_at=1.0)
    assert not saved.save(DesiredState(containers=desired.containers), saved_at=1.0)  # no manifest
    assert saved.load() is None


def test_no_file_is_none(tmp_path: Path):
    assert SavedState(tmp_path, NODE).load() is None


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda p: p.write_bytes(p.read_bytes()[:-40]), "not JSON"),
        (lambda p: p.write_bytes(b""), "not JSON"),
        (lambda p: p.write_bytes(p.read_bytes().replace(b"shop.web", b"shop.wex")), "checksum mismatch"),
        (lambda p: rewrite(p, lambda d: d.pop("content")), "no content"),
    ],
    ids=["truncated", "empty", "a changed byte", "no content"],
)
def test_a_damaged_file_is_refused(tmp_path: Path, damage, says: str):
    saved = SavedState(tmp_path, NODE)
    saved.save(complete("web"), saved_at=1.0)
    damage(saved.path)
    with pytest.raises(SavedStateError, match=says):
        SavedState(tmp_path, NODE).load()


def resealed(path: Path, change) -> None:
    """Change the content and recompute the file's checksum: only the inner checks can tell."""

    def both(doc):
        change(doc["content"])
        doc["checksum"] = checksum(doc["content"])

    rewrite(path, both)


def first_item(content):
    return next(iter(content["containers"].values()))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda c: first_item(c).update(command=["sh"]), "does not match the manifest's digest"),
        (lambda c: first_item(c).update(digest="sha256:" + "0" * 64), "does not match the manifest's digest"),
        (lambda c: c["containers"].clear(), "missing"),
        (lambda c: c.update(node="edge-2"), "saved for node 'edge-2'"),
        (lambda c: first_item(c).pop("image"), "image"),
        (lambda c: c["manifest"].pop("generation"), "manifest"),
        (lambda c: c.update(format=2), "format 2"),
    ],
    ids=[
        "item changed",
        "digest changed",
        "item missing",
        "other node",
        "bad item",
        "bad manifest",
        "format",
    ],
)
def test_content_that_disagrees_with_its_manifest_is_refused(tmp_path: Path, change, says: str):
    saved = SavedState(tmp_path, NODE)
    saved.save(complete("web"), saved_at=1.0)
    resealed(saved.path, change)
    with pytest.raises(SavedStateError, match=says):
        SavedState(tmp_path, NODE).load()


def test_when_it_was_saved_is_under_the_checksum_too(tmp_path: Path):
    saved = SavedState(tmp_path, NODE)
    saved.save(complete("web"), saved_at=1.0)
    rewrite(saved.path, lambda d: d["content"].update(saved_at=2.0))
    with pytest.raises(SavedStateError, match="checksum mismatch"):
        SavedState(tmp_path, NODE).load()
