"""Fault 2: dockerd restarted while an agent converges a change.

The machine's dockerd is shared, so this case adds a third node to the fault stack whose
agent runs against a private dockerd (``tests/faults/own_daemon.py``). It pushes a change
to five of that node's six containers, stops the daemon as soon as the first container of
the change is created or removed, holds it down until the node reports it unreachable, and
starts it again on the same data root (containers come back by their restart policy, as
after any dockerd restart). The agent must live through it (same pid, no traceback), prune
nothing on the failed listing, and converge the change: one container per service, the
unchanged ones and the unmanaged one untouched, the reports true again on every node.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import FaultStack, service
from tests.faults.own_daemon import OwnDaemonNode
from tests.support.private_dockerd import PrivateDockerd

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 30.0
#: from dockerd's exit to the node status saying so (1.1-1.4 s measured; 7-10 s before a call
#: that found no daemon stopped the next ones' backoff retries)
REPORT_S = 6.0
SERVICES = [f"dk{i}" for i in range(1, 7)]
#: dk1 <- dk2 <- dk3 by depends_on (healthchecks): the change's pass waits between them, so
#: the restart meets it with work left to do; dk4 and dk5 change alongside, dk6 stays
CHANGED = set(SERVICES[:5])
DEPENDS = {"dk2": "dk1", "dk3": "dk2"}


def spec(name: str, node: str, env: str = "1") -> str:
    return service(name, node, env=env, depends=DEPENDS.get(name), healthcheck=name in ("dk1", "dk2", "dk3"))


@pytest.fixture
def own(faults: FaultStack, tmp_path: Path) -> Iterator[OwnDaemonNode]:
    dockerd = PrivateDockerd()
    node: OwnDaemonNode | None = None
    try:
        dockerd.start()  # skips (fails under PHRAME_REQUIRE_SERVICES=1) if it cannot run here
        node = OwnDaemonNode(faults, dockerd, tmp_path)
        node.join({name: spec(name, node.name) for name in SERVICES})
        yield node
    finally:
        try:
            if node is not None:
                node.leave()
        finally:
            dockerd.close()
    faults.settle("the stack back to its two nodes", 60)


def test_dockerd_restarted_mid_converge_loses_nothing_and_converges(faults: FaultStack, own: OwnDaemonNode):
    s, node = faults.stack, own.name
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    expected = faults.services()
    assert own.agent is not None
    pid = own.agent.pid

    def changed_ids() -> set[str]:
        return {c.id for c in faults.managed() if c.labels.get("io.phrame.service") in CHANGED}

    ids = changed_ids()
    round_ = f"restart-{time.time()}"
    for name in sorted(CHANGED):
        s.env_file(f"services/{name}.yaml").write_text(spec(name, node, env=round_))
    sha, _ = s.commit_and_push("faults: a change for the node whose dockerd restarts")

    # a container of the change created or removed: the agent is applying it
    s.wait(lambda: changed_ids() != ids, "the agent's pass to begin", 60)
    stopping = time.monotonic()
    own.dockerd.stop()  # SIGTERM: dockerd stops its containers and exits, as `systemctl restart`
    stopped = time.monotonic()
    s.wait(
        lambda: any("Docker unreachable" in e for e in s.node_status(node).get("errors", [])),
        f"{node} to report its daemon unreachable",
        REPORT_S,
    )
    said = time.monotonic()
    down = s.node_status(node)
    assert down.get("state") == "online" and not down.get("converged"), down
    assert own.agent.poll() is None, f"the agent exited while the daemon was down\n{own.log_tails()}"
    own.dockerd.start()
    at, back = time.monotonic(), time.time()
    print(
        f"\ndockerd stopped in {stopped - stopping:.2f} s, the node said unreachable "
        f"{said - stopped:.2f} s later, answered again {at - said:.2f} s after the start"
    )

    try:
        faults.verdict(
            "2 dockerd restarted while an agent converges a change",
            BOUND_S,
            at,
            before,
            unmanaged,
            expect_changed=CHANGED,
            also=lambda: s.is_converged(node, sha),  # the change applied, not the old status
            daemon_restarted={node},
            touched=lambda: own.unmanaged_touched(back),
        )
    except AssertionError as e:
        raise AssertionError(f"{e}\n{own.log_tails()}") from None
    assert own.agent.poll() is None and own.agent.pid == pid, f"the agent restarted\n{own.log_tails()}"
    assert "Traceback" not in own.log(), own.log_tails(200)
    assert faults.services() == expected, "a duplicate or an orphan container"
    everything = own.containers()
    assert len(everything) == len(SERVICES) + len(own.unmanaged), [c.name for c in everything]
    for c in everything:
        if c.labels.get("io.phrame.service") in CHANGED:
            assert f"ROUND={round_}" in c.attrs["Config"]["Env"], (c.name, c.attrs["Config"]["Env"])
