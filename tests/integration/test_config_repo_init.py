"""``scripts/config-repo-init``: a bare config repository that root, people and the services'
uid 10001 all push to, with real git and real users (setpriv), no Docker.

The compose stack's config-sync and placement run as uid 10001 and placement pushes; people
push from the host. A plain ``chown 10001`` made host pushes fail ("dubious ownership") and,
once root had pushed, left placement unable to write objects. The host's git config is a file
of the test's own (``GIT_CONFIG_SYSTEM``), never the machine's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import require, require_binary

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "config-repo-init"
SERVICE_UID = 10001
FILES = 80


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder uid 10001 can enter (pytest's tmp_path is root's alone)."""
    require(os.geteuid() == 0, "needs root: the script gives the repository to uid 10001")
    require_binary("setpriv", "util-linux")
    folder = Path(tempfile.mkdtemp(prefix="phrame-repo-init-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def env_of(place: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_SYSTEM": str(place / "system-gitconfig"),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.test",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.test",
    }


def run(
    argv: list[str], env: dict[str, str], *, as_service: bool = False
) -> subprocess.CompletedProcess[str]:
    prefix = ["setpriv", f"--reuid={SERVICE_UID}", f"--regid={SERVICE_UID}", "--clear-groups"]
    return subprocess.run([*(prefix if as_service else []), *argv], env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def push_a_commit(
    place: Path, repo: Path, name: str, *, as_service: bool = False
) -> subprocess.CompletedProcess[str]:
    """Clone ``repo``, commit :data:`FILES` new files and push them to main, as root or as uid
    10001. Under git's unpack limit (100 objects) a push stores loose objects, in folders named
    by their first two hex digits: root's push creates about two thirds of the 256, so the
    other user's objects land in some of them (never all by chance)."""
    env, work = env_of(place), place / f"work-{name}"
    if as_service:
        work.mkdir()
        os.chown(work, SERVICE_UID, SERVICE_UID)
        env["HOME"] = str(work)
    done = run(["git", "clone", "--quiet", str(repo), str(work)], env, as_service=as_service)
    if done.returncode != 0:
        return done
    write = f'for i in $(seq {FILES}); do echo "{name} $i" > "$1/{name}-$i.txt"; done'
    for argv in (
        ["git", "-C", str(work), "checkout", "--quiet", "-B", "main"],
        ["sh", "-c", write, "sh", str(work)],
        ["git", "-C", str(work), "add", "-A"],
        ["git", "-C", str(work), "commit", "--quiet", "-m", name],
        ["git", "-C", str(work), "push", "--quiet", "origin", "main"],
    ):
        done = run(argv, env, as_service=as_service)
        if done.returncode != 0:
            return done
    return done


def test_root_and_the_services_uid_push_in_turn(place: Path) -> None:
    repo, env = place / "phrame-config.git", env_of(place)
    made = subprocess.run([str(SCRIPT), str(repo)], env=env, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert repo.stat().st_uid == SERVICE_UID
    for who, as_service in (
        ("root-1", False),
        ("placement-1", True),
        ("root-2", False),
        ("placement-2", True),
    ):
        done = push_a_commit(place, repo, who, as_service=as_service)
        assert done.returncode == 0, f"{who}: {done.stderr}"
    log = run(["git", "--git-dir", str(repo), "log", "--format=%s", "main"], env)
    assert log.stdout.split() == ["placement-2", "root-2", "placement-1", "root-1"]
    fsck = run(["git", "--git-dir", str(repo), "fsck", "--no-progress"], env, as_service=True)
    assert fsck.returncode == 0, fsck.stderr


def test_a_second_run_repairs_and_adds_nothing_twice(place: Path) -> None:
    repo, env = place / "phrame-config.git", env_of(place)
    for _ in range(2):
        done = subprocess.run([str(SCRIPT), str(repo)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    trusted = run(["git", "config", "--system", "--get-all", "safe.directory"], env).stdout.split()
    assert trusted == [str(repo)]
    os.chown(repo / "objects", 0, 0)  # a restore or a hand-made change
    assert subprocess.run([str(SCRIPT), str(repo)], env=env, capture_output=True, timeout=60).returncode == 0
    assert push_a_commit(place, repo, "after-repair", as_service=True).returncode == 0


def test_it_refuses_a_relative_path_and_a_folder_that_is_no_repository(place: Path) -> None:
    env = env_of(place)
    (place / "plain").mkdir()
    for arg in ("relative.git", str(place / "plain")):
        done = subprocess.run([str(SCRIPT), arg], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and "error:" in done.stderr, done
