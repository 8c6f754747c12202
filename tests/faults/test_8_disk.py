"""Fault 8: the disks under the agents' state folders and the mirrors' snapshots fill up.

Both are small tmpfs folders (``tests/faults/disks.py``, mounted before the stack started);
the case fills them with a file of its own, then pushes a change to a container and a new
host process, whose record needs the agent's disk. While full: the agent converges the
container, does not run the process without a record and says so in its node status; the
mirrors log the refused writes and keep their last good snapshots, which the topic API keeps
serving (their ``generated_at`` stops). Deleting the file returns the space: the process
starts with its record saved, both snapshots are written again, all converges.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.faults.harness import FaultStack, service
from tests.support.services import require
from tests.support.tmpfs import FILLER, kept_full

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
FAULT = "8 agent state and mirror snapshot disks full, then space again"
# the agent retries an unsaved process every second, the mirrors every debounce window
# (250 ms); the rest is config-sync's deploy record and the reports agreeing
BOUND_S = 30.0
STALE_S = 3.0  # the actual plane's snapshot is older than three heartbeats: not being written


def env_of(faults: FaultStack, name: str) -> list[str]:
    """The environment of the service's one container ([] while it is being recreated)."""
    found = [c for c in faults.managed() if c.labels.get("io.phrame.service") == name]
    return list(found[0].attrs["Config"]["Env"]) if len(found) == 1 else []


PROCESS = "disk8"
LOOP = "while true; do date > disk8.txt; sleep 5; done"


def process_service(node: str, workdir: Path) -> str:
    return (
        f"name: {PROCESS}\nkind: process\ncommand: [/bin/sh, -c, {LOOP!r}]\n"
        f"workdir: {workdir}\nplacement:\n  node: {node}\n"
    )


def shells(workdir: Path) -> list[int]:
    """The new process's shell (its command line names disk8.txt), not its ``sleep`` child: in
    this stack's ``workdir`` (another run of the suite on the machine has a shell of its own)."""
    return [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "cmdline", "cwd"])
        if LOOP in (p.info["cmdline"] or ())
        and p.info["cmdline"][0] == "/bin/sh"
        and p.info["cwd"] is not None
        and Path(p.info["cwd"]).resolve() == workdir.resolve()
    ]


def snapshot(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def test_full_disks_are_reported_lose_nothing_and_recover_when_space_returns(faults: FaultStack):
    disks = faults.disks
    require(disks is not None and not disks.why, f"no small disk under the stack: {disks and disks.why}")
    assert disks is not None
    s = faults.stack
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    node = s.nodes[0]  # fa1's node
    workdir = s.state / "work" / node  # the sample's host process works there too
    record = disks.agents / node / "processes" / f"{s.environment}.{PROCESS}.0" / "meta.json"
    assert shells(workdir) == []
    planes = ("desired", "actual")
    logs = {p: s.state / "logs" / f"mirror-{p}.log" for p in planes}
    log_from = {p: len(logs[p].read_text()) for p in planes}

    def said(p: str, text: str) -> bool:
        return text in logs[p].read_text()[log_from[p] :]

    def unsaved_reported() -> bool:
        errors = s.node_status(node).get("errors") or []
        return any(PROCESS in e and "record cannot be saved" in e for e in errors)

    with kept_full(disks.agents, disks.mirror):
        full_at = time.monotonic()
        s.env_file(f"services/{PROCESS}.yaml").write_text(process_service(node, workdir))
        s.env_file("services/fa1.yaml").write_text(service("fa1", node, env="8"))
        sha, _ = s.commit_and_push("faults: a change while the disks are full")
        # the mirrors: the refused writes logged (the change and the heartbeats are due)
        for p in planes:
            s.wait(partial(said, p, "cannot write snapshot"), f"mirror-{p} to log a refused write", 15)
        good = {p: snapshot(disks.mirror / f"{p}.json") for p in planes}  # the last good ones
        # the API reads a snapshot after the mirror's notice, in a thread of its own: wait for
        # it to serve the last good ones before taking their stamps as the frozen ones
        want = {p: datetime.fromisoformat(good[p]["generated_at"]).timestamp() for p in planes}
        s.wait(
            lambda: all(abs((s.api("api/nodes")["generated_at"][p] or 0) - want[p]) < 1e-3 for p in planes),
            "the topic API on the last good snapshots",
            15,
        )
        served_at = s.api("api/nodes")["generated_at"]
        # the agent keeps converging (fa1 recreated) and says why the new process waits
        s.wait(lambda: "ROUND=8" in env_of(faults, "fa1"), "fa1 recreated on the full disk", 30)
        s.wait(unsaved_reported, f"the agent to report {PROCESS}'s unsaved record", 30)
        reported_after = time.monotonic() - full_at
        assert not s.node_status(node).get("converged"), s.node_status(node)
        assert shells(workdir) == [] and not record.exists()  # nothing runs that no record names
        assert s.commit_status(sha) != "success"
        # the topic API serves the last good snapshots; their age grows past three heartbeats
        s.wait(
            lambda: time.time() - s.api("api/nodes")["generated_at"]["actual"] > STALE_S,
            f"the topic API's actual snapshot to be older than {STALE_S:g} s",
            15,
        )
        served = s.api("api/nodes")
        assert served["generated_at"] == served_at and {n["node"] for n in served["nodes"]} >= set(s.nodes)
        assert {p: snapshot(disks.mirror / f"{p}.json") for p in planes} == good
        # no half-written snapshot left behind: the snapshots, the filler and each running
        # mirror's notice socket only
        # (a mirror still retries its write every debounce: the temp file of an attempt under
        # way is gone a moment later, one left behind is not)
        clean = sorted([FILLER, "actual.json", "desired.json", "actual.sock", "desired.sock"])
        s.wait(
            lambda: sorted(x.name for x in disks.mirror.iterdir()) == clean,
            "no file but the snapshots, the filler and the sockets",
            10,
            observe=lambda: sorted(x.name for x in disks.mirror.iterdir()),
        )
        full_for = time.monotonic() - full_at
    at = time.monotonic()

    def recovered() -> bool:
        """The process runs once, its record names it; the actual snapshot is fresh again."""
        pids = shells(workdir)
        if not record.exists() or len(pids) != 1:
            return False
        fresh = time.time() - s.api("api/nodes")["generated_at"]["actual"] < STALE_S
        return bool(json.loads(record.read_text())["pid"] == pids[0] and fresh)

    faults.verdict(FAULT, BOUND_S, at, before, unmanaged, expect_changed={"fa1"}, also=recovered)
    assert not any("record cannot be saved" in e for e in s.node_status(node).get("errors") or [])
    for p in planes:
        assert said(p, "written again"), f"mirror-{p} never said it writes again"
    print(
        f"disk 8: full for {full_for:.1f} s, the agent reported the unsaved record {reported_after:.1f} s in"
    )
