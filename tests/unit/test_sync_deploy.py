"""config_sync.deploys.watcher: the phrame/deploy status follows the agents' actual status (fake clock)."""

from __future__ import annotations

import json
import time

import pytest

from config_sync.deploys.verdict import failure, verdict
from config_sync.deploys.watcher import DeployWatcher
from config_sync.reporting import LocalReporter
from phrame.gitlab import GitLabError
from phrame.mqtt import Message
from schemas import Topics

T = Topics()
SHA, OLD = "a" * 40, "b" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def status(node: str, **doc: object) -> Message:
    return Message(T.status(node), json.dumps({"state": "online", **doc}).encode(), True)


def deploys(reporter: LocalReporter) -> list[tuple[str, str, str]]:
    return [
        (s["sha"][:1], s["state"], s["description"])
        for s in reporter.snapshot()["statuses"]
        if s["name"] == "phrame/deploy"
    ]


def test_verdict_and_failure_text() -> None:
    statuses = {
        "a": {"commit": SHA, "generation": 3, "converged": True},
        "b": {"commit": OLD, "generation": 2, "converged": True},
    }
    assert verdict(statuses, SHA, {"a": 3})[0] == "success"
    assert verdict(statuses, SHA, {"a": 3, "b": 3}) == ("running", "waiting for b")
    assert failure(statuses, SHA, {"a": 3, "b": 3}) == f"b: not converged (at {OLD[:12]}, generation 2 of 3)"
    assert failure({}, SHA, {"c": 1}) == "c: no status reported"
    errs = {"c": {"commit": SHA, "converged": False, "errors": [{"message": "pull failed: 404"}]}}
    assert failure(errs, SHA, {"c": 1}) == "c: pull failed: 404"
    assert failure({"d": {"state": "offline", "commit": OLD}}, SHA, {"d": 1}) == "d: offline"
    # a status naming no generation: only its commit tells
    assert verdict({"e": {"commit": SHA, "converged": True}}, SHA, {"e": 9})[0] == "success"
    assert verdict({"e": {"commit": OLD, "converged": True}}, SHA, {"e": 9})[0] == "running"


def test_two_refs_on_one_node_both_succeed_when_it_converges_on_the_last() -> None:
    """main's commit A then release's commit B change edge-01 (generations 4 then 5); the
    agent converges once, on generation 5 (commit B), which still holds A's items."""
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.watch("main", SHA, {"edge-01": 4})
    watcher.watch("release", OLD, {"edge-01": 5})
    watcher.view.on_message(status("edge-01", commit=OLD, generation=5, converged=True))
    clock.now += 61
    watcher.check()
    assert not watcher.active
    finished = {(s[0][:1], s[1]) for s in watcher.finished}
    assert finished == {("a", "success"), ("b", "success")}
    # converged, but on a generation older than the deploy's: not done
    watcher.watch("main", SHA, {"edge-01": 6})
    clock.now += 61
    watcher.check()
    assert deploys(reporter)[-1] == (
        "a",
        "failed",
        f"edge-01: not converged (at {OLD[:12]}, generation 5 of 6)",
    )


def test_running_then_success_when_every_node_converged() -> None:
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.watch("main", SHA, {"edge-01": 1, "core-01": 1})
    assert deploys(reporter) == [("a", "running", "waiting for core-01, edge-01")]
    watcher.view.on_message(status("edge-01", commit=SHA, converged=True))
    watcher.view.on_message(status("core-01", commit=SHA, converged=False))
    watcher.check()
    assert watcher.active
    watcher.view.on_message(status("core-01", commit=SHA, converged=True))
    watcher.check()
    assert not watcher.active
    assert deploys(reporter)[-1] == ("a", "success", f"2 node(s) converged on {SHA[:12]}")


