"""The plan digest (config_sync.reviews.digest): what a move between two renderings changes,
item by item, hashed stably; the note shows it, and the warning when the merge's plan differs."""

from __future__ import annotations

from typing import Any

from config_sync.review_note import review_note
from config_sync.reviews.digest import plan_digest, plan_items
from schemas import Topics

T = Topics()
WEB = T.desired_item("n1", "containers", "lab.web.0")
CACHE = T.desired_item("n2", "containers", "lab.cache.0")
NET = T.desired_item("n1", "networks", "lab.media")
OTHER = T.desired_item("n2", "containers", "prod.api.0")


def spec(digest: str, commit: str = "a" * 40) -> dict[str, Any]:
    return {"digest": digest, "commit": commit, "image": "x"}


BASE = {WEB: spec("w1"), CACHE: spec("c1"), NET: spec("m1"), T.manifest("n1"): {"digest": "man1"}}


def test_items_name_each_changed_item_with_its_new_digest_or_none_when_removed() -> None:
    new = {WEB: spec("w2"), NET: spec("m1"), T.manifest("n1"): {"digest": "man2"}, OTHER: spec("o1")}
    assert plan_items(BASE, new, T) == sorted(
        [
            ("n1/containers/lab.web.0", "w2"),
            ("n2/containers/lab.cache.0", None),
            ("n2/containers/prod.api.0", "o1"),
        ]
    )  # the manifest and the unchanged network are not in it


def test_digest_is_stable_and_ignores_order_bookkeeping_and_the_rest_of_the_base() -> None:
    new = {**BASE, WEB: spec("w2")}
    digest = plan_digest(BASE, new, T)
    assert digest.startswith("sha256:") and len(digest) == len("sha256:") + 64
    assert plan_digest(dict(reversed(BASE.items())), dict(reversed(new.items())), T) == digest
    # the commit an item names is bookkeeping: the same specs on another commit, the same plan
    assert plan_digest(BASE, {**BASE, WEB: spec("w2", commit="b" * 40)}, T) == digest
    # the same change on a base where something unrelated differs: the same plan
    moved = {**BASE, CACHE: spec("c9")}
    assert plan_digest(moved, {**moved, WEB: spec("w2")}, T) == digest


def test_digest_differs_when_what_the_merge_deploys_differs() -> None:
    reviewed = plan_digest(BASE, {**BASE, WEB: spec("w2")}, T)
    assert plan_digest(BASE, {**BASE, WEB: spec("w3")}, T) != reviewed  # another spec of the item
    assert plan_digest(BASE, {**BASE, WEB: spec("w2"), CACHE: spec("c2")}, T) != reviewed  # one more item
    assert plan_digest(BASE, {k: v for k, v in BASE.items() if k != WEB}, T) != reviewed  # removed instead
    assert plan_digest(BASE, BASE, T) == plan_digest({}, {}, T)  # no change: the digest of an empty plan


def test_the_note_carries_the_digest_and_the_warning_when_the_plan_changed() -> None:
    digest = plan_digest(BASE, {**BASE, WEB: spec("w2")}, T)
    note = review_note([], [], commit="c" * 40, ref="main", plan_digest=digest)
    assert f"Plan digest: `{digest}`" in note and "changed since review" not in note
    flagged = review_note(
        [], [], commit="c" * 40, ref="main", plan_digest=digest, reviewed=("sha256:" + "0" * 64, "d" * 40)
    )
    assert "**Plan changed since review**" in flagged and f"`{'d' * 12}`" in flagged and digest in flagged
