"""Fault 4: config-sync SIGKILLed between publishing a commit's items and its manifests.

The stack's config-sync is held down and replaced by a stand-in: the same settings, its
publisher built with a pause between items and manifests (tests/support/hooked_services.py),
so the point is reached deterministically. The commit removes one service and changes
another: fa5's item is already cleared while the manifest still lists it. No agent may prune
on that partial view; the stand-in is SIGKILLed there and the stack's own config-sync,
started again, completes the commit.
"""

from __future__ import annotations

import signal
import time
import urllib.request
from pathlib import Path

import pytest

from tests.faults.harness import FaultStack, service
from tests.faults.stand_in import StandIn
from tests.support.hooked_services import command
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 60.0
#: seconds watched while config-sync is paused: three agent heartbeats (PHRAME_HEARTBEAT_S=1)
WATCH_S = 3.0


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_config_sync_killed_between_items_and_manifests_prunes_nothing(faults: FaultStack):
    s = faults.stack
    node = s.nodes[0]
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    expected = faults.services()
    pause = s.root / "pause-before-manifests"
    reached = Path(f"{pause}.reached")
    reached.unlink(missing_ok=True)
    paused = StandIn(s, "config-sync", {}, argv=command("config-sync", "--pause-file", str(pause)))
    faults.kill("config-sync")  # held by the supervisor while the stand-in runs
    try:
        paused.start()
        s.wait(lambda: ready(s.sync_port), "the stand-in config-sync to be ready", 60)
        pause.touch()  # after its first sync: that one changed nothing and passed no manifest
        s.env_file("services/fa5.yaml").unlink()
        s.env_file("services/fa4.yaml").write_text(service("fa4", node, env="partial"))
        s.commit_and_push("faults: remove fa5, change fa4 (config-sync dies in between)")
        s.wait(reached.exists, "config-sync to reach the point between items and manifests", 60)
        assert paused.proc is not None and int(reached.read_text()) == paused.proc.pid

        # the partial view is on the broker: for a while, nothing may be removed on any node.
        # fa4's new item may be applied early (an item listed with another digest than the
        # manifest's is recreated, tests/unit/test_agent_plan.py), but fa5, cleared and still
        # listed, must stay.
        def unchanged() -> bool:
            now = {i: v for i, v in faults.snapshot().items() if not v[0].startswith("fa4@")}
            kept = {i: v for i, v in before.items() if not v[0].startswith("fa4@")}
            assert now == kept, "an agent pruned or restarted on the partial view"
            return False

        with pytest.raises(AssertionError, match="timed out"):
            wait_for(unchanged, "the partial view to be left alone", WATCH_S, interval=0.1)
        assert paused.stop(signal.SIGKILL) == -signal.SIGKILL  # still paused: it died there
    finally:
        paused.stop(signal.SIGKILL)  # by its pid; nothing when it already ended
        pause.unlink(missing_ok=True)
    at = time.monotonic()
    faults.release("config-sync")  # the stack's own config-sync completes the commit
    faults.verdict(
        "4 config-sync SIGKILL between items and manifests",
        BOUND_S,
        at,
        before,
        unmanaged,
        expect_changed={"fa4", "fa5"},
    )
    expected.pop(f"fa5@{node}")
    assert faults.services() == expected
    # and the next run completes: the head is deployed (verdict checked it), no pause left behind
    assert s.commit_status(s.remote_head()) == "success"