def test_an_error_reported_after_the_publication_fails_at_once() -> None:
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.watch("main", SHA, {"edge-01": 1})
    clock.now += 1
    watcher.view.on_message(status("edge-01", commit=OLD, converged=False, errors=["port 9200 in use"]))
    watcher.check()
    assert deploys(reporter)[-1] == ("a", "failed", "edge-01: port 9200 in use")
    assert not watcher.active


def test_an_error_from_before_the_publication_fails_only_after_the_timeout() -> None:
    """The node's status says what its last pass (an earlier spec) met: no news of this one."""
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.view.on_message(status("edge-01", commit=OLD, converged=False, errors=["port 9200 in use"]))
    clock.now += 1
    watcher.watch("main", SHA, {"edge-01": 1})
    clock.now += 58
    watcher.check()
    assert deploys(reporter)[-1][1] == "running"
    clock.now += 2
    watcher.check()
    assert deploys(reporter)[-1] == ("a", "failed", "edge-01: port 9200 in use")


def test_an_unassigned_replica_is_degraded_once_placement_says_why() -> None:
    from phrame.actual.health import Replica

    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.unchanged("main", SHA, (Replica("prod.gpu.0", None),))
    watcher.check()
    # placement has not decided yet
    assert deploys(reporter)[-1] == ("a", "running", "waiting for placement to assign prod.gpu.0")
    doc = {"environment": "prod", "unassigned": [{"replica": "gpu.0", "reason": "no node has gpu=true"}]}
    watcher.on_placement(Message(T.env_placement("prod"), json.dumps(doc).encode(), True))
    watcher.check()
    assert deploys(reporter)[-1] == ("a", "failed", "degraded: prod.gpu.0: unassigned: no node has gpu=true")


def test_a_commit_that_changes_nothing_names_a_replica_still_unassigned_once() -> None:
    """Placement's commit after a service no node can take: the replica is in the older
    deployment and among the commit's own unassigned ones; it was named twice."""
    from phrame.actual.health import Replica

    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    gpu = Replica("prod.gpu.0", None)
    watcher.watch("main", OLD, {"edge-01": 1}, (gpu,))
    watcher.unchanged("main", SHA, (gpu,))
    assert deploys(reporter)[-1] == (
        "a", "running", "waiting for edge-01; waiting for placement to assign prod.gpu.0"
    )  # fmt: skip


def test_newer_deploy_cancels_the_older_and_garbage_is_ignored() -> None:
    reporter = LocalReporter()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=Clock())
    watcher.watch("main", OLD, {"edge-01": 1})
    watcher.watch("main", SHA, {"edge-01": 1})
    assert ("b", "canceled", f"superseded by {SHA[:12]}") in deploys(reporter)
    watcher.view.on_message(Message(T.status("edge-01"), b"not json", True))
    watcher.view.on_message(Message("elsewhere/x", b"{}", True))
    assert watcher.statuses == {}


class FlakyReporter(LocalReporter):
    """Reports like LocalReporter, except for one commit, whose reports raise what the
    GitLab adapter raises when GitLab is unreachable (it converts the SDK's errors)."""

    def __init__(self, broken: str) -> None:
        super().__init__()
        self.broken = broken

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        if sha == self.broken:
            raise GitLabError("status phrame/deploy: GitLab unreachable: ConnectionError")
        super().set_status(sha, name, state, description, ref=ref)


def test_one_failed_report_leaves_no_other_deployment_running() -> None:
    reporter = FlakyReporter(broken=OLD)
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=Clock())
    watcher.watch("hotfix", OLD, {"edge-02": 1})  # its "running" report fails, it is watched anyway
    watcher.watch("main", SHA, {"edge-01": 1})
    watcher.view.on_message(status("edge-02", commit=OLD, converged=True))
    watcher.view.on_message(status("edge-01", commit=SHA, converged=True))
    watcher.check()
    # both finished in the same check: the first report fails, the second is still sent
    assert not watcher.active
    assert deploys(reporter)[-1] == ("a", "success", f"1 node(s) converged on {SHA[:12]}")


