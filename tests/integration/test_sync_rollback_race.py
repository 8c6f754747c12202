"""A rollback's push that loses a race with another push (real git): it is built again on
the new head and pushed fast-forward, keeping the other push; a branch that keeps moving
ends in a 409, nothing forced."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import git
import pytest

from config_sync.deploys.records import CONVERGED, DeployRecord
from config_sync.intake.clone import SyncRepo
from config_sync.rollbacks.revert import RollbackRefused
from config_sync.rollbacks.runner import Rollbacks
from tests.integration.test_sync_deploy_records import egress_with
from tests.support.sync_support import SAMPLE, ConfigRemote

ENV = "studio-a"


@dataclass
class Tracking:
    owners: dict[str, str] = field(default_factory=lambda: {ENV: "main"})
    default_ref: str = "main"


class RacedRepo(SyncRepo):
    """Before each of its first ``races`` pushes, someone else pushes to main."""

    def __init__(self, remote: ConfigRemote, state: Path, races: int) -> None:
        super().__init__(str(remote.bare_path), state)
        self.people, self.races, self.pushes = remote, races, 0

    def push(self, sha: str, branch: str) -> None:
        self.pushes += 1
        if self.pushes <= self.races:
            self.people.commit(f"someone else {self.pushes}", files={"README.md": f"other {self.pushes}\n"})
        super().push(sha, branch)


def _setup(tmp_path: Path) -> tuple[ConfigRemote, str, str]:
    remote = ConfigRemote(tmp_path)
    first = remote.commit("sample", copy_from=SAMPLE)
    second = remote.commit("egress: grace 40s", files=egress_with(40))
    return remote, first, second


@dataclass
class History:
    by_env: dict[str, list[DeployRecord]]


def _history(*commits: str) -> History:
    return History({ENV: [DeployRecord(c, "main", "a", "m", 1.0, state=CONVERGED) for c in commits]})


def test_a_lost_race_is_built_again_on_the_new_head(tmp_path: Path) -> None:
    remote, first, second = _setup(tmp_path)
    repo = RacedRepo(remote, tmp_path / "state", races=1)
    done = Rollbacks(repo, Tracking(), _history(second, first), tracks_at=lambda _: {}).roll_back(ENV, None)
    assert repo.pushes == 2 and done.to == first
    with git.Repo(remote.bare_path) as bare:
        head = bare.commit("main")
        assert head.hexsha == done.commit
        other = head.parents[0]
        assert other.message.startswith("someone else 1") and other.parents[0].hexsha == second
        assert (head.tree / "README.md").data_stream.read() == b"other 1\n"  # the other push is kept
        egress = "environments/studio-a/services/egress.yaml"
        assert (head.tree / egress).data_stream.read() == (
            bare.commit(first).tree / egress
        ).data_stream.read()


def test_a_branch_that_keeps_moving_is_a_409_and_nothing_is_forced(tmp_path: Path) -> None:
    remote, first, second = _setup(tmp_path)
    repo = RacedRepo(remote, tmp_path / "state", races=3)
    rollbacks = Rollbacks(repo, Tracking(), _history(second, first), tracks_at=lambda _: {})
    with pytest.raises(RollbackRefused, match="kept moving") as e:
        rollbacks.roll_back(ENV, first)
    assert e.value.status == 409 and repo.pushes == 3
    with git.Repo(remote.bare_path) as bare:
        assert bare.commit("main").message.startswith("someone else 3")  # theirs, never overwritten
