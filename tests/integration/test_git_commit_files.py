"""``GitWriter.commit_files``: several files in one commit on an explicit parent, pushed to a
new branch of a real bare remote without touching the tracked branch (the topic API's
compose import); a second push of another commit to that branch is rejected, never forced."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from phrame.git import PushRejected
from phrame.git.writing import GitWriter
from tests.support.sync_support import ConfigRemote

FILES = {
    "environments/shop/environment.yaml": b"name: shop\nplacement: auto\n",
    "environments/shop/services/web.yaml": b"name: web\nimage: nginx:1\n",
}


def test_commit_files_makes_one_commit_with_every_file_and_keeps_the_rest(tmp_path: Path) -> None:
    remote = ConfigRemote.with_sample(tmp_path / "remote")
    remote.work.close()
    writer = GitWriter(str(remote.bare_path), tmp_path / "state" / "cache.git")
    writer.fetch()
    main = writer.head("main")
    sha = writer.commit_files(writer.head("main"), FILES, "import shop")
    writer.push(sha, "phrame-import/shop-1")
    with git.Repo(remote.bare_path) as bare:
        commit = bare.commit("phrame-import/shop-1")
        assert [p.hexsha for p in commit.parents] == [main]
        changed = bare.git.diff_tree("--no-commit-id", "--name-only", "-r", main, commit.hexsha)
        assert sorted(changed.splitlines()) == sorted(FILES)
        for path, content in FILES.items():
            assert (commit.tree / path).data_stream.read() == content
        assert (commit.tree / "nodes").type == "tree"  # the sample's files are still there
        assert bare.commit("main").hexsha == main  # the tracked branch is untouched
    other = writer.commit_files(main, {"README.md": b"x\n"}, "another")
    with pytest.raises(PushRejected):
        writer.push(other, "phrame-import/shop-1")


def test_commit_files_with_no_files_is_refused(tmp_path: Path) -> None:
    remote = ConfigRemote.with_sample(tmp_path / "remote")
    remote.work.close()
    writer = GitWriter(str(remote.bare_path), tmp_path / "state" / "cache.git")
    writer.fetch()
    with pytest.raises(ValueError, match="no files"):
        writer.commit_files(writer.head("main"), {}, "nothing")


def test_commit_files_deletes_a_path_given_none_and_reads_folders_back(tmp_path: Path) -> None:
    remote = ConfigRemote.with_sample(tmp_path / "remote")
    remote.work.close()
    writer = GitWriter(str(remote.bare_path), tmp_path / "state" / "cache.git")
    writer.fetch()
    main = writer.head("main")
    folder = "environments/studio-a/services"
    before = writer.files_under(main, folder)
    gone = f"{folder}/egress.yaml"
    assert gone in before and writer.files_under(main, "environments/nowhere") == {}
    sha = writer.commit_files(main, {gone: None, f"{folder}/new.yaml": b"name: new\n"}, "swap")
    after = writer.files_under(sha, folder)
    assert gone not in after and after[f"{folder}/new.yaml"] == b"name: new\n"
    assert {p: c for p, c in after.items() if p != f"{folder}/new.yaml"} == {
        p: c for p, c in before.items() if p != gone
    }


def test_a_message_longer_than_one_command_line_argument_is_committed_whole(tmp_path: Path) -> None:
    """Placement's message lists every move: a lost shard of 1,000 nodes makes one past the
    kernel's 128 KiB limit on a single argument, which ``git commit-tree -m`` cannot take."""
    remote = ConfigRemote.with_sample(tmp_path / "remote")
    remote.work.close()
    writer = GitWriter(str(remote.bare_path), tmp_path / "state" / "cache.git")
    writer.fetch()
    lines = [f"edge-agent.{i} node-{i:04d} → unassigned: node-{i:04d} offline for 61 s" for i in range(3000)]
    message = "placement prod: 3000 replica moves\n\n" + "\n".join(lines) + "\n"
    assert len(message.encode()) > 131_072
    sha = writer.commit_files(writer.head("main"), FILES, message)
    with git.Repo(writer.path) as repo:
        assert repo.commit(sha).message == message
