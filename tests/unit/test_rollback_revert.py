"""A rollback's pure part (config_sync.rollbacks.revert, .answer): the default target, the file
changes, the message, and the request body's checks."""

from __future__ import annotations

import pytest

from config_sync.deploys.records import CONVERGED, FAILED, PENDING, SUPERSEDED, DeployRecord
from config_sync.rollbacks.answer import read_request
from config_sync.rollbacks.revert import (
    RollbackRefused,
    branch_name,
    check_name,
    check_sha,
    file_changes,
    message,
    previous_success,
)


def rec(commit: str, state: str) -> DeployRecord:
    return DeployRecord(commit * 40, "main", "a", "m", 1.0, state=state)


def test_the_default_target_is_the_newest_converged_deployment_before_the_current_one() -> None:
    assert previous_success([]) is None
    assert previous_success([rec("a", CONVERGED)]) is None  # only what runs now
    recs = [
        rec("d", PENDING),
        rec("c", FAILED),
        rec("b", SUPERSEDED),
        rec("a", CONVERGED),
        rec("0", CONVERGED),
    ]
    assert previous_success(recs) == "a" * 40
    # the current commit converged earlier too (republished): never "back" to itself
    assert previous_success([rec("a", CONVERGED), rec("a", CONVERGED), rec("b", CONVERGED)]) == "b" * 40


def test_file_changes_add_change_and_delete_only_what_differs() -> None:
    now = {"e/a.yaml": b"1", "e/b.yaml": b"2", "e/new.yaml": b"x"}
    then = {"e/a.yaml": b"1", "e/b.yaml": b"old", "e/gone.yaml": b"g"}
    assert file_changes(now, then) == {"e/b.yaml": b"old", "e/gone.yaml": b"g", "e/new.yaml": None}
    assert file_changes(now, now) == {}


def test_message_names_what_it_reverts_and_the_branch_its_sha() -> None:
    sha = "0123456789abcdef" * 2 + "01234567"
    text = message("lab", sha, "web 1", who="carol")
    assert text.startswith("Roll back lab to 0123456789ab (web 1)\n\n")
    assert sha in text and "for carol" in text
    assert branch_name("lab", sha) == "rollback/lab/0123456789ab"


def test_bad_names_shas_and_bodies_are_refused_with_400_saying_what() -> None:
    for bad in ("Lab", "../x", ""):
        with pytest.raises(RollbackRefused) as e:
            check_name(bad)
        assert e.value.status == 400
    assert check_sha(None) is None and check_sha("abcdef0") == "abcdef0"
    for bad in ("abc", "ABCDEF01", "z" * 10, 7):
        with pytest.raises(RollbackRefused, match="'to' must be a commit sha"):
            check_sha(bad)
    assert read_request(b"") == (None, False)
    assert read_request(b'{"to": "abcdef0", "merge": true}') == ("abcdef0", True)
    for body, why in (
        (b"[", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"force": true}', r"unknown field\(s\) 'force'; known: to, merge"),
        (b'{"merge": "yes"}', "'merge' must be true or false"),
        (b'{"to": 5}', "'to' must be a commit sha or null"),
    ):
        with pytest.raises(RollbackRefused, match=why) as e:
            read_request(body)
        assert e.value.status == 400
