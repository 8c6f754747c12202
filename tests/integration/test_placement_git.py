"""Placement against a real bare git remote: auto commits, fixed point, node loss and return,
cordon, infeasible replicas, a concurrent commit (rebase-and-retry), tags refused, review
branches. PlacementHealth is fed directly with a fake clock; no broker here (see test_placement_loop)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from phrame.config_repo import load_git, validate
from phrame.git import GitError, TagTargetError
from placement.git_repo import PlacementRepo, branch_ref
from placement.health import PlacementHealth
from placement.reconcile import PlacementReconciler
from schemas import check_payload
from tests.support.actual import heartbeat, placement_health

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "phrame-config"
NODES = ("core-01", "edge-01", "edge-02", "edge-03")
NODE_JSON = "environments/studio-a/node.json"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ConfigRemote:
    """A bare remote holding the sample config repo, plus a work clone to commit as someone else."""

    def __init__(self, tmp: Path, *, keep_node_json: bool = False) -> None:
        self.bare = tmp / "remote.git"
        self.work = tmp / "work"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.bare)], check=True)
        shutil.copytree(FIXTURE, self.work)
        if not keep_node_json:
            (self.work / NODE_JSON).unlink()
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "someone")
        self.git("config", "user.email", "someone@example.test")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "initial config")
        self.git("remote", "add", "origin", str(self.bare))
        self.git("push", "-q", "origin", "main")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=self.work, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def change(self, path: str, text: str | None, message: str, branch: str = "main") -> str:
        """Commit ``text`` at ``path`` (None: delete) on top of the remote's ``branch`` and push it."""
        self.git("fetch", "-q", "origin")
        self.git("checkout", "-q", "-B", branch, f"origin/{branch}")
        target = self.work / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        self.git("push", "-q", "origin", f"{branch}:{branch}")
        return self.git("rev-parse", "HEAD")

    def head(self, ref: str = "main") -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "rev-parse", ref], check=True, capture_output=True, text=True
        )
        return done.stdout.strip()

    def show(self, path: str, ref: str = "main") -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "show", f"{ref}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def node_json(self, ref: str = "main") -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.show(NODE_JSON, ref))
        return doc

    def message(self, ref: str = "main") -> str:
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "log", "-1", "--format=%B", ref],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout

    def count(self, ref: str = "main") -> int:
        done = subprocess.run(
            ["git", "--git-dir", str(self.bare), "rev-list", "--count", ref],
            check=True,
            capture_output=True,
            text=True,
        )
        return int(done.stdout)


def beat(live: PlacementHealth, clock: Clock, nodes: tuple[str, ...] = NODES) -> None:
    for node in nodes:
        heartbeat(live, node, clock.now, received_at=clock.now, is_retained=False)


def make(
    tmp: Path, remote: ConfigRemote, clock: Clock, git_cls: type[PlacementRepo] = PlacementRepo, **kw: Any
) -> PlacementReconciler:
    live = placement_health(timeout_s=20, started_at=clock.now)
    beat(live, clock)
    return PlacementReconciler(
        git_cls(str(remote.bare), tmp / "cache.git"),
        live,
        clock=clock,
        reschedule_after_s=60,
        node_gc_s=3600,
        instance="test/1",
        **kw,
    )


@pytest.fixture
def remote(tmp_path: Path) -> ConfigRemote:
    return ConfigRemote(tmp_path)


def assert_deployable(remote: ConfigRemote, ref: str = "main") -> None:
    repo, problems = load_git(remote.bare, ref)
    assert validate(repo, problems) == []


def test_initial_placement_commits_onto_the_tracked_branch(tmp_path: Path, remote: ConfigRemote) -> None:
    clock = Clock()
    before = remote.head()
    results = make(tmp_path, remote, clock).run_pass()
    assert [r.environment for r in results] == ["studio-a"] and results[0].error is None
    assert remote.head() == results[0].commit != before
    assert remote.head("main~1") == before
    doc = remote.node_json()
    check_payload("placement", doc)
    assert doc["assignments"] == {"egress": ["core-01"], "mixer": ["edge-02", "edge-03"]}
    assert set(doc["reasons"]) == {"egress", "mixer"}
    text = remote.show(NODE_JSON)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    message = remote.message()
    assert message.startswith("placement studio-a: 3 replica moves")
    assert "new replica: mixer.0 (unassigned) → edge-02" in message and "Placement-By: test/1" in message
    assert_deployable(remote)


