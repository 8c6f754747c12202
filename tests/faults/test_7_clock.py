"""Fault 7: a node whose clock is 10 minutes behind: no flapping.

The first node's agent is held down and replaced by a stand-in (tests/faults/stand_in.py:
the same settings) whose wall clock is 600 s behind (``phrame node-agent`` built with a
shifted clock by tests/support/hooked_services.py; libfaketime 0.9.10 breaks Python's
``time.sleep``), so every heartbeat it sends is dated ten minutes ago. For
``SKEWED_S`` (over two of the stack's 20 s node timeouts) the test samples, one round after
another, the topic API's ``/api/nodes``, ``phrame status --json`` and placement's state
topic: the node stays online in every one (placement lists no replica of it as pending, holds
nothing, moves nothing), its dashboard chart keeps filling, and placement, SIGKILLed and
restarted halfway, does not take the node's retained heartbeat (dated ten minutes ago) for
a node long dead. Then the agent runs with the right clock again; nothing moved or restarted.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.harness import NODE_TIMEOUT_S, FaultStack
from tests.faults.stand_in import StandIn
from tests.support.hooked_services import command

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 60.0
SKEW_S = -600.0
SKEWED_S = 2 * float(NODE_TIMEOUT_S) + 5
HEARTBEAT_S = 5  # PHRAME_HEARTBEAT_S's default


def test_a_node_whose_clock_is_ten_minutes_behind_stays_online_everywhere(faults: FaultStack):
    s = faults.stack
    node = s.nodes[0]
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    assignments = s.placement.get("assignments")
    # the same agent, its clock 600 s behind; at the production interval: with the stack's 1 s
    # beats a live one would always reach a restarted placement before its first decision,
    # hiding how it reads the retained one
    skewed = StandIn(
        s,
        f"agent-{node}",
        {"PHRAME_HEARTBEAT_S": str(HEARTBEAT_S)},
        argv=command("node-agent", "--clock-offset-s", str(SKEW_S)),
    )
    samples: dict[str, int] = {"/api/nodes": 0, "phrame status": 0, "placement": 0}
    try:
        faults.kill(f"agent-{node}")  # held by the supervisor while the stand-in runs
        skewed.start()

        def status_row() -> dict:
            # --timeout 10: the listen may cover the skewed node's 5 s interval (it ends as
            # soon as every node is heard)
            _, doc = faults.status_json(timeout=10)
            return {n["node"]: n for n in doc.get("nodes", [])}.get(node) or {}

        def skewed_and_online() -> bool:
            row = status_row()
            offset = row.get("clock_offset_s")
            return row.get("state") == "online" and offset is not None and abs(offset - SKEW_S) < 5

        s.wait(skewed_and_online, f"phrame status to show {node} online with its clock 600 s behind", 60)
        faults.settle("the skewed agent converged", 60)
        # no flapping: every view says online at every sample, for over two node timeouts
        start = time.monotonic()
        restarted = False
        while time.monotonic() - start < SKEWED_S:
            assert skewed.proc is not None and skewed.proc.poll() is None, (
                f"the skewed agent exited\n{s.log_tails()}"
            )
            if not restarted and time.monotonic() - start > SKEWED_S / 2:
                # a (re)started placement first reads the node's retained heartbeat, dated
                # 10 minutes ago: that alone must not make it offline or move its replicas
                s.wait((s.state / "run" / "placement.pid").exists, "placement running", 30)
                placement_log = s.state / "logs" / "placement.log"
                log_from = placement_log.stat().st_size
                faults.kill("placement")
                killed_at = time.time()
                faults.release("placement")
                restarted = True

                def decided() -> bool:  # the new placement's first state (its ts: when computed)
                    return float(s.placement.get("ts") or 0) > killed_at  # noqa: B023 (called at once)

                s.wait(decided, "the restarted placement's first decision", 30)
                with placement_log.open("rb") as f:
                    f.seek(log_from)
                    log = f.read().decode(errors="replace")
                # it waits for a live heartbeat of the node, unless one came while it read the
                # retained messages (a loaded machine); either way it never counts it offline
                waited = [line for line in log.splitlines() if "for a live heartbeat of" in line]
                assert not waited or node in waited[-1], f"placement waited for others only: {waited}"
            row = {n["node"]: n for n in s.api("api/nodes")["nodes"]}[node]
            assert row["online"], f"/api/nodes flapped: {row}"
            # its chart: heartbeats kept by when the API received them, not emptied by their ts
            assert row["history"] and time.time() - row["history"][-1]["at"] < 10, row["history"][-3:]
            detail = s.api(f"api/nodes/{node}")
            assert detail["online"], f"/api/nodes/{node} flapped: {detail['state']}, {detail['reason']}"
            samples["/api/nodes"] += 1
            st = status_row()
            assert st.get("state") == "online", f"phrame status flapped: {st}"
            samples["phrame status"] += 1
            placed = s.placement
            pending = [p for p in placed.get("pending") or [] if p.get("node") == node]
            assert not pending and not placed.get("held"), f"placement counts {node} offline: {placed}"
            assert placed.get("assignments") == assignments, f"placement moved replicas: {placed}"
            samples["placement"] += 1
        print(f"\nFAULT 7 samples over {SKEWED_S:g} s, all online: {samples}")
    finally:
        skewed.stop()  # by its pid: SIGTERM, as a person stopping it to fix the clock
        at = time.monotonic()
        faults.release(f"agent-{node}")  # the supervisor runs it again, with the right clock
    assert min(samples.values()) >= 5, samples
    # the bound: the supervisor's restart backoff (1 s after a first crash) and one agent pass
    faults.verdict("7 node clock 10 minutes behind", BOUND_S, at, before, unmanaged)
