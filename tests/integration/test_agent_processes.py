"""Supervised host processes: restart with backoff, re-adoption, and the ``replaces`` handover."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker.errors
import psutil
import pytest

from node_agent.processes import Supervisor
from tests.support import agent_support as spec
from tests.support.agent_support import AgentEnv


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def supervisors(tmp_path: Path) -> Iterator[list[Supervisor]]:
    made: list[Supervisor] = []
    yield made
    for sup in made:  # stop whatever a test left running, by its recorded pid
        for item_id in list(sup.check()):
            sup.stop(item_id)


def wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"pid {pid} still alive"
        time.sleep(0.02)


def test_restart_with_backoff_and_a_log_per_process(tmp_path: Path, supervisors):
    clock = FakeClock()
    sup = Supervisor(tmp_path, clock=clock, base_backoff=2.0)
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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(text) == count:
            return True
        time.sleep(0.05)
    return False


def test_a_new_agent_re_adopts_running_processes(tmp_path: Path, supervisors):
    job = spec.process("e", "job", ["sleep", "600"])
    # the first agent is a separate Python process that starts the job and exits
    code = (
        "import json, sys; from pathlib import Path; from node_agent.processes import Supervisor; "
        "Supervisor(Path(sys.argv[1])).start(json.loads(sys.argv[2]))"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path), json.dumps(job)], check=True)
    pid = json.loads((tmp_path / "processes" / "e.job.0" / "meta.json").read_text())["pid"]
    assert psutil.pid_exists(pid)
    new = Supervisor(tmp_path)  # the agent restarted
    supervisors.append(new)
    seen = new.check()["e.job.0"]
    assert seen.pid == pid and seen.state == "running" and seen.digest == job["digest"]
    new.stop("e.job.0")
    assert pid is not None
    wait_dead(pid)
    assert "e.job.0" not in Supervisor(tmp_path).check()


def test_process_replaces_container_with_no_gap(env: AgentEnv, tmp_path: Path, supervisors):
    sup = Supervisor(tmp_path)
    supervisors.append(sup)
    old = env.container("web")
    assert env.reconciler().run_pass(spec.desired([old], with_manifest=True)).converged
    proc = spec.process(env.env, "web", ["sleep", "600"], replaces=["web"])
    desired = spec.desired([proc], with_manifest=True)
    reconciler = env.reconciler(supervisor=sup)

    gaps: list[float] = []
    stop = threading.Event()

    def container_up() -> bool:
        try:
            return bool(env.get(old["name"]).status == "running")
        except docker.errors.NotFound:  # removed (between list and inspect, too)
            return False

    def process_up() -> bool | None:  # read the pid file: check() itself counts as a check
        try:
            pids = [json.loads(m.read_text())["pid"] for m in (tmp_path / "processes").glob("*/meta.json")]
        except (OSError, ValueError):
            return None  # caught mid-write: this sample says nothing
        return any(psutil.pid_exists(pid or 0) for pid in pids)

    def poll() -> None:  # every 100 ms: at least one of the two must be up
        while not stop.is_set():
            if not container_up() and process_up() is False:
                gaps.append(time.monotonic())
            stop.wait(0.1)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        ops = []
        for _ in range(6):
            result = reconciler.run_pass(desired)
            ops.append([(a.op.value, a.target) for a in result.plan.actions])
            time.sleep(0.3)
    finally:
        stop.set()
        poller.join()
    assert ops[0] == [("start_process", proc["name"])]
    assert ops[1] == []  # up for one check only: the container stays
    assert ops[2] == [("remove", old["name"])]
    assert ops[3:] == [[], [], []]
    assert not env.exists(old["name"])
    assert gaps == []


def test_a_process_runs_as_its_user_and_an_unknown_user_is_an_error(tmp_path: Path, supervisors):
    if os.geteuid() != 0:
        pytest.skip("switching users needs root (the agent runs as root)")
    sup = Supervisor(tmp_path)
    supervisors.append(sup)
    sup.start(spec.process("e", "as-nobody", ["sleep", "600"], user="nobody"))
    running = sup.check()["e.as-nobody.0"]
    assert running.state == "running" and running.pid
    assert psutil.Process(running.pid).uids().real == 65534  # Debian's nobody
    with pytest.raises(Exception, match="no-such-user"):
        sup.start(spec.process("e", "as-ghost", ["sleep", "600"], user="no-such-user"))
    ghost = sup.check()["e.as-ghost.0"]
    assert ghost.state == "backoff" and "no-such-user" in (ghost.error or "")
