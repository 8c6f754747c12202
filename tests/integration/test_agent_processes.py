"""Supervised host processes: restart with backoff, re-adoption, and the ``replaces`` handover
as config-sync really publishes it (rendered from a config repo)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from node_agent.desired import DesiredStore
from node_agent.models import DesiredState
from node_agent.processes import STABLE_AFTER_S, ProcessSupervisor
from node_agent.reconcile import NodeReconciler
from schemas import Topics
from tests.support import agent_support as spec
from tests.support.agent_support import AgentEnv
from tests.support.handover import Presence, handover_services, render_node
from tests.support.waiting import wait_for

T = Topics()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[list[ProcessSupervisor]]:
    made: list[ProcessSupervisor] = []
    yield made
    for sup in made:  # stop whatever a test left running, by its recorded pid
        for item_id in list(sup.check()):
            sup.stop(item_id)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_dead(pid: int) -> None:
    wait_for(lambda: gone(pid), f"pid {pid} to end", 5)


def test_restart_with_backoff_and_a_log_per_process(tmp_path: Path, supervisors):
    clock = FakeClock()
    sup = ProcessSupervisor(tmp_path, clock=clock, base_backoff=2.0)
    supervisors.append(sup)
    job = spec.process(
        "e", "job", ["sh", "-c", "echo hello $GREETING; exec sleep 600"], env={"GREETING": "you"}
    )
    sup.start(job)
    first = sup.check()["e.job.0"]
    assert first.state == "running" and first.pid
    log = tmp_path / "processes" / "e.job.0" / "output.log"
    assert wait_for_lines(log, "hello you", 1)  # the shell has run before it is killed
    os.kill(first.pid, signal.SIGKILL)
    wait_dead(first.pid)
    dead = sup.check()["e.job.0"]
    assert dead.state == "backoff" and dead.exit_code == -signal.SIGKILL
    clock.now += 1.0
    assert sup.check()["e.job.0"].state == "backoff"  # backoff (2 s) not elapsed
    clock.now += 1.5
    again = sup.check()["e.job.0"]
    assert again.state == "running" and again.pid != first.pid and again.restart_count == 1
    assert wait_for_lines(log, "hello you", 2)  # one log for both runs, appended


def wait_for_lines(path: Path, text: str, count: int, timeout: float = 10.0) -> bool:
    """Bounded wait until ``path`` holds ``text`` exactly ``count`` times (the child writes it)."""

    def seen() -> int:
        return path.read_text().count(text) if path.exists() else 0

    wait_for(lambda: seen() == count, f"{count} x {text!r} in {path.name}", timeout, observe=seen)
    return True


def test_a_new_agent_re_adopts_running_processes(tmp_path: Path, supervisors):
    job = spec.process("e", "job", ["sleep", "600"])
    # the first agent is a separate Python process that starts the job and exits
    code = (
        "import json, sys; from pathlib import Path; from node_agent.processes import ProcessSupervisor; "
        "ProcessSupervisor(Path(sys.argv[1])).start(json.loads(sys.argv[2]))"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path), json.dumps(job)], check=True)
    meta = json.loads((tmp_path / "processes" / "e.job.0" / "meta.json").read_text())
    pid = meta["pid"]
    assert psutil.pid_exists(pid)
    # up for longer than the new agent's stable_after_s (0.2 s) before it first looks, counted
    # as the agent counts, from the recorded start (on a busy host well after the fork)
    wait_for(lambda: time.time() - meta["started_at"] > 0.3, "the job up for 0.3 s", 5)
    new = ProcessSupervisor(tmp_path, stable_after_s=0.2)  # the agent restarted
    supervisors.append(new)
    seen = new.check()["e.job.0"]
    assert seen.pid == pid and seen.state == "running" and seen.digest == job["digest"]
    # up for longer than stable_after_s under the previous agent: a finished handover stays
    # finished, the first check of the new agent already counts it stable
    assert seen.is_stable
    new.stop("e.job.0")
    assert pid is not None
    wait_dead(pid)
    assert "e.job.0" not in ProcessSupervisor(tmp_path).check()


def test_start_times_come_from_the_wall_clock_handed_in(tmp_path: Path, supervisors):
    """A node whose clock is ten minutes behind records (and reports) start times ten minutes
    ago; a new agent on the same clock still sees the process just started, not up for 600 s."""
    behind = lambda: time.time() - 600  # noqa: E731
    sup = ProcessSupervisor(tmp_path, wall_clock=behind, stable_after_s=60)
    supervisors.append(sup)
    sup.start(spec.process("e", "job", ["sleep", "600"]))
    seen = sup.check()["e.job.0"]
    assert seen.started_at is not None and abs(seen.started_at - (time.time() - 600)) < 5
    again = ProcessSupervisor(tmp_path, wall_clock=behind, stable_after_s=60)
    assert not again.check()["e.job.0"].is_stable  # up for seconds, not 600 s
    sup.stop("e.job.0")


@pytest.fixture
def rendered_env(env: AgentEnv) -> Iterator[AgentEnv]:
    """``env`` for rendered specs, which cannot carry the test label: every container of the
    test's (unique) node is removed afterwards."""
    yield env
    for c in env.managed():
        c.remove(force=True)


def passes_like_the_loop(
    reconciler: NodeReconciler, desired: DesiredState, until: Any, timeout: float
) -> list:
    """Passes back to back, each followed by the loop's reporting observe() (a check too);
    returns (wall time after the pass, its actions) per pass."""
    ops, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = reconciler.run_pass(desired)
        reconciler.observe()
        ops.append((time.time(), [(a.op.value, a.target) for a in result.plan.actions]))
        if until(ops):
            break
        time.sleep(0.2)
    return ops


