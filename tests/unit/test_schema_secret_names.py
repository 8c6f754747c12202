"""``env: {X: {file: NAME}}`` names a file of the node's ``PHRAME_SECRETS_DIR``:
validate cannot know each node's folder, so the contract is a relative name with no
``..``; an absolute path is a ``schema`` problem at the value that says what to write."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_schema_values import ENV, WEB, schema_problem
from tests.unit.test_validate_limits import problems_of, service


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/etc/phrame/secrets/db.pw", "write 'db.pw', relative to the node's PHRAME_SECRETS_DIR"),
        ("/etc/shadow", "an absolute path; a secret is a name relative to the node's PHRAME_SECRETS_DIR"),
        ("../etc/shadow", "'..' would leave PHRAME_SECRETS_DIR"),
        ("a/../../b", "'..' would leave PHRAME_SECRETS_DIR"),
        ("..", "'..' would leave PHRAME_SECRETS_DIR"),
        ("a//b", "an empty part"),
        ("a/", "an empty part"),
        ("./a", "a '.' part"),
        ("", "an empty name"),
    ],
)
def test_a_secret_file_is_a_name_inside_the_secrets_dir(tmp_path: Path, name: str, reason: str) -> None:
    found = problems_of(tmp_path, service("web", "env:", "  PW:", f"    file: '{name}'"))
    p = schema_problem(found, WEB)
    assert (p.line, p.column, p.path) == (7, 11, "/env/PW/file"), p
    assert p.message.startswith(f"{name!r} is not valid: ") and reason in p.message, p.message


def test_the_same_holds_in_the_environment_defaults(tmp_path: Path) -> None:
    env = "name: lab\ndefaults:\n  env:\n    PW:\n      file: /etc/phrame/secrets/pw\n"
    p = schema_problem(problems_of(tmp_path, {ENV: env}), ENV)
    assert (p.line, p.path) == (5, "/defaults/env/PW/file") and "write 'pw'" in p.message


@pytest.mark.parametrize("name", ["db.pw", "egress/cdn.token", "a..b", ".hidden", "x-y_z@1"])
def test_relative_names_are_fine(tmp_path: Path, name: str) -> None:
    assert problems_of(tmp_path, service("web", "env:", "  PW:", f"    file: '{name}'")) == []


def test_other_env_value_errors_still_name_the_key(tmp_path: Path) -> None:
    found = problems_of(tmp_path, service("web", "env:", "  PW:", "    path: x"))
    p = schema_problem(found, WEB)
    assert p.path == "/env/PW/path" and "unknown key 'path' (allowed: file, secret)" in p.message, p
