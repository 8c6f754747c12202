"""State folders are private: each service's folder under
``PHRAME_STATE_DIR`` is 0700 and what it writes there 0600, git's clone files included.

Each service runs for real as a subprocess (config-sync and placement against a real bare
repo and mosquitto, the agent's ``--once`` pass against the real daemon) on a state dir
the test made 0755: that folder keeps its mode, the service's own folder does not.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from node_agent.processes import ProcessSupervisor
from phrame.settings.state import private_dir
from tests.integration.test_placement_git import ConfigRemote
from tests.integration.test_placement_lock import Heartbeats, Instance, trailers
from tests.support import agent_support as spec
from tests.support.agent_support import AgentEnv
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port, stop_process, wait_until

PHRAME = [sys.executable, "-m", "phrame"]


def user_state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)  # the user's choice: never changed
    return state


def open_entries(folder: Path) -> list[str]:
    """Entries at or below ``folder`` that group or others may use (symbolic links aside)."""
    found = []
    for p in [folder, *folder.rglob("*")]:
        mode = p.lstat().st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{oct(stat.S_IMODE(mode))} {p.relative_to(folder.parent)}")
    return found


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_config_sync_keeps_its_clone_cache_private(mosquitto: Mosquitto, tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    state = user_state_dir(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    env |= {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_STATE_DIR": str(state),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_LISTEN": f"127.0.0.1:{free_port()}",
        "PHRAME_WEBHOOK_SECRET": "s3cret",
    }
    log = tmp_path / "config-sync.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*PHRAME, "config-sync"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        cache = state / "config-sync" / "config-repo.git"
        wait_until(
            lambda: (cache / "FETCH_HEAD").is_file(), f"config-sync's first fetch\n{log.read_text()}", 30
        )
        wait_until(lambda: any((cache / "objects" / "pack").glob("*.pack")) or any(
            p for p in (cache / "objects").glob("??/*")
        ), "fetched objects", 10)  # fmt: skip
    finally:
        stop_process(proc)
    assert mode(state) == 0o755
    assert mode(state / "config-sync") == 0o700
    assert mode(cache / "config") == 0o600
    assert open_entries(state / "config-sync") == []


def test_placement_keeps_its_clone_cache_private(mosquitto: Mosquitto, tmp_path: Path) -> None:
    remote = ConfigRemote(tmp_path)
    state = tmp_path / "state-a"  # Instance's PHRAME_STATE_DIR
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    env |= {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_PLACEMENT_INTERVAL_S": "0.2",
    }
    beats = Heartbeats(mosquitto.url)
    placement = Instance(tmp_path, "a", env)
    try:
        wait_until(lambda: trailers(remote) == [placement.owner], "placement's first commit", timeout=30)
    finally:
        placement.end()
        beats.stop()
    assert mode(state) == 0o755
    assert mode(state / "placement") == 0o700
    assert mode(state / "placement" / "repo.git" / "config") == 0o600
    assert open_entries(state / "placement") == []


def test_the_agent_keeps_process_logs_private_and_its_processes_their_umask(
    env: AgentEnv, tmp_path: Path
) -> None:
    state = user_state_dir(tmp_path)
    loose = state / "processes" / "old.item.0"  # left by an older agent, world-readable
    loose.mkdir(parents=True)
    (state / "processes").chmod(0o755)
    (loose / "output.log").write_text("old\n")
    (loose / "output.log").chmod(0o644)
    item = spec.process(env.env, "umask", ["sh", "-c", "umask"])
    path = tmp_path / "desired.json"
    path.write_text(json.dumps(spec.topics_doc(env.node, [item])))
    done = subprocess.run(
        [*PHRAME, "node-agent", "--once", "--json", "--desired", str(path)],
        env=env.process_env(str(state)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout, done.stderr
    own = state / "processes" / item["name"]
    output = own / "output.log"
    wait_until(lambda: output.is_file() and output.read_text().strip() != "", "the process's output", 10)
    assert mode(state) == 0o755
    assert mode(state / "processes") == 0o700
    assert mode(output) == 0o600
    assert open_entries(state / "processes") == []  # the old folder was tightened too
    # the supervised process itself runs with the umask the agent was started with
    assert int(output.read_text().split()[0], 8) == os.umask(os.umask(0o022))


def test_private_dir_creates_0700_and_tightens_an_existing_folder_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parent = tmp_path / "given"
    parent.mkdir(mode=0o755)
    parent.chmod(0o755)
    fresh = private_dir(parent / "svc" / "cache")
    assert mode(parent) == 0o755 and mode(parent / "svc") == 0o700 and mode(fresh) == 0o700
    old = parent / "old"
    (old / "sub").mkdir(parents=True)
    for p in (old, old / "sub"):
        p.chmod(0o755)
    (old / "sub" / "f").write_text("x")
    (old / "sub" / "f").chmod(0o664)
    os.symlink("/etc/hostname", old / "link")  # a link's target is not ours to change
    before = mode(Path("/etc/hostname"))
    with caplog.at_level(logging.WARNING, logger="phrame.settings.state"):
        private_dir(old)
        assert open_entries(old) == [] and mode(old / "sub" / "f") == 0o600
        assert mode(Path("/etc/hostname")) == before and mode(parent) == 0o755
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and str(old) in said[0] and "3 entries" in said[0]
        old.chmod(0o755)  # loosened again while running: checked at start only, said once
        private_dir(old)
        assert len(caplog.records) == 1


def test_a_supervisor_that_starts_nothing_creates_nothing(tmp_path: Path) -> None:
    """``--once --dry-run`` builds a ProcessSupervisor: it must not need a writable state dir."""
    ProcessSupervisor(tmp_path / "state")
    assert not (tmp_path / "state").exists()
