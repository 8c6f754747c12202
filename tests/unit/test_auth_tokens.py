"""The tokens file and the access decision: parsing, hashes, scopes, legacy secrets, re-reads;
and the audit list (bounded, restored, a failed publish never raises)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from phrame.auth import AuditLog, TokensFileError, TokenStore, hash_token, parse_tokens
from phrame.auth.access import Legacy, check_access
from schemas import check_payload

H = hash_token


def _store(tmp_path: Path, *entries: tuple[str, list[str], str]) -> TokenStore:
    return TokenStore.of(entries, tmp_path / "tokens.yaml")


def test_a_token_names_its_holder_and_scopes(tmp_path: Path) -> None:
    store = _store(tmp_path, ("alice", ["deploy"], "tok-a"), ("bob", ["read"], "tok-b"))
    alice = store.holder("tok-a")
    assert alice is not None and alice.name == "alice" and alice.may("deploy") and alice.may("read")
    assert not alice.may("admin")
    assert store.holder("tok-b") is not None and store.holder("nope") is None and store.holder(None) is None


def test_only_hashes_are_stored_and_a_file_holding_a_token_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    TokenStore.of([("ci", ["admin"], "s3cret-token")], path)
    assert "s3cret-token" not in path.read_text()
    with pytest.raises(TokensFileError, match=r"entry 1 \(ci\): sha256 must be"):
        parse_tokens([{"name": "ci", "scopes": ["admin"], "sha256": "s3cret-token"}])


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"people": []}, "expected a list"),
        (["alice"], "entry 1: expected a mapping"),
        ([{"name": "a b", "scopes": ["read"], "sha256": H("x")}], "is not a name"),
        ([{"name": "a", "scopes": ["root"], "sha256": H("x")}], "scopes .* must be a non-empty list"),
        ([{"name": "a", "scopes": [], "sha256": H("x")}], "non-empty"),
        ([{"name": "a", "scopes": ["read"], "sha256": H("x"), "token": "x"}], "unknown field"),
        (
            [
                {"name": "a", "scopes": ["read"], "sha256": H("x")},
                {"name": "a", "scopes": ["read"], "sha256": H("y")},
            ],
            "entry 2 \\(a\\): name 'a' appears twice",
        ),
        (
            [
                {"name": "a", "scopes": ["read"], "sha256": H("x")},
                {"name": "b", "scopes": ["read"], "sha256": H("x")},
            ],
            "same token hash",
        ),
    ],
)
def test_a_bad_tokens_file_says_which_entry_and_what(doc: object, why: str) -> None:
    with pytest.raises(TokensFileError, match=why):
        parse_tokens(doc, where="tokens.yaml")


def test_json_and_the_tokens_key_read_too(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tokens": [{"name": "ci", "scopes": "admin", "sha256": H("t").upper()}]}))
    holder = TokenStore(path).holder("t")
    assert holder is not None and holder.may("admin")


def test_a_changed_file_is_read_again_and_a_broken_one_refuses_everyone(tmp_path: Path) -> None:
    store = _store(tmp_path, ("alice", ["deploy"], "tok-a"))
    path = store.path
    path.write_text(f"- {{name: carol, scopes: [read], sha256: {H('tok-c')}}}\n")
    os.utime(path, ns=(1, 1))  # a distinct stamp even within the file system's time resolution
    assert store.holder("tok-a") is None  # revoked without a restart
    assert store.holder("tok-c") is not None
    path.write_text("- {name: carol, scopes: [read], sha256: nothex}\n")
    os.utime(path, ns=(2, 2))
    assert store.holder("tok-c") is None  # fail closed until fixed


def test_access_401_unknown_403_without_the_scope_and_legacy_secrets(tmp_path: Path) -> None:
    store = _store(tmp_path, ("bob", ["read"], "tok-b"), ("alice", ["deploy"], "tok-a"))
    assert check_access(None, "deploy", store=store).status == 401
    assert check_access("wrong", "deploy", store=store).status == 401
    forbidden = check_access("tok-b", "deploy", store=store)
    assert forbidden.status == 403 and forbidden.who == "bob" and "needs deploy" in forbidden.why
    allowed = check_access("tok-a", "deploy", store=store)
    assert allowed.is_allowed and allowed.who == "alice"
    legacy = [Legacy("api-token", "old-secret", frozenset({"admin"}))]
    assert check_access("old-secret", "admin", store=store, legacy=legacy).who == "api-token"
    assert check_access("old-secret", "admin", store=None, legacy=legacy).is_allowed
    assert check_access("old-secret", "admin", store=store).status == 401  # not honoured when not given


def test_the_audit_list_is_bounded_valid_restored_and_best_effort(caplog: pytest.LogCaptureFixture) -> None:
    sent: list[tuple[str, bytes]] = []
    audit = AuditLog(
        "config-sync", "phrame/desired/audit/config-sync", lambda t, p: sent.append((t, p)), keep=3
    )
    audit.restore(
        json.dumps(
            {
                "writer": "config-sync",
                "entries": [
                    {
                        "ts": 1.0,
                        "who": "old",
                        "action": "sync",
                        "target": "main",
                        "result": "accepted",
                        "status": 202,
                    }
                ],
            }
        ).encode()
    )
    for i in range(4):
        audit.record(
            who="alice", action="promote", target="lab/web", result="accepted", status=202, commit=f"{i:07d}"
        )
    doc = json.loads(sent[-1][1])
    check_payload("desired-audit", doc)
    assert [e["commit"] for e in doc["entries"]] == ["0000001", "0000002", "0000003"]

    def broken(_t: str, _p: bytes) -> None:
        raise OSError("broker away")

    failing = AuditLog("topic-api", "phrame/desired/audit/topic-api", broken)
    with caplog.at_level(logging.INFO, logger="phrame.audit"):
        failing.record(who="bob", action="kv-put", target="phrame/kv/x", result="accepted", status=200)
    assert "kv-put phrame/kv/x by bob: accepted (200)" in caplog.text and "could not publish" in caplog.text


def test_the_services_read_the_tokens_file_setting(tmp_path: Path) -> None:
    from config_sync.settings import SyncSettings
    from topic_api.app import create_app
    from topic_api.errors import SettingsError
    from topic_api.settings import ApiSettings

    env = {"PHRAME_REPO_URL": str(tmp_path), "PHRAME_TOKENS_FILE": str(tmp_path / "t.yaml")}
    assert SyncSettings.from_env(env).tokens_file == str(tmp_path / "t.yaml")
    assert ApiSettings.from_env({"PHRAME_TOKENS_FILE": "/etc/phrame/tokens.yaml"}).tokens_file == Path(
        "/etc/phrame/tokens.yaml"
    )
    # reads may require a token of the file alone (no PHRAME_API_TOKEN)
    ApiSettings(mirror_dir=tmp_path, read_token_required=True, tokens_file=tmp_path / "t.yaml")
    with pytest.raises(SettingsError, match="PHRAME_TOKENS_FILE"):
        ApiSettings(mirror_dir=tmp_path, read_token_required=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: x, scopes: [root], sha256: 00}\n")
    with pytest.raises(SettingsError, match=r"PHRAME_TOKENS_FILE: .*bad.yaml: entry 1 \(x\)"):
        create_app(ApiSettings(mirror_dir=tmp_path, tokens_file=bad))


def test_phrame_token_new_prints_the_token_once_and_an_entry_that_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from phrame.cli import main

    assert main(["token", "new", "alice", "--scopes", "deploy,read"]) == 0
    out, err = capsys.readouterr()
    token = out.strip()
    entry = err.splitlines()[-1]
    assert token not in err and entry.startswith("- ")
    path = tmp_path / "tokens.yaml"
    path.write_text(entry + "\n")
    holder = TokenStore(path).holder(token)
    assert holder is not None and holder.name == "alice" and holder.may("deploy")
    monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
    assert main(["token", "hash"]) == 0
    assert capsys.readouterr().out.strip() == H(token)
    assert main(["token", "new", "alice", "--scopes", "root"]) == 2
