"""The merge check (config_sync.reviews.merges) with a fake repository: the plan of a merge is
taken from the commit deployed before it (an invalid head in between never counts), else
the merged head's first parent; only a reviewed merge request whose plan differs is flagged,
and the flag goes to phrame/deploy, the deploy records and the note."""

from __future__ import annotations

from typing import Any

from config_sync.models import Reading
from config_sync.reviews.digest import plan_digest
from config_sync.reviews.memory import ReviewedPlans
from config_sync.reviews.merges import CHANGED, MergeCheck
from schemas import Topics

T = Topics()
WEB = T.desired_item("n1", "containers", "lab.web.0")
API = T.desired_item("n1", "containers", "lab.api.0")
TREES: dict[str, dict[str, dict[str, Any]]] = {
    "a" * 40: {WEB: {"digest": "w1"}, API: {"digest": "a1"}},
    "b" * 40: {WEB: {"digest": "w2"}, API: {"digest": "a1"}},  # the merge of a change to web
    "c" * 40: {WEB: {"digest": "w3"}, API: {"digest": "a2"}},  # web again, and api
}
A, B, C = "a" * 40, "b" * 40, "c" * 40


class Recorded:
    def __init__(self) -> None:
        self.remarks: list[tuple[str, str, str]] = []
        self.annotations: list[tuple[str, dict[str, Any]]] = []
        self.notes: list[tuple[int, str]] = []
        self.published: list[bytes] = []


def _check(parents: dict[str, str] | None = None) -> tuple[MergeCheck, ReviewedPlans, Recorded]:
    seen = Recorded()
    reviewed = ReviewedPlans(T.reviews(), lambda _t, payload: seen.published.append(payload))
    check = MergeCheck(
        reviewed, T,
        read=lambda sha: Reading(sha, {}, [], TREES.get(sha)),
        resolve=lambda sha: sha if sha in TREES else None,
        parent_of=lambda sha: (parents or {}).get(sha),
        remark=lambda commit, text, ref: seen.remarks.append((commit, text, ref)),
        annotate=lambda commit, field: seen.annotations.append((commit, field)),
        note=lambda iid, body: seen.notes.append((iid, body)),
    )  # fmt: skip
    return check, reviewed, seen


def test_a_merge_whose_plan_is_the_reviewed_one_is_not_flagged() -> None:
    check, reviewed, seen = _check()
    reviewed.remember(7, plan_digest(TREES[A], TREES[B], T), "f" * 40, "main")
    check.published("main", A)
    check.merged("main", 7, B)
    check.published("main", B)
    assert check.check("main", B) == [] and not seen.remarks and not seen.notes
    assert seen.published  # the reviewed digest went out, retained


def test_a_merge_whose_plan_changed_is_flagged_everywhere_and_only_once() -> None:
    check, reviewed, seen = _check()
    reviewed.remember(8, plan_digest(TREES[A], TREES[B], T), "f" * 40, "main")  # reviewed: web only
    check.published("main", A)  # an invalid head after A never calls published: A stays "before"
    check.merged("main", 8, None)  # no merge commit given: the head is judged
    check.published("main", C)
    assert check.check("main", C) == [8]
    merged = plan_digest(TREES[A], TREES[C], T)
    assert seen.remarks == [(C, CHANGED, "main")]
    assert seen.annotations == [
        (C, {"mr": 8, "reviewed": plan_digest(TREES[A], TREES[B], T), "merged": merged})
    ]
    ((iid, body),) = seen.notes
    assert iid == 8 and "**Plan changed since review**" in body and merged in body
    assert check.check("main", C) == []  # judged once


def test_never_reviewed_or_no_base_is_not_judged_and_a_restart_falls_back_to_the_first_parent() -> None:
    check, reviewed, seen = _check(parents={C: A})
    check.merged("main", 9, C)  # never reviewed
    assert check.check("main", C) == []
    reviewed.remember(10, plan_digest(TREES[A], TREES[B], T), "f" * 40, "main")
    check.merged("main", 10, C)  # after a restart nothing was published yet: C's first parent, A
    assert check.check("main", C) == [10] and seen.remarks == [(C, CHANGED, "main")]
    other, reviewed_other, _ = _check()
    reviewed_other.remember(11, "sha256:" + "0" * 64, "f" * 40, "main")
    other.merged("main", 11, C)  # no base known at all: nothing to compare
    assert other.check("main", C) == []
