"""Protected environments and freezes, purely: which protection judges a commit, how
approvals count, when a commit is held, what a held environment publishes, what the
approve route answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from config_sync.approvals.controller import Approvals
from config_sync.approvals.hold import changes, hold_back
from config_sync.approvals.protection import (
    Approval,
    Protection,
    approvers,
    decide,
    describe,
    judging,
    protection_of,
)
from config_sync.approvals.store import ApprovalStore
from config_sync.models import Reading
from config_sync.publication.plane import sync_payload
from config_sync.reporting import LocalReporter
from phrame.gitlab import Approver, GitLabUnavailable, MergedApprovals
from schemas import Topics, check_payload, load_json

T = Topics()
A, B = "a" * 40, "b" * 40
PROTECTED = {"protected": {"approvals": 2}}
XMAS = {"freeze": [{"from": "2026-12-24T00:00:00Z", "to": "2026-12-27T00:00:00Z"}]}
IN_XMAS, AFTER_XMAS = 1798243200.0, 1798416001.0  # 2026-12-26T00:00Z, just after the 27th


def test_the_protection_as_last_deployed_judges_a_commit() -> None:
    before, lowered = protection_of(PROTECTED), protection_of({})
    assert judging(before, lowered).approvals == 2  # removing protected: still needs two
    assert judging(protection_of({"protected": {"approvals": 1}}), before).approvals == 1
    assert judging(None, before).approvals == 2  # the first deployment: its own file
    assert protection_of(None).is_empty


def test_distinct_approvers_count_once() -> None:
    approvals = [Approval(A, "alice", 1.0), Approval(A, "alice", 2.0), Approval(B, "bob", 3.0)]
    assert approvers(approvals, A) == ("alice",)
    hold = decide(protection_of(PROTECTED), approvals, A, 10.0)
    assert hold is not None and hold.reason == "waiting-approval" and hold.approvers == ("alice",)
    approvals.append(Approval(A, "bob", 4.0))
    assert decide(protection_of(PROTECTED), approvals, A, 10.0) is None


def test_a_freeze_holds_until_its_end_unless_overridden() -> None:
    frozen = protection_of(XMAS)
    hold = decide(frozen, [], A, IN_XMAS)
    assert hold is not None and hold.reason == "frozen" and hold.until == 1798329600.0
    assert describe(hold.to_doc()) == "suspended (frozen) until 2026-12-27T00:00:00Z"
    assert decide(frozen, [], A, AFTER_XMAS) is None
    assert decide(frozen, [Approval(A, "alice", 1.0, override_freeze=True)], A, IN_XMAS) is None
    # an override releases only the freeze: a protected environment still counts approvers
    both = Protection(2, frozen.windows)
    hold = decide(both, [Approval(A, "alice", 1.0, override_freeze=True)], A, IN_XMAS)
    assert hold is not None and hold.reason == "waiting-approval"
    # an override of another commit releases nothing
    assert decide(frozen, [Approval(B, "alice", 1.0, override_freeze=True)], A, IN_XMAS) is not None


def _container(env: str, digest: str, commit: str) -> tuple[str, dict[str, Any]]:
    return T.desired_item("n1", "containers", f"{env}.web.0"), {"digest": digest, "commit": commit}


def test_a_held_environment_keeps_what_is_published() -> None:
    prod_old, prod_new = _container("prod", "sha256:1", A), _container("prod", "sha256:2", B)
    lab_old, lab_new = _container("lab", "sha256:3", A), _container("lab", "sha256:4", B)
    previous = dict([prod_old, lab_old])
    rendered = {**dict([prod_new, lab_new]), T.manifest("n1"): {"generation": 1}}
    assert changes("prod", rendered, previous, T)
    out = hold_back(rendered, previous, {"prod"}, T)
    assert out[prod_old[0]] is previous[prod_old[0]]  # the very object: republishes nothing
    assert out[lab_new[0]] == lab_new[1] and T.manifest("n1") in out
    # a commit that changes only another environment does not change this one
    assert not changes(
        "prod", {**dict([lab_new]), prod_old[0]: {"digest": "sha256:1", "commit": B}}, previous, T
    )


def test_sync_payload_says_suspended_and_keeps_last_applied() -> None:
    hold = decide(protection_of(PROTECTED), [], B, 1.0)
    assert hold is not None
    before = {"last_applied": {"commit": A, "ts": 1.0}}
    doc = sync_payload(
        environment="prod", ref="main", commit=B, errors=[], previous=before, now=2.0, hold=hold.to_doc()
    )
    check_payload("desired-sync", doc)
    assert doc["hold"]["state"] == "suspended" and doc["hold"]["reason"] == "waiting-approval"
    assert doc["last_applied"]["commit"] == A
    released = sync_payload(environment="prod", ref="main", commit=B, errors=[], previous=doc, now=3.0)
    assert "hold" not in released and released["last_applied"]["commit"] == B


class Recorder:
    def __init__(self) -> None:
        self.sent: dict[str, bytes] = {}

    def __call__(self, topic: str, payload: bytes) -> None:
        self.sent[topic] = payload


def _approvals(sync: Mapping[str, Any] | None = None) -> tuple[Approvals, Recorder]:
    sent = Recorder()
    store = ApprovalStore(T, sent, wall=lambda: 5.0)
    readings = {A: Reading(A, {"prod": "main"}, [], {}, protections={"prod": PROTECTED})}
    approvals = Approvals(
        T, store, LocalReporter(), read=readings.__getitem__, sync_state=lambda env: sync, clock=lambda: 5.0
    )
    approvals.known = lambda: {"prod"}
    return approvals, sent


def test_approve_answers_and_the_store_survives_a_restart() -> None:
    approvals, sent = _approvals()
    assert approvals.approve("prod", B, "alice").status == 409  # nothing held
    assert approvals.approve("nowhere", B, "alice").status == 404
    assert approvals.approve("prod", "not-a-sha", "alice").status == 400
    reading = Reading(B, {"prod": "main"}, [], {"x": {}}, protections={"prod": PROTECTED})
    gate = approvals.gate("main", reading, {"prod"}, lambda envs: None)
    assert gate is not None
    prod_old, prod_new = _container("prod", "sha256:1", A), _container("prod", "sha256:2", B)
    gated = gate(dict([prod_new]), {}, dict([prod_old]))
    assert gated.holds["prod"]["reason"] == "waiting-approval"
    assert approvals.approve("prod", A[:12], "alice").status == 409  # not the held commit
    answer = approvals.approve("prod", B[:7], "alice")
    assert answer.status == 202 and answer.commit == B and answer.approvers == ("alice",)
    assert approvals.approve("prod", B, "alice").approvers == ("alice",)  # again: still one
    assert approvals.approve("prod", B, "bob").approvers == ("alice", "bob")
    raw = sent.sent[T.env_approvals("prod")]
    check_payload("desired-approvals", load_json(raw))
    again, _ = _approvals()
    again.store.restore({T.env_approvals("prod"): raw})
    assert approvers(again.store.of("prod"), B) == ("alice", "bob")
    assert [a["by"] for a in again.approvals_for("prod", B)] == ["alice", "bob"]


def test_the_last_deployed_commit_judges_a_commit_removing_protection() -> None:
    approvals, _ = _approvals({"last_applied": {"commit": A, "ts": 1.0}})
    lowered = Reading(B, {"prod": "main"}, [], {"x": {}}, protections={"prod": {}})
    assert approvals.protection("prod", lowered).approvals == 2
    fresh, _ = _approvals(None)  # never deployed: its own file
    assert fresh.protection("prod", lowered).is_empty


class FakeGitLab:
    """``phrame.gitlab.MergeApprovals``: an outage first, then !12 merged ``B`` with carol's approval."""

    def __init__(self) -> None:
        self.down = True
        self.asked: list[tuple[str, str]] = []

    def of_commit(self, sha: str, branch: str) -> MergedApprovals | None:
        self.asked.append((sha, branch))
        if self.down:
            raise GitLabUnavailable("no answer", reason="GitLab unreachable")
        return MergedApprovals(12, "https://gitlab.example.test/-/merge_requests/12", (Approver("carol"),))


def test_gitlab_approvals_are_asked_before_the_publication_and_an_outage_is_asked_again() -> None:
    approvals, sent = _approvals()
    gitlab = FakeGitLab()
    approvals.gitlab = gitlab
    reading = Reading(B, {"prod": "main", "lab": "other"}, [], {"x": {}}, protections={"prod": PROTECTED})
    approvals.prepare("main", reading)
    assert gitlab.asked == [(B, "main")]  # only the environments of this ref
    assert len(approvals.runner.queue) == 1  # asked again later, on the approvals' runner
    assert approvers(approvals.store.of("prod"), B) == ()
    gitlab.down = False
    approvals.prepare("main", reading)
    assert approvers(approvals.store.of("prod"), B) == ("carol",)
    assert [a["via"] for a in approvals.approvals_for("prod", B)] == ["gitlab"]
    check_payload("desired-approvals", load_json(sent.sent[T.env_approvals("prod")]))
    approvals.prepare("main", reading)  # one more approval is needed: carol counts once
    assert approvers(approvals.store.of("prod"), B) == ("carol",)
