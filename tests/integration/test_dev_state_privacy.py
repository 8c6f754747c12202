"""The dev stack's state folder is its owner's alone: an older, world-readable one is made
private at start, a secret others could read is replaced, one that is not the user's own is
refused, and a person's later push keeps the repository private. Real git; nothing starts."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from dev_stack.errors import DevError
from dev_stack.settings import DevSettings
from dev_stack.supervisor import DevStack


@pytest.fixture
def loose_umask() -> object:
    """The umask of a person's shell (022), whatever the test process had; restored after."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def opened(folder: Path) -> list[str]:
    """Entries below and at ``folder`` that group or others may read (links aside)."""
    paths = [folder, *folder.rglob("*")]
    return [str(p) for p in paths if not p.is_symlink() and mode(p) & 0o077]


def stack_in(state: Path, lines: list[str]) -> DevStack:
    return DevStack(DevSettings(state, nodes=("pv-1",)), say=lines.append)


def test_an_older_open_state_folder_is_made_private_and_stays_so_after_a_push(
    tmp_path: Path, loose_umask: object
) -> None:
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    (state / "logs" / "config-sync.log").write_text("an older run's log\n")
    state.chmod(0o755)
    lines: list[str] = []
    stack_in(state, lines).prepare()
    assert not opened(state)
    # a person's push (their own shell's umask) adds objects: git keeps them private
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(state / "config.git"), str(clone)], check=True)
    (clone / "notes.txt").write_text("ENV_VALUE=secret\n")
    ident = ["-c", "user.name=Ada", "-c", "user.email=ada@example.test"]
    subprocess.run(["git", *ident, "add", "notes.txt"], cwd=clone, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "notes"], cwd=clone, check=True)
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=clone, check=True, capture_output=True)
    assert not opened(state / "config.git")


def test_a_secret_others_could_read_is_replaced(tmp_path: Path, loose_umask: object) -> None:
    state = tmp_path / "state"
    state.mkdir()
    token = state / "api-token"
    token.write_text("seen-by-others\n")
    token.chmod(0o644)
    lines: list[str] = []
    stack_in(state, lines).prepare()
    assert token.read_text().strip() != "seen-by-others" and mode(token) == 0o600
    assert f"{token} was readable by other users: replaced it with a new one (0600)" in lines


def test_a_secret_that_is_not_the_users_own_file_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    planted = tmp_path / "planted"
    planted.write_text("chosen-by-someone-else\n")
    (state / "webhook-secret").symlink_to(planted)
    with pytest.raises(DevError, match="webhook-secret is not a file of yours"):
        stack_in(state, []).prepare()
    assert not (state / "config.git").exists()  # nothing made


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_state_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    os.chown(state, 65534, 65534)  # nobody's: whoever made it could read what we write there
    with pytest.raises(DevError, match="belongs to uid 65534, not to you"):
        stack_in(state, []).prepare()
    assert list(state.iterdir()) == []