class BuggyReporter(LocalReporter):
    """Fails as a programming error would (LocalReporter's own ValueError for a bad state)."""

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        super().set_status(sha, name, state + "d", description, ref=ref)


def test_a_bug_in_a_report_is_raised_not_logged_as_gitlab_being_down() -> None:
    """It reaches the caller (the watch loop logs it with its traceback), instead of
    passing for GitLab being down in a one-line warning."""
    watcher = DeployWatcher(BuggyReporter(), T, timeout_s=60, clock=Clock())
    with pytest.raises(ValueError, match="unknown commit status state 'runningd'"):
        watcher.watch("main", SHA, {"edge-01": 1})


def test_the_highest_generation_each_agent_applied_is_remembered() -> None:
    """What the publisher numbers changed manifests above: kept when a status is cleared or
    goes back (an agent restarted on an older state), booleans and garbage ignored."""
    watcher = DeployWatcher(LocalReporter(), T, timeout_s=60, clock=Clock())
    watcher.view.on_message(status("edge-01", commit=OLD, generation=7, converged=True))
    watcher.view.on_message(status("edge-01", commit=OLD, generation=3, converged=True))
    watcher.view.on_message(status("edge-02", commit=OLD, generation=True, converged=True))
    watcher.view.on_message(status("edge-03", commit=OLD, generation="9", converged=True))
    watcher.view.on_message(status("core-01", commit=OLD, converged=True))
    watcher.view.on_message(Message(T.status("edge-01"), b"", True))
    assert watcher.applied_generations() == {"edge-01": 7}
    assert "edge-01" not in watcher.statuses


def test_a_status_from_before_a_restart_that_lost_the_manifests_is_not_success() -> None:
    """Broker and config-sync restarted together: manifests went out again at generation 1
    before the agent's status (generation 2, from before) came back. That status is above
    anything published since the start, so it predates it and cannot finish the deploy."""
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.watch("main", SHA, {"edge-01": 1})
    watcher.view.on_message(status("edge-01", commit=OLD, generation=2, converged=True))
    watcher.check()
    assert watcher.active, "an old status finished the deploy"
    watcher.view.on_message(status("edge-01", commit=SHA, generation=1, converged=True))
    watcher.check()
    assert not watcher.active and deploys(reporter)[-1][:2] == ("a", "success")


def test_a_commit_that_changed_no_node_succeeds_at_once_or_takes_over_a_running_deploy() -> None:
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.unchanged("main", SHA)
    assert deploys(reporter) == [("a", "success", "nothing to change: no node's desired state changed")]
    assert not watcher.active
    later = "c" * 40
    watcher.watch("main", OLD, {"edge-01": 4})
    watcher.unchanged("main", later)  # built on OLD, which edge-01 has not applied yet
    assert deploys(reporter)[-2:] == [
        ("b", "canceled", f"superseded by {later[:12]}"),
        ("c", "running", "waiting for edge-01"),
    ]
    watcher.view.on_message(status("edge-01", commit=OLD, generation=4, converged=True))
    watcher.check()
    assert deploys(reporter)[-1] == ("c", "success", f"1 node(s) converged on {later[:12]}")


def heartbeat(node: str, ts: float = 0.0, *, retained: bool = False) -> Message:
    host = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)
    doc = {"ts": ts, "seq": 1, "interval_s": 5, "host": host}
    return Message(T.heartbeat(node), json.dumps(doc).encode(), retained)