def test_rerun_is_a_fixed_point(tmp_path: Path, remote: ConfigRemote) -> None:
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    head = remote.head()
    clock.now += 5
    beat(rec.liveness, clock)
    again = rec.run_pass()
    assert again[0].commit is None and again[0].error is None and not again[0].decision.is_changed  # type: ignore[union-attr]
    assert remote.head() == head
    # a fresh reconciler (new clone cache) agrees with the committed decision
    assert make(tmp_path / "other", remote, clock).run_pass()[0].commit is None


def test_unreadable_node_or_service_file_decides_nothing_and_moves_nothing(
    tmp_path: Path, remote: ConfigRemote
) -> None:
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    placed, head = remote.node_json(), remote.head()
    good_node = remote.show("nodes/edge-02.yaml")
    good_mixer = remote.show("environments/studio-a/services/mixer.yaml")
    # a typo in a node file must not read as "edge-02 removed from the inventory"
    remote.change("nodes/edge-02.yaml", good_node + "cordoned: nope\n", "typo in edge-02")
    # nor one in a service file as "mixer removed"
    broken = remote.change("environments/studio-a/services/mixer.yaml", good_mixer + "replica: 3\n", "typo")
    clock.now += 5
    beat(rec.liveness, clock)
    (result,) = rec.run_pass()
    assert result.commit is None and remote.head() == broken
    assert result.error is not None and "cannot read" in result.error and "nodes/edge-02.yaml" in result.error
    remote.change("nodes/edge-02.yaml", good_node, "fix edge-02")
    fixed = remote.change("environments/studio-a/services/mixer.yaml", good_mixer, "fix mixer")
    beat(rec.liveness, clock)
    (result,) = rec.run_pass()
    assert (result.error, result.commit) == (None, None)
    assert remote.head() == fixed and remote.node_json() == placed and head != fixed


def test_node_loss_moves_only_its_replica_after_the_grace_period(
    tmp_path: Path, remote: ConfigRemote
) -> None:
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    placed = remote.node_json()["assignments"]
    head = remote.head()
    alive = ("core-01", "edge-01", "edge-03")
    last = clock.now  # edge-02's last heartbeat: offline from last + 20 s, moved after 60 s more
    for step in (10, 25, 50, 75, 80):
        clock.now = last + step
        beat(rec.liveness, clock, alive)
        result = rec.run_pass()[0]
        assert result.commit is None and remote.head() == head, step
    clock.now = last + 81
    beat(rec.liveness, clock, alive)
    result = rec.run_pass()[0]
    assert result.commit is not None and remote.head() == result.commit
    now = remote.node_json()["assignments"]
    assert now["egress"] == placed["egress"] and now["mixer"][1] == placed["mixer"][1] == "edge-03"
    assert now["mixer"][0] == "edge-01"
    move = "edge-02 offline for 61 s: mixer.0 edge-02 → edge-01"
    assert remote.message().startswith(f"placement studio-a: {move}\n")
    assert_deployable(remote)

    # edge-02 comes back: nothing moves back to it
    moved_head = remote.head()
    clock.now += 5
    beat(rec.liveness, clock)
    assert rec.run_pass()[0].commit is None and remote.head() == moved_head


def test_pending_move_is_reported_before_the_grace_period_ends(tmp_path: Path, remote: ConfigRemote) -> None:
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    clock.now += 50  # offline since 20 s after the last heartbeat: for 30 s now
    beat(rec.liveness, clock, ("core-01", "edge-01", "edge-03"))
    result = rec.run_pass()[0]
    assert result.commit is None and result.decision is not None
    assert [p.to_dict() for p in result.decision.pending] == [
        {"replica": "mixer.0", "node": "edge-02", "offline_for_s": 30.0, "moves_in_s": 30.0}
    ]


