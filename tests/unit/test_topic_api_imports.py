"""The pure parts of the topic API's compose import: the branch named by the files' hash, the
merge request text, validation of the files alone or laid over a repository, the settings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phrame.compose import import_compose
from phrame.config_repo.sources import DirectorySource
from tests.support.sync_support import SAMPLE
from topic_api.errors import SettingsError
from topic_api.imports.check import problems_alone, problems_on
from topic_api.imports.proposal import Draft, Proposal
from topic_api.imports.settings import ImportSettings

ROOT = Path(__file__).parents[2]
NGINX = (ROOT / "fixtures/compose/nginx-flask-mysql.yml").read_text()


def draft(text: str = NGINX, env: str = "shop", node: str | None = "core-01") -> Draft:
    return Draft(env, node, import_compose(text, env=env, node=node))


def test_the_branch_is_named_by_the_files_so_the_same_import_names_the_same_branch() -> None:
    a, b = draft(), draft()
    assert a.branch == b.branch and a.branch.startswith("phrame-import/shop-") and len(a.id) == 8
    assert draft(node="edge-01").branch != a.branch  # other files, another proposal
    assert draft(env="shop2").branch.startswith("phrame-import/shop2-")


def test_the_merge_request_lists_the_files_and_every_unsupported_feature() -> None:
    d = draft()
    assert d.result.unsupported  # the fixture has build-only services and secrets
    text = d.description(sorted(d.result.files), "checked")
    for u in d.result.unsupported:
        assert u.format() in text
    for path in d.result.files:
        assert f"`{path}`" in text
    message = d.commit_message(list(d.result.files))
    assert message.startswith("Import compose services into environment shop pinned to node core-01\n")
    assert "Imported-By: phrame topic-api" in message


def test_files_alone_ignore_rules_that_need_the_rest_of_the_repository() -> None:
    pinned = draft(node="nowhere-9")
    assert problems_alone(pinned.result.files) == []
    new, old = problems_on(DirectorySource(SAMPLE), pinned.result.files)
    assert old == [] and [p.rule for p in new] == ["unknown-node"]
    cycle = "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n"
    assert [p.rule for p in problems_alone(draft(cycle).result.files)] == ["dependency-cycle"]


def test_an_import_that_overwrites_a_broken_file_is_not_blamed_for_the_rest(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "repo")
    broken = tmp_path / "repo/nodes/edge-03.yaml"
    broken.write_text(broken.read_text() + "bogus: 1\n")
    new, old = problems_on(DirectorySource(tmp_path / "repo"), draft().result.files)
    assert new == [] and len(old) == 1


def test_the_answer_carries_what_was_proposed() -> None:
    d = draft()
    doc = Proposal(d, dict(d.result.files), scope="repository", base="a" * 40).to_json(dry_run=True)
    assert doc["branch"] is None and doc["merge_request"] is None and doc["dry_run"] is True
    assert doc["validation"] == {
        "valid": True,
        "scope": "repository",
        "base": "a" * 40,
        "existing_problems": 0,
    }
    assert doc["unsupported"][0] == {
        "service": d.result.unsupported[0].service,
        "key": d.result.unsupported[0].key,
        "reason": d.result.unsupported[0].reason,
    }


def test_settings_name_the_target_and_refuse_a_half_gitlab() -> None:
    assert ImportSettings().target is None
    assert ImportSettings(repo_url="/srv/config.git").target == "local"
    assert ImportSettings(track_ref="refs/heads/prod").track_ref == "prod"
    with pytest.raises(SettingsError, match="PHRAME_GITLAB_TOKEN, PHRAME_GITLAB_PROJECT"):
        ImportSettings(git_host="gitlab", gitlab_url="https://gitlab.example")
    with pytest.raises(SettingsError, match="a branch"):
        ImportSettings(track_ref="refs/tags/v1")
    full = ImportSettings(git_host="gitlab", gitlab_url="u", gitlab_token="secret-token", gitlab_project="p")
    assert full.target == "gitlab" and "secret-token" not in repr(full)