class Recording(LocalReporter):
    """Every report, repeats included (LocalReporter keeps only the latest per commit)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, str]] = []

    def set_status(
        self, sha: str, name: str, state: str, description: str, *, ref: str | None = None
    ) -> None:
        self.sent.append((sha[:1], state, description))
        super().set_status(sha, name, state, description, ref=ref)


def test_a_deploy_waiting_on_an_offline_node_says_so_and_still_times_out() -> None:
    """The shared node-health rule. edge-02's heartbeat stops: the running
    description names it offline (reported once per change, not every tick); it is back
    when it beats again; the deploy timeout still decides the failure."""
    reporter, clock = Recording(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=600, clock=clock, node_timeout_s=20)
    for node in ("edge-01", "edge-02"):
        watcher.view.on_message(heartbeat(node))
    watcher.watch("main", SHA, {"edge-01": 1, "edge-02": 1})
    assert reporter.sent == [("a", "running", "waiting for edge-01, edge-02")]
    watcher.view.on_message(status("edge-01", commit=SHA, converged=True, generation=1))
    clock.now += 45
    watcher.view.on_message(heartbeat("edge-01"))
    watcher.check()
    clock.now += 1
    watcher.check()  # still offline: no new report
    assert reporter.sent[1:] == [("a", "running", "waiting for edge-02 (offline: no heartbeat for 45 s)")]
    watcher.view.on_message(heartbeat("edge-02"))
    watcher.check()
    assert reporter.sent[-1] == ("a", "running", "waiting for edge-02")
    clock.now += 30
    watcher.check()
    assert reporter.sent[-1] == ("a", "running", "waiting for edge-02 (offline: no heartbeat for 30 s)")
    clock.now += 600
    watcher.check()
    assert reporter.sent[-1] == ("a", "failed", "edge-02: offline (no heartbeat for 630 s)")
    assert len(reporter.sent) == 5


def test_the_will_or_a_retained_stale_heartbeat_is_offline_at_once() -> None:
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=600, clock=clock, node_timeout_s=20, wall=lambda: 5000.0)
    watcher.view.on_message(heartbeat("edge-01", 5000.0 - 90, retained=True))  # sent 90 s before we listened
    watcher.view.on_message(heartbeat("edge-02", 5000.0 - 2, retained=True))
    watcher.view.on_message(Message(T.status("edge-02"), json.dumps({"state": "offline"}).encode(), True))
    watcher.view.on_message(heartbeat("core-01", 5000.0 - 2, retained=True))
    watcher.watch("main", SHA, {"edge-01": 1, "edge-02": 1, "core-01": 1})
    assert deploys(reporter) == [("a", "running", "waiting for core-01, edge-01 (offline: no heartbeat for 90 s), "
                                  "edge-02 (offline: its status says offline)")]  # fmt: skip


def test_a_failure_fails_the_deployment_only_once_it_held_for_the_settle_time() -> None:
    """What the agent mends on its own (a dependency still starting after its Docker daemon
    restarted) must not fail a deployment for good: a failure counts once it held for
    ``settle_s``; until then the deployment is progressing, the failure named in its reason."""
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock, settle_s=5)
    watcher.watch("main", SHA, {"edge-01": 1})
    clock.now += 1
    watcher.view.on_message(
        status("edge-01", commit=OLD, converged=False, errors=["dependency db.0 is not ready"])
    )
    watcher.check()
    assert deploys(reporter)[-1][1] == "running"
    health = watcher.health_of(SHA, {"edge-01": 1}, since=0.0)
    assert health.state == "progressing" and health.reasons[0].reason.endswith("(failed for 0.0 s of 5)")
    clock.now += 3
    watcher.view.on_message(status("edge-01", commit=OLD, converged=False, errors=[]))  # mended
    watcher.check()
    clock.now += 3
    watcher.view.on_message(status("edge-01", commit=OLD, converged=False, errors=["port 9200 in use"]))
    watcher.check()
    assert deploys(reporter)[-1][1] == "running"  # the count started over
    clock.now += 5
    watcher.check()
    assert deploys(reporter)[-1] == ("a", "failed", "edge-01: port 9200 in use")


def test_a_replica_error_left_by_a_pass_the_daemon_cut_short_waits_while_the_node_reports_it_away() -> None:
    """dockerd stops mid-pass: the pass reports a dependency stopped by the shutdown on its
    replica, then the node says its daemon is unreachable, and the replica's report keeps the
    error until the agent's next whole pass after the daemon is back (seconds: dependencies
    become healthy first). The failure must not be counted while the node reports its daemon
    away: it failed 5 s after the first error, while the pass that mended it ran (seen in CI)."""
    from phrame.actual.health import Replica

    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock, settle_s=5)
    replica = "e.dk2.0"
    watcher.watch("main", SHA, {"own": 1}, (Replica(replica, "own"),))
    clock.now += 1
    cut = "dependency e.dk1.0 is not ready: e.dk1.0 is exited (exit 0)"
    item = {"state": "running", "digest": "sha256:" + "1" * 64, "error": cut}
    watcher.view.on_message(
        Message(T.actual_item("own", "containers", replica), json.dumps(item).encode(), True)
    )
    watcher.view.on_message(status("own", commit=OLD, converged=False, errors=[f"{replica}: {cut}"]))
    watcher.check()
    clock.now += 0.1
    away = "pass failed: list containers: Docker unreachable: ('Connection aborted.')"
    watcher.view.on_message(status("own", commit=OLD, converged=False, errors=[away]))
    watcher.check()
    for _ in range(4):  # the daemon comes back; the agent's next pass waits on dependencies
        clock.now += 2
        watcher.check()
        assert deploys(reporter)[-1][1] == "running", deploys(reporter)[-1]
    # that pass ends: a new status without the outage, the error still there: counted from now
    watcher.view.on_message(status("own", commit=OLD, converged=False, errors=[f"{replica}: {cut}"]))
    watcher.check()
    clock.now += 4
    watcher.check()
    assert deploys(reporter)[-1][1] == "running"
    clock.now += 2
    watcher.check()
    assert deploys(reporter)[-1][1] == "failed", deploys(reporter)[-1]


def test_a_commit_published_again_for_one_node_still_waits_for_the_other() -> None:
    """A commit's manifests go out for edge-01 and core-01; a read-back after a broker
    failover finds core-01's missing and publishes it again, one generation up. The second
    watch of the same commit names core-01 only: the deployment still waits for edge-01."""
    reporter, clock = LocalReporter(), Clock()
    watcher = DeployWatcher(reporter, T, timeout_s=60, clock=clock)
    watcher.watch("main", SHA, {"edge-01": 4, "core-01": 4})
    watcher.watch("main", SHA, {"core-01": 5})
    watcher.view.on_message(status("core-01", commit=SHA, generation=5, converged=True))
    watcher.check()
    assert deploys(reporter)[-1][:2] == ("a", "running")
    assert watcher.active["main"].nodes == {"core-01": 5, "edge-01": 4}
    watcher.view.on_message(status("edge-01", commit=SHA, generation=4, converged=True))
    watcher.check()
    assert deploys(reporter)[-1] == ("a", "success", "2 node(s) converged on aaaaaaaaaaaa")


def test_a_costly_check_is_not_run_again_before_four_times_its_cpu_has_passed() -> None:
    """News wakes the watcher at once; at 10,000 nodes a check costs a large part of a
    second, so checks back to back held a core. A tick woken right after a costly check
    waits instead of checking again."""
    watcher = DeployWatcher(LocalReporter(), T, timeout_s=60, clock=Clock())
    checks: list[float] = []

    def costly_check() -> None:  # burns 20 ms of this thread's CPU, as a big fleet's check does
        start = time.thread_time()
        while time.thread_time() - start < 0.02:
            pass
        checks.append(start)

    watcher.check = costly_check  # type: ignore[method-assign]
    first_wait = watcher._tick()
    assert len(checks) == 1 and first_wait >= 0.2  # at least the tick
    second_wait = watcher._tick()  # woken by news at once
    assert len(checks) == 1, "a second check ran right after a costly one"
    assert 0 < second_wait <= 4 * 0.5