def test_cordon_drains_the_node(tmp_path: Path, remote: ConfigRemote) -> None:
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    node = (FIXTURE / "nodes" / "edge-03.yaml").read_text() + "cordoned: true\n"
    remote.change("nodes/edge-03.yaml", node, "cordon edge-03 for hardware work")
    result = rec.run_pass()[0]
    assert result.commit is not None
    assert remote.node_json()["assignments"]["mixer"] == ["edge-02", "edge-01"]
    assert "edge-03 cordoned: mixer.1 edge-03 → edge-01" in remote.message()
    assert_deployable(remote)


def test_infeasible_replica_is_unassigned_with_its_reason(tmp_path: Path, remote: ConfigRemote) -> None:
    render = (
        "name: render\nimage: r:1\nresources: {cpus: 12, memory: 1Gi}\nplacement:\n  labels: {gpu: 'true'}\n"
    )
    remote.change("environments/studio-a/services/render.yaml", render, "add render")
    clock = Clock()
    result = make(tmp_path, remote, clock).run_pass()[0]
    doc = remote.node_json()
    assert doc["assignments"]["render"] == [None]
    assert "no feasible node for 12 CPUs" in doc["reasons"]["render"]
    assert "edge-02 lacks capacity" in doc["reasons"]["render"]
    assert result.decision is not None and [u.service for u in result.decision.unassigned] == ["render"]
    assert_deployable(remote)


def test_concurrent_commit_is_rebased_and_retried_without_losing_it(
    tmp_path: Path, remote: ConfigRemote
) -> None:
    recorder = "name: recorder\nimage: rec:1\nresources: {cpus: 1, memory: 1Gi}\nplacement:\n  labels: {role: edge}\n"

    class RacingGit(PlacementRepo):
        """A real repo in which someone else pushes right after our first commit is built."""

        raced: str | None = None

        def commit_file(self, parent: str, path: str, content: bytes, message: str) -> str:
            sha = super().commit_file(parent, path, content, message)
            if RacingGit.raced is None:
                RacingGit.raced = remote.change(
                    "environments/studio-a/services/recorder.yaml", recorder, "add recorder"
                )
            return sha

    clock = Clock()
    result = make(tmp_path, remote, clock, git_cls=RacingGit).run_pass()[0]
    assert result.error is None and RacingGit.raced is not None
    assert remote.head() == result.commit
    assert remote.head("main~1") == RacingGit.raced  # their commit kept, ours on top: no lost update
    assert "recorder" in remote.show("environments/studio-a/services/recorder.yaml")
    assert remote.node_json()["assignments"]["recorder"] == ["edge-01"]  # recomputed with their change


def test_auto_placement_on_a_tag_is_refused(tmp_path: Path, remote: ConfigRemote) -> None:
    env = (FIXTURE / "environments/studio-a/environment.yaml").read_text().replace("track: main", "track: v1")
    remote.change("environments/studio-a/environment.yaml", env, "track the v1 tag")
    remote.git("tag", "v1")
    remote.git("push", "-q", "origin", "v1")
    tag = remote.head("v1")
    result = make(tmp_path, remote, Clock()).run_pass()[0]
    assert result.error is not None and "never writes to a tag" in result.error
    assert "placement: review" in result.error
    assert remote.head("v1") == tag and remote.count() == 2


def test_push_to_a_tag_ref_is_refused(tmp_path: Path, remote: ConfigRemote) -> None:
    with pytest.raises(TagTargetError, match="never writes to a tag"):
        branch_ref("refs/tags/v1")
    git = PlacementRepo(str(remote.bare), tmp_path / "cache.git")
    git.fetch()
    with pytest.raises(TagTargetError):
        git.push(remote.head(), "refs/tags/v1")
    with pytest.raises(GitError, match="only branches"):
        git.push(remote.head(), "refs/notes/x")
    assert branch_ref("main") == "refs/heads/main"


