"""``notify:`` in environment.yaml: a bad block is a problem at its file:line, a good one is
read into targets, in file order, with every event by default."""

from __future__ import annotations

from pathlib import Path

from config_sync.notify.events import EVENTS, Target
from config_sync.notify.targets import targets_of
from config_sync.service import commit_page
from config_sync.settings import SyncSettings
from phrame.config_repo import load_directory, validate
from tests.unit.test_schema_values import ENV, schema_problem
from tests.unit.test_validate_limits import problems_of

GOOD = """name: lab
notify:
  - name: ops-slack
    format: slack
    url_file: ops-slack.url
  - name: pager
    format: json
    url_file: pager_1.url
    on: [failed, recovered]
"""


def test_a_good_notify_block_validates_and_is_read_in_order(tmp_path: Path) -> None:
    assert problems_of(tmp_path, {ENV: GOOD}) == []
    repo, read = load_directory(tmp_path / "repo")
    assert validate(repo, read) == []
    assert targets_of(repo) == {
        "lab": (
            Target("ops-slack", "slack", "ops-slack.url", frozenset(EVENTS)),
            Target("pager", "json", "pager_1.url", frozenset({"failed", "recovered"})),
        )
    }


def test_a_url_in_git_is_refused_where_it_is_written(tmp_path: Path) -> None:
    text = "name: lab\nnotify:\n  - name: ops\n    format: slack\n    url_file: https://hooks.example.test/T0/B0/x\n"
    p = schema_problem(problems_of(tmp_path, {ENV: text}), ENV)
    assert (p.line, p.column, p.path) == (5, 15, "/notify/0/url_file")
    assert "PHRAME_NOTIFY_SECRETS_DIR" in p.message and "no '/'" in p.message


def test_an_unknown_format_event_or_key_is_refused_at_its_line(tmp_path: Path) -> None:
    text = "name: lab\nnotify:\n  - name: ops\n    format: teams\n    url_file: ops.url\n"
    p = schema_problem(problems_of(tmp_path, {ENV: text}), ENV)
    assert (p.line, p.path) == (4, "/notify/0/format") and "'teams'" in p.message
    text = "name: lab\nnotify:\n  - name: ops\n    format: json\n    url_file: ops.url\n    on: [failed, healthy]\n"
    p = schema_problem(problems_of(tmp_path, {ENV: text}), ENV)
    assert (p.line, p.path) == (6, "/notify/0/on/1") and "'healthy'" in p.message
    text = "name: lab\nnotify:\n  - name: ops\n    format: json\n    url: https://x.test/\n"
    found = problems_of(tmp_path, {ENV: text})
    assert [(p.line, p.message.split(" (")[0]) for p in found] == [
        (3, "'url_file' is a required property"),
        (5, "unknown key 'url'"),
    ]


def test_two_targets_with_one_name_are_reported_at_the_second(tmp_path: Path) -> None:
    text = GOOD.replace("name: pager", "name: ops-slack")
    found = problems_of(tmp_path, {ENV: text})
    assert [p.format() for p in found] == [
        f"{ENV}:6:11: notify-duplicate: notify target 'ops-slack' is also entry 1; give each target its own name"
    ]


def test_a_deployment_links_to_its_commit_on_gitlab_when_the_project_is_a_path() -> None:
    sha = "c" * 40
    gitlab = dict(
        git_host="gitlab", gitlab_url="https://gitlab.example.test/", gitlab_token="t", webhook_secret="s"
    )
    on = SyncSettings(repo_url="x", state_dir="/tmp", gitlab_project="ops/phrame-config", **gitlab)  # type: ignore[arg-type]
    assert commit_page(on, sha) == f"https://gitlab.example.test/ops/phrame-config/-/commit/{sha}"
    by_id = SyncSettings(repo_url="x", state_dir="/tmp", gitlab_project="42", **gitlab)  # type: ignore[arg-type]
    assert commit_page(by_id, sha) is None
    assert commit_page(SyncSettings(repo_url="x", state_dir="/tmp"), sha) is None


def test_the_notify_settings_are_read_from_the_environment() -> None:
    s = SyncSettings.from_env(
        {
            "PHRAME_REPO_URL": "/srv/phrame-config.git",
            "PHRAME_NOTIFY_SECRETS_DIR": "/run/secrets/notify",
            "PHRAME_NOTIFY_TIMEOUT_S": "2.5",
            "PHRAME_NOTIFY_ATTEMPTS": "3",
            "PHRAME_NOTIFY_RETRY_MIN_S": "0.5",
            "PHRAME_NOTIFY_RETRY_MAX_S": "30",
        }
    )
    assert (s.notify_secrets_dir, s.notify_timeout_s, s.notify_attempts) == ("/run/secrets/notify", 2.5, 3)
    assert (s.notify_retry_min_s, s.notify_retry_max_s) == (0.5, 30.0)
    assert SyncSettings.from_env({"PHRAME_REPO_URL": "/r.git"}).notify_secrets_dir == "/etc/phrame/notify"
