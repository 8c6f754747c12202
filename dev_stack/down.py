"""``phrame dev --down``: stop a running dev stack and remove exactly what it created.

It signals only pids recorded in the state folder whose command line is ours (a reused pid
is left alone), stops the host processes its agents started (pid and start time recorded
by the agent), removes the containers and networks labelled with its node names, and with
``purge`` the state folder. It never removes anything another node or person owns.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import psutil

from dev_stack.settings import DevSettings

OURS = ("phrame", "mosquitto", "amqtt", "dev_stack")


def _process(pid_file: Path, create_time: float | None = None) -> psutil.Process | None:
    """The live process a pid file names, if its command line is ours."""
    try:
        pid = int(pid_file.read_text().split()[0])
        proc = psutil.Process(pid)
        cmdline = " ".join(proc.cmdline())
    except (OSError, ValueError, IndexError, psutil.Error):
        return None
    if create_time is not None and abs(proc.create_time() - create_time) > 1:
        return None
    return proc if any(word in cmdline for word in OURS) or create_time is not None else None


def running_pid(settings: DevSettings) -> int | None:
    """The pid of a ``phrame dev`` running on this state folder, if any."""
    proc = _process(settings.pid_file)
    if proc is None or proc.pid == os.getpid():
        return None
    with contextlib.suppress(psutil.Error):
        if "dev" in proc.cmdline():  # a reused pid of another phrame command is not a stack
            pid: int = proc.pid
            return pid
    return None


def _terminate(proc: psutil.Process, timeout: float) -> None:
    with contextlib.suppress(psutil.Error):
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except psutil.TimeoutExpired:
            proc.kill()


def stop_leftovers(settings: DevSettings) -> list[str]:
    """Children a killed supervisor left behind (pid files in run/), stopped; their names."""
    stopped = []
    for pid_file in sorted(settings.run_dir.glob("*.pid")) if settings.run_dir.exists() else ():
        if pid_file.name == "dev.pid":
            continue
        proc = _process(pid_file)
        if proc is not None:
            _terminate(proc, 15)
            stopped.append(pid_file.stem)
        pid_file.unlink(missing_ok=True)
    return stopped


def stop_host_processes(settings: DevSettings) -> list[str]:
    """The agents' host processes (``kind: process``), stopped by recorded pid and start time."""
    stopped = []
    for meta_file in sorted((settings.state_dir / "agents").glob("*/processes/*/meta.json")):
        try:
            meta = json.loads(meta_file.read_text())
            pid, created = int(meta["pid"]), float(meta["create_time"])
            proc = psutil.Process(pid)
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            continue
        if abs(proc.create_time() - created) > 1:
            continue  # the pid was reused: not ours
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)  # the agent started it as a session leader
        with contextlib.suppress(psutil.Error):
            proc.wait(10)
        stopped.append(meta_file.parent.name)
    return stopped


def down(settings: DevSettings, *, purge: bool, say: Callable[[str], None]) -> int:
    pid = running_pid(settings)
    if pid is not None:
        say(f"stopping the dev stack running from {settings.state_dir} (pid {pid})")
        proc = _process(settings.pid_file)
        if proc is not None:
            _terminate(proc, 60)
    for name in stop_leftovers(settings):
        say(f"stopped {name}, left running by an earlier phrame dev")
    for name in stop_host_processes(settings):
        say(f"stopped host process {name}")
    from dev_stack import docker_host  # the SDK only where it is needed

    client = docker_host.connect()
    if client is None:
        say("no Docker daemon answers: no containers to remove")
    else:
        try:
            removed = docker_host.remove_nodes_objects(client, settings.nodes)
        finally:
            client.close()
        for what in removed:
            say(f"removed {what}")
        if not removed:
            say(f"no containers or networks of nodes {', '.join(settings.nodes)}")
    if purge and settings.state_dir.exists():
        shutil.rmtree(settings.state_dir)
        say(f"removed {settings.state_dir}")
    return 0