def test_review_mode_pushes_one_branch_and_leaves_main_alone(tmp_path: Path, remote: ConfigRemote) -> None:
    env = (
        (FIXTURE / "environments/studio-a/environment.yaml")
        .read_text()
        .replace("placement: auto", "placement: review")
    )
    base = remote.change("environments/studio-a/environment.yaml", env, "review placements")
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    result = rec.run_pass()[0]
    branch = f"placement/studio-a/{base[:8]}"
    assert result.branch == branch and result.commit == remote.head(branch)
    assert remote.head() == base  # main untouched
    assert remote.head(f"{branch}~1") == base
    assert remote.node_json(branch)["assignments"]["mixer"] == ["edge-02", "edge-03"]
    # rerun: same decision, same branch, no new commit
    clock.now += 5
    beat(rec.liveness, clock)
    again = rec.run_pass()[0]
    assert again.branch == branch and again.commit is None and remote.head(branch) == result.commit
    # a changed decision on the same base is a fast-forward of the same branch
    clock.now += 100
    beat(rec.liveness, clock, ("core-01", "edge-01", "edge-03"))
    moved = rec.run_pass()[0]
    assert moved.commit == remote.head(branch) and remote.head(f"{branch}~1") == result.commit
    # decided against main (what is deployed), which has no node.json yet: a fresh placement
    assert sorted(remote.node_json(branch)["assignments"]["mixer"]) == ["edge-01", "edge-03"]


def test_review_mode_on_a_tag_pushes_a_branch_from_the_tag(tmp_path: Path, remote: ConfigRemote) -> None:
    env = (FIXTURE / "environments/studio-a/environment.yaml").read_text()
    env = env.replace("track: main", "track: refs/tags/v2").replace("placement: auto", "placement: review")
    remote.change("environments/studio-a/environment.yaml", env, "track v2 for review")
    remote.git("tag", "v2")
    remote.git("push", "-q", "origin", "v2")
    tag = remote.head("v2")
    result = make(tmp_path, remote, Clock()).run_pass()[0]
    assert result.error is None and result.branch == f"placement/studio-a/{tag[:8]}"
    assert remote.head(f"{result.branch}~1") == tag and remote.head("v2") == tag


def test_review_mode_opens_one_merge_request_never_two(tmp_path: Path, remote: ConfigRemote) -> None:
    import responses

    from phrame.gitlab import GitLabProject

    env = (
        (FIXTURE / "environments/studio-a/environment.yaml")
        .read_text()
        .replace("placement: auto", "placement: review")
    )
    base = remote.change("environments/studio-a/environment.yaml", env, "review placements")
    branch = f"placement/studio-a/{base[:8]}"
    url = "https://gitlab.example.test/api/v4/projects/42/merge_requests"
    opened = {
        "iid": 5,
        "source_branch": branch,
        "target_branch": "main",
        "state": "opened",
        "web_url": "https://gitlab.example.test/g/p/-/merge_requests/5",
    }
    clock = Clock()
    with responses.RequestsMock() as api:
        api.get(url, json=[])
        created = api.post(url, json=opened, status=201)
        api.get(url, json=[opened])
        rec = make(
            tmp_path,
            remote,
            clock,
            merge_requests=GitLabProject("https://gitlab.example.test", "t", "42").merge_requests,
        )
        first = rec.run_pass()[0]
        clock.now += 5
        beat(rec.liveness, clock)
        second = rec.run_pass()[0]
    assert first.merge_request == second.merge_request == opened["web_url"]
    assert created.call_count == 1
    body = json.loads(created.calls[0].request.body or "{}")
    assert body["source_branch"] == branch and body["target_branch"] == "main"
    assert body["title"].startswith("placement studio-a: 3 replica moves")
    assert remote.head(branch) == first.commit and second.commit is None


def test_a_service_file_turned_into_a_symlink_decides_nothing(tmp_path: Path, remote: ConfigRemote) -> None:
    """A symlink is never read (unknown-file): it must not read as "mixer removed"."""
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    placed = remote.node_json()
    remote.git("fetch", "-q", "origin")
    remote.git("checkout", "-q", "-B", "main", "origin/main")
    mixer = remote.work / "environments/studio-a/services/mixer.yaml"
    (remote.work / "mixer.yaml").write_text(mixer.read_text())
    mixer.unlink()
    mixer.symlink_to("../../../mixer.yaml")
    remote.git("add", "-A")
    remote.git("commit", "-q", "-m", "mixer as a symlink")
    remote.git("push", "-q", "origin", "main:main")
    linked = remote.head()
    clock.now += 5
    beat(rec.liveness, clock)
    (result,) = rec.run_pass()
    assert result.commit is None and remote.head() == linked and remote.node_json() == placed
    assert result.error is not None and "mixer.yaml" in result.error


