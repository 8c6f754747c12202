"""``phrame dev`` as a user runs it, where no Docker is needed: a taken port refused before
anything starts; a stack on a host without a Docker daemon (processes only); a crashed part
restarted with its log lines shown; SIGTERM stopping the parts in order. Real mosquitto, git,
config-sync, placement and agents; the daemon is made unreachable with DOCKER_HOST."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import waiting
from tests.support.agent_support import open_policy_file
from tests.support.services import free_port, require_binary


def dev_argv(state: Path, *extra: str) -> list[str]:
    # a free port for the topic API too: 8090 may be someone's dev stack
    api = () if "--down" in extra else ("--api-port", str(free_port()))
    return [sys.executable, "-m", "phrame", "dev", "--state-dir", str(state), *api, *extra]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    return env | {"PHRAME_HEARTBEAT_S": "0.5"} | extra


def wait_for(condition, what: str, output: Path, timeout: float = 60.0) -> None:
    """:func:`tests.support.waiting.wait_for`, showing the command's output on a timeout."""
    waiting.wait_for(condition, what, timeout, interval=0.05, observe=output.read_text)


def test_a_taken_port_is_a_clear_error_before_anything_starts(tmp_path: Path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            dev_argv(tmp_path / "state", "--broker-port", str(port), "--listen", f"127.0.0.1:{free_port()}"),
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(
                DOCKER_HOST=f"unix://{tmp_path}/none.sock", PHRAME_POLICY_FILE=open_policy_file(tmp_path)
            ),
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"port {port} on 127.0.0.1 is already in use: --broker-port (the broker)" in done.stderr
    assert not (tmp_path / "state" / "config.git").exists()  # nothing was started or created


@pytest.mark.slow
def test_without_docker_the_stack_runs_processes_restarts_a_crash_and_stops_in_order(tmp_path: Path):
    require_binary("mosquitto", "mosquitto")
    state, out = tmp_path / "state", tmp_path / "dev.out"
    argv = dev_argv(
        state,
        *("--node-prefix", f"nd{os.getpid()}", "--broker-port", str(free_port())),
        *("--listen", f"127.0.0.1:{free_port()}", "--web-port", str(free_port())),
    )
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=clean_env(
                DOCKER_HOST=f"unix://{tmp_path}/none.sock", PHRAME_POLICY_FILE=open_policy_file(tmp_path)
            ),
        )
    try:
        wait_for(lambda: "ready in" in out.read_text(), "the ready banner", out)
        text = out.read_text()
        assert "no Docker daemon answers" in text and "kind: process services only" in text
        ticker = state / "work" / f"nd{os.getpid()}-1" / "ticker.txt"
        wait_for(ticker.exists, "the host process to write its file", out)
        # a crashed part: its last log lines are shown and it is restarted
        placement_pid = int((state / "run" / "placement.pid").read_text())
        os.kill(placement_pid, signal.SIGKILL)
        wait_for(lambda: "restarted placement" in out.read_text(), "placement restarted", out)
        assert "placement was killed (SIGKILL); restarting in 1 s" in out.read_text()
        assert int((state / "run" / "placement.pid").read_text()) != placement_pid
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(
            dev_argv(state, "--down", "--purge"), capture_output=True, timeout=120, env=clean_env()
        )
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("phrame dev: stopped ")]
    order = [
        ln.split()[3] for ln in lines if len(ln.split()) > 3 and not ln.startswith("phrame dev: stopped;")
    ]
    prefix = f"nd{os.getpid()}"
    assert order == [
        f"agent-{prefix}-2",
        f"agent-{prefix}-1",
        "topic-api",
        "mirror-actual",
        "mirror-desired",
        "placement",
        "config-sync",
        "broker",
    ], lines


@pytest.mark.slow
def test_a_closed_console_still_stops_every_part(tmp_path: Path):
    # `make up | tee log` and Ctrl-C: tee dies first, so the supervisor's next line meets a
    # closed pipe. It must go on stopping its parts rather than die and leave them running.
    require_binary("mosquitto", "mosquitto")
    state = tmp_path / "state"
    argv = dev_argv(
        state,
        *("--node-prefix", f"nc{os.getpid()}", "--nodes", "1", "--broker-port", str(free_port())),
        *("--listen", f"127.0.0.1:{free_port()}", "--web-port", str(free_port())),
    )
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=clean_env(DOCKER_HOST=f"unix://{tmp_path}/none.sock"),
    )
    pids: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + 60
        while b"ready in" not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            seen += proc.stdout.readline()
        pids = {p.stem: int(p.read_text()) for p in (state / "run").glob("*.pid") if p.stem != "dev"}
        assert {"broker", "config-sync", "placement"} <= set(pids), pids
        proc.stdout.close()  # the console goes away
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        alive = {name: pid for name, pid in pids.items() if _is_running(pid)}
        assert not alive, f"left running after the console closed: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run(
            dev_argv(state, "--down", "--purge"), capture_output=True, timeout=120, env=clean_env()
        )


def _is_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
