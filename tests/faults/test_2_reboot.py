"""Fault 10: the host reboots: every managed container stopped (as dockerd does at shutdown)
and the agents restarted. Everything comes back, in ``depends_on`` order."""

from __future__ import annotations

import time

import pytest

from tests.faults.harness import CHAIN, FaultStack

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 60.0


def test_after_a_reboot_everything_comes_back_in_depends_on_order(faults: FaultStack):
    s = faults.stack
    faults.settle("converged before the fault", 60)
    unmanaged = faults.unmanaged_state()
    services = {v[0] for v in faults.snapshot().values()}
    agents = [f"agent-{n}" for n in s.nodes]
    for agent in agents:
        faults.kill(agent)
    managed = faults.managed()
    for c in managed:
        c.stop(timeout=2)
    stopped = {c.id: c.attrs["State"]["StartedAt"] for c in managed}
    with s._lock:
        s.statuses.clear()  # only what the restarted agents report counts
    at = time.monotonic()
    for agent in agents:
        faults.release(agent)
    s.wait(
        lambda: faults.converged() and {v[0] for v in faults.snapshot().values()} >= services,
        "every service running and converged after the reboot",
        BOUND_S + 30,
    )
    recovery = time.monotonic() - at
    after = {c.id: c for c in faults.managed()}
    started = {
        c.labels["io.phrame.service"]: c.attrs["State"]["StartedAt"]
        for c in after.values()
        if c.status == "running"
    }
    order = [started[name] for name in CHAIN]
    assert order == sorted(order), dict(zip(CHAIN, order, strict=True))
    assert started["cache"] < started["web"]
    lost = {i for i in stopped if i not in after or after[i].status != "running"}
    not_restarted = {i for i in stopped if i in after and after[i].attrs["State"]["StartedAt"] == stopped[i]}
    assert not not_restarted
    faults.record(
        "10 host reboot: containers stopped, agents restarted", BOUND_S, recovery, len(lost), unmanaged
    )
    assert not lost, lost
    faults.reported_true()