def test_an_invalid_head_is_logged_once_and_its_recovery_once(
    tmp_path: Path, remote: ConfigRemote, caplog: pytest.LogCaptureFixture
) -> None:
    """A pass every 10 s must not repeat the same complaint every 10 s."""
    clock = Clock()
    rec = make(tmp_path, remote, clock)
    rec.run_pass()
    good = remote.show("environments/studio-a/services/mixer.yaml")
    remote.change("environments/studio-a/services/mixer.yaml", good + "replica: 3\n", "typo")

    def passes(count: int) -> list[logging.LogRecord]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="placement"):
            for _ in range(count):
                clock.now += 10
                beat(rec.liveness, clock)
                rec.run_pass()
        return [r for r in caplog.records if r.name.startswith("placement")]

    said = passes(3)
    assert [r.levelno for r in said] == [logging.WARNING], [r.getMessage() for r in said]
    assert "cannot read" in said[0].getMessage() and "mixer.yaml" in said[0].getMessage()
    # another invalid commit: a new problem, said once more
    remote.change("environments/studio-a/services/mixer.yaml", good + "replicaz: 3\n", "typo 2")
    said = passes(2)
    assert [r.levelno for r in said] == [logging.WARNING] and "replicaz" in said[0].getMessage()
    remote.change("environments/studio-a/services/mixer.yaml", good, "fixed")
    said = passes(3)
    assert [(r.levelno, "placement works again" in r.getMessage()) for r in said] == [(logging.INFO, True)]


class MissingCommit(PlacementRepo):
    """The default ref names a commit the cache does not hold (phrame.config_repo: ConfigError)."""

    def head(self, ref: str) -> str:
        return "f" * 40


class BuggyHead(PlacementRepo):
    """A programming error in the adapter, as a stand-in for any bug under run_pass."""

    def head(self, ref: str) -> str:
        raise TypeError("head() got an unexpected keyword argument")


def test_an_unreadable_default_ref_skips_the_pass_with_a_warning(
    tmp_path: Path, remote: ConfigRemote, caplog: pytest.LogCaptureFixture
) -> None:
    rec = make(tmp_path, remote, Clock(), git_cls=MissingCommit)
    with caplog.at_level(logging.INFO, logger="placement"):
        assert rec.run_pass() == []
    said = [r for r in caplog.records if r.name.startswith("placement")]
    assert [(r.levelno, bool(r.exc_info)) for r in said] == [(logging.WARNING, False)], [
        r.getMessage() for r in said
    ]
    assert "no commit for ref" in said[0].getMessage()


def test_a_bug_under_a_pass_is_raised_to_the_loop_not_called_a_config_problem(
    tmp_path: Path, remote: ConfigRemote
) -> None:
    rec = make(tmp_path, remote, Clock(), git_cls=BuggyHead)
    with pytest.raises(TypeError):  # placement.loop logs it with its traceback and carries on
        rec.run_pass()


class LosesItsCommit(PlacementRepo):
    """The default ref reads at the start of the pass, then names a commit the cache lacks."""

    calls = 0

    def head(self, ref: str) -> str:
        self.calls += 1
        return super().head(ref) if self.calls == 1 else "f" * 40


def test_an_unreadable_commit_fails_its_environment_with_a_warning_not_a_traceback(
    tmp_path: Path, remote: ConfigRemote, caplog: pytest.LogCaptureFixture
) -> None:
    rec = make(tmp_path, remote, Clock(), git_cls=LosesItsCommit)
    with caplog.at_level(logging.INFO, logger="placement"):
        (result,) = rec.run_pass()
    assert result.error is not None and "no commit for ref" in result.error
    said = [(r.levelno, bool(r.exc_info)) for r in caplog.records if r.name.startswith("placement")]
    assert said == [(logging.WARNING, False)]
