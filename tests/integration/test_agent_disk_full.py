"""The agent's host processes when its state folder's disk is full (a real 2 MiB tmpfs):
nothing runs without a record on disk, the check never fails, the agent keeps converging its
containers and says why the process waits (status, metric), and recovers when space returns."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from node_agent.errors import AgentError, RecordError
from node_agent.process_records import ProcessRecords
from node_agent.processes import ProcessSupervisor
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess
from tests.support.services import free_port
from tests.support.tmpfs import fill, tiny_disk
from tests.support.waiting import wait_for

ITEM = "e.job.0"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tiny_disk(tmp_path / "state") as folder:
        yield folder


@pytest.fixture
def sup(disk: Path) -> Iterator[ProcessSupervisor]:
    made = ProcessSupervisor(disk, clock=FakeClock(), base_backoff=1.0)
    yield made
    for item_id in list(made.check()):
        made.stop(item_id)


def job(marker: str, env: str = "e") -> dict:
    # the marker names this test's shell among all of the host's processes (no exec: it stays)
    return spec.process(env, "job", ["sh", "-c", f"sleep 600; : {marker}"])


def running_with(marker: str) -> list[int]:
    """The pids of the shells carrying ``marker``. Not their children: a shell's fork shows
    the shell's command line until it execs ``sleep``, so a look at that moment sees two."""
    found: dict[int, int] = {}
    for p in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
        if marker in " ".join(p.info["cmdline"] or ()) and p.info["status"] != psutil.STATUS_ZOMBIE:
            found[p.info["pid"]] = p.info["ppid"]
    return sorted(pid for pid, parent in found.items() if parent not in found)


def record(disk: Path, item: str = ITEM) -> dict:
    return json.loads((disk / "processes" / item / "meta.json").read_text())


def test_a_process_is_not_started_while_its_record_cannot_be_saved(
    disk: Path, sup: ProcessSupervisor, tmp_path: Path
) -> None:
    marker = f"disk-full-{tmp_path.name}"
    filler = fill(disk)
    with pytest.raises(AgentError, match="No space left"):
        sup.start(job(marker))
    # a process started without a record would be a stranger to the next agent: none runs
    assert running_with(marker) == []
    assert not list((disk / "processes" / ITEM).glob("*.tmp"))  # no half-written record left
    seen = sup.check()[ITEM]
    assert seen.state == "backoff" and seen.pid is None
    assert seen.error is not None and "record" in seen.error and "No space left" in seen.error
    (problem,) = sup.record_errors()
    assert ITEM in problem and "No space left" in problem
    assert running_with(marker) == []  # a check on the full disk starts nothing either
    filler.unlink()  # space again
    sup.clock.now += 1.0  # type: ignore[attr-defined]
    again = sup.check()[ITEM]
    assert again.state == "running" and again.error is None
    assert record(disk)["pid"] == again.pid and running_with(marker) == [again.pid]
    assert sup.record_errors() == []


def test_a_crashed_process_restarted_on_a_full_disk_fails_nothing_else(
    disk: Path, sup: ProcessSupervisor, tmp_path: Path
) -> None:
    marker = f"disk-full-crash-{tmp_path.name}"
    sup.start(job(marker))
    first = sup.check()[ITEM]
    assert first.pid is not None and record(disk)["pid"] == first.pid
    filler = fill(disk)
    os.killpg(first.pid, signal.SIGKILL)
    wait_for(lambda: running_with(marker) == [], "the job to die", 5, observe=lambda: running_with(marker))
    assert sup.check()[ITEM].state == "backoff"  # found dead: a restart is due after the backoff
    sup.clock.now += 5.0  # type: ignore[attr-defined]
    seen = sup.check()[ITEM]  # the restart meets the full disk: reported, never raised
    assert seen.state == "backoff" and seen.error is not None and "No space left" in seen.error
    assert running_with(marker) == [] and sup.record_errors()
    assert record(disk)["pid"] == first.pid  # the last record stays whole
    filler.unlink()
    sup.clock.now += 1.0  # type: ignore[attr-defined]
    again = sup.check()[ITEM]
    assert again.state == "running" and record(disk)["pid"] == again.pid != first.pid
    assert sup.record_errors() == []


class FillsAfterTheProbe(ProcessRecords):
    """The disk fills between the probe and the save (another writer took the last room)."""

    def save(self, item_id: str, meta: dict) -> None:
        raise RecordError(f"its record cannot be saved in {self.folder(item_id)} (No space left on device)")


def test_a_process_started_whose_record_then_fails_is_stopped_at_once(tmp_path: Path) -> None:
    marker = f"disk-full-race-{tmp_path.name}"
    sup = ProcessSupervisor(tmp_path, clock=FakeClock())
    sup.records = FillsAfterTheProbe(sup.root)
    with pytest.raises(RecordError):
        sup.start(job(marker))
    assert running_with(marker) == []  # started, then stopped: it had no record
    seen = sup.check()[ITEM]
    assert seen.state == "backoff" and seen.pid is None and sup.record_errors()


def unsaved_metric(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("phrame_node_agent_processes_unsaved ")]
    return float(line.split()[1])


@pytest.mark.slow
def test_the_agent_converges_its_containers_and_reports_a_process_it_cannot_record(
    mosquitto, env: AgentEnv, watcher: ActualWatcher, tmp_path: Path
) -> None:
    marker = f"disk-full-agent-{tmp_path.name}"
    web, ticker = env.container("web"), job(marker, env.env)
    port = free_port()
    with tiny_disk(tmp_path / "state") as state:
        agent = AgentProcess(
            env.process_env(
                str(state), PHRAME_DESIRED_MQTT_URL=mosquitto.url, PHRAME_METRICS_LISTEN=f"127.0.0.1:{port}"
            ),
            str(tmp_path / "agent.log"),
        )
        try:
            filler = fill(state)
            watcher.publish(spec.topics_doc(env.node, [web, ticker]))

            def waiting_reported() -> bool:
                errors = (watcher.status() or {}).get("errors") or []
                return any(ticker["name"] in e and "record cannot be saved" in e for e in errors)

            watcher.wait_for(waiting_reported, 20, "the process's unsaved record in the node status")
            watcher.wait_passes(2)  # still said passes later: a state, not a one-off event
            assert waiting_reported() and not watcher.status()["converged"], watcher.status()
            assert env.get(web["name"]).status == "running"  # the rest converges meanwhile
            assert running_with(marker) == []
            assert unsaved_metric(port) == 1
            filler.unlink()  # space again
            watcher.wait_for(
                lambda: (watcher.status() or {}).get("converged") and not watcher.status().get("errors"),
                20,
                "converged with no error once the disk has room",
            )
            assert running_with(marker) == [record(state, ticker["name"])["pid"]]
            assert unsaved_metric(port) == 0
        finally:
            code = agent.terminate()
            for pid in running_with(marker):  # the agent leaves host processes running
                os.killpg(pid, signal.SIGTERM)
            wait_for(lambda: running_with(marker) == [], "the test's process to end", 10)
            assert code == 0, agent.log()
