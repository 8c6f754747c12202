"""Fault 1: mosquitto SIGKILLed and restarted without persistence (every retained message gone).

config-sync must republish the desired plane; the agents, seeing an empty or partial desired
view in between, must not prune anything.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.faults.harness import FaultStack

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 60.0


def test_mosquitto_killed_and_restarted_without_retained_state_removes_nothing(faults: FaultStack):
    s = faults.stack
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    s.hold("broker")  # restarted by the test, after its state is gone
    pid = s.pid_of("broker")
    os.kill(pid, signal.SIGKILL)
    s.wait(lambda: not Path(f"/proc/{pid}").exists(), "the broker to die", 30)
    removed = [f for f in (s.state / "broker").glob("*.db")]
    for f in removed:
        f.unlink()
    with s._lock:
        s.statuses.clear()  # what we saw of the old broker counts for nothing
    at = time.monotonic()
    s.hold("broker", held=False)
    faults.verdict(
        "1 mosquitto SIGKILL, restarted without persistence",
        BOUND_S,
        at,
        before,
        unmanaged,
        also=faults.manifests_held,  # republished by config-sync, not merely still held by agents
    )
