"""Fault 3: a node agent SIGKILLed mid-converge five times in a row.

Each round pushes a change of five containers on the first node and kills its agent as soon
as the pass has visibly begun (a container of the change replaced); the supervisor brings it
back. At the end: every service once, no duplicate, no orphan, nothing else restarted.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.harness import FaultStack, service

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 90.0
ROUNDS = 5
CHANGED = {f"fa{i}" for i in range(1, 6)}


def test_an_agent_killed_mid_converge_five_times_leaves_no_duplicate_or_orphan(faults: FaultStack):
    s = faults.stack
    node = s.nodes[0]
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    expected = faults.services()
    at = time.monotonic()
    for round_ in range(ROUNDS):
        agent = s.state / "run" / f"agent-{node}.pid"
        s.wait(agent.exists, f"round {round_}: the agent restarted by the supervisor", 60)

        def changed_ids() -> set[str]:
            return {c.id for c in faults.managed() if c.labels.get("io.phrame.service") in CHANGED}

        ids = changed_ids()
        for name in sorted(CHANGED):
            s.env_file(f"services/{name}.yaml").write_text(service(name, node, env=f"kill{round_}-{at}"))
        s.commit_and_push(f"faults: round {round_} of the agent kills")

        # a container of the change created or removed: the pass is on
        s.wait(lambda: changed_ids() != ids, f"round {round_}: the agent's pass to begin", 60)  # noqa: B023
        faults.kill(f"agent-{node}")
        at = time.monotonic()
        faults.release(f"agent-{node}")
    faults.verdict(
        f"3 node agent SIGKILL mid-converge x{ROUNDS}", BOUND_S, at, before, unmanaged, expect_changed=CHANGED
    )
    assert faults.services() == expected, "a duplicate or an orphan container"