@pytest.mark.slow
def test_rendered_replaces_keeps_the_container_until_the_process_is_stable(
    rendered_env: AgentEnv, tmp_path: Path, supervisors
):
    env = rendered_env
    store = DesiredStore(T, env.node)
    store.apply_all(render_node(tmp_path / "repo", env, handover_services(["sleep", "600"])))
    desired = store.snapshot()
    old, proc = f"{env.env}.legacy.0", f"{env.env}.mon.0"
    # what config-sync publishes: the container stays desired next to its replacement
    assert desired.is_complete and old in desired.containers and proc in desired.processes
    assert desired.processes[proc]["replaces"] == [old]
    sup = ProcessSupervisor(tmp_path / "state")
    supervisors.append(sup)
    reconciler = env.reconciler(supervisor=sup)

    def removed_then_two_more(ops: list) -> bool:
        return [i for i, (_t, o) in enumerate(ops) if ("remove", old) in o][:1] == [len(ops) - 3]

    with Presence(env, old, tmp_path / "state") as presence:
        ops = passes_like_the_loop(reconciler, desired, removed_then_two_more, 30)
    assert ops[0][1] == [("pull_image", env.image), ("create", old), ("start_process", proc)]
    removal = next(t for t, o in ops if ("remove", old) in o)
    meta = json.loads((tmp_path / "state" / "processes" / proc / "meta.json").read_text())
    assert meta["restart_count"] == 0  # one run: its start time is the one that counts
    assert removal - meta["started_at"] >= STABLE_AFTER_S, "removed before the process had stayed up"
    assert not env.exists(old), "the replaced container should be removed"
    assert [o for _t, o in ops[-2:]] == [[], []]  # not created again while the process is stable
    assert presence.gaps() == []
    assert reconciler.run_pass(desired).converged


@pytest.mark.slow
def test_a_process_that_dies_soon_after_starting_never_takes_over(
    rendered_env: AgentEnv, tmp_path: Path, supervisors
):
    """Checks milliseconds apart (a pass, its report, a pass on a Docker event) prove nothing:
    a process that dies 0.5 s after each start must never get its container removed."""
    env = rendered_env
    services = handover_services(["sh", "-c", "sleep 0.5; exit 3"])
    store = DesiredStore(T, env.node)
    store.apply_all(render_node(tmp_path / "repo", env, services))
    desired = store.snapshot()
    old = f"{env.env}.legacy.0"
    sup = ProcessSupervisor(tmp_path / "state", base_backoff=0.1, max_backoff=0.2)  # restarts at once
    supervisors.append(sup)
    reconciler = env.reconciler(supervisor=sup)
    with Presence(env, old, tmp_path / "state") as presence:
        ops = passes_like_the_loop(reconciler, desired, lambda _ops: False, 6)
        assert sup.check()[f"{env.env}.mon.0"].restart_count >= 2  # it did start, die, restart
    assert not any(("remove", old) in o for _t, o in ops)
    sampled = [c for t, c, _p in presence.samples if t > ops[0][0] + 1]  # once created
    assert sampled and all(sampled), "the container must stay up throughout"


def test_a_process_runs_as_its_user_and_an_unknown_user_is_an_error(tmp_path: Path, supervisors):
    if os.geteuid() != 0:
        pytest.skip("switching users needs root (the agent runs as root)")
    sup = ProcessSupervisor(tmp_path)
    supervisors.append(sup)
    sup.start(spec.process("e", "as-nobody", ["sleep", "600"], user="nobody"))
    running = sup.check()["e.as-nobody.0"]
    assert running.state == "running" and running.pid
    assert psutil.Process(running.pid).uids().real == 65534  # Debian's nobody
    with pytest.raises(Exception, match="no-such-user"):
        sup.start(spec.process("e", "as-ghost", ["sleep", "600"], user="no-such-user"))
    ghost = sup.check()["e.as-ghost.0"]
    assert ghost.state == "backoff" and "no-such-user" in (ghost.error or "")


def test_each_crash_doubles_the_time_a_process_must_stay_up_to_count_stable(tmp_path: Path, supervisors):
    """A process that dies a few seconds in must not hand over (and take back) its container
    again and again: after a crash it must stay up twice as long to count as stable."""
    clock = FakeClock()
    sup = ProcessSupervisor(tmp_path, clock=clock, base_backoff=1.0, stable_after_s=2.0)
    supervisors.append(sup)
    sup.start(spec.process("e", "mon", ["sleep", "600"]))
    sup.check()
    clock.now += 2.5
    first = sup.check()["e.mon.0"]
    assert first.is_stable  # 2 checks, 2.5 s up
    os.kill(first.pid or 0, signal.SIGKILL)
    wait_dead(first.pid or 0)
    assert sup.check()["e.mon.0"].state == "backoff"
    clock.now += 1.5  # the backoff (1 s) elapsed: restarted
    again = sup.check()["e.mon.0"]
    assert again.state == "running" and again.pid != first.pid
    clock.now += 2.5
    assert not sup.check()["e.mon.0"].is_stable  # after one crash: 4 s needed
    clock.now += 2.0
    second = sup.check()["e.mon.0"]
    assert second.is_stable
    # stable again, but not up long enough for its crashes to be forgiven: one more crash
    # and it needs 8 s, so a process dying every ~5 s stops handing over for good
    os.kill(second.pid or 0, signal.SIGKILL)
    wait_dead(second.pid or 0)
    sup.check()
    clock.now += 2.5  # backoff (2 s) elapsed
    assert sup.check()["e.mon.0"].state == "running"
    clock.now += 0.5
    sup.check()
    clock.now += 4.5  # 5 s up, 2 checks: enough after one crash, not after two
    assert not sup.check()["e.mon.0"].is_stable
    clock.now += 3.5
    assert sup.check()["e.mon.0"].is_stable
