"""Fault 9: a network partition between one node's agent and the broker, then healed.

The node's agent talks to the broker through a proxy the test controls (a stand-in for the
stack's agent, same settings, broker URL pointing at the proxy, 10 s keepalive so it loses
the broker within the partition); placement runs as a stand-in with a 10 s grace period
(``PHRAME_RESCHEDULE_AFTER_S``; the node timeout stays the stack's 20 s). The partition is
silence both ways. While it lasts, the node's containers keep running, untouched by its
agent; the node is reported offline once its heartbeat is ``PHRAME_NODE_TIMEOUT_S`` old,
and placement moves its label-placed replicas only when it has been offline for the grace
period. After the heal nothing moves back: the node's agent removes the replicas that moved
away (its manifest no longer lists them) and keeps everything else.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from typing import Any

import pytest

from phrame.mqtt import Message
from tests.faults.harness import LOOP, NODE_TIMEOUT_S, FaultStack
from tests.faults.stand_in import StandIn
from tests.support.tcp_proxy import PartitionProxy

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
TIMEOUT_S = float(NODE_TIMEOUT_S)
GRACE_S = 10.0
KEEPALIVE_S = 10
#: from the heal: the agent's reconnect backoff (at most 30 s, PHRAME_MQTT_RECONNECT_MAX_S)
#: plus a pass, placement's pass and a deploy
BOUND_S = 60.0
SLACK_S = 0.5  # the watcher and placement hear a heartbeat a few ms apart
ROAM = (
    f'name: roam\nimage: phrame-quickstart/busybox:1\ncommand: [sh, -c, "{LOOP}"]\n'
    "replicas: 2\nplacement:\n  labels:\n    pool: dev\n"
)


def roam_on(faults: FaultStack) -> Counter[str]:
    """Running containers of roam per node."""
    return Counter(
        c.labels["io.phrame.node"]
        for c in faults.managed()
        if c.labels.get("io.phrame.service") == "roam" and c.status == "running"
    )


def assigned(faults: FaultStack, service: str) -> list[Any]:
    return list((faults.stack.placement.get("assignments") or {}).get(service) or [])


def test_a_partitioned_node_keeps_its_containers_and_loses_its_replicas_only_after_the_grace(
    faults: FaultStack,
):
    s = faults.stack
    faults.settle("converged before the fault", 60)
    s.env_file("services/roam.yaml").write_text(ROAM)
    s.commit_and_push("faults: roam, two replicas placed by labels")
    s.wait(
        lambda: len(assigned(faults, "roam")) == 2 and None not in assigned(faults, "roam"), "roam placed", 30
    )
    faults.settle("roam deployed", 60)
    # partition the node carrying more of roam (placement chose; the other node can take it all)
    x = max(reversed(s.nodes), key=lambda n: assigned(faults, "roam").count(n))
    (y,) = [n for n in s.nodes if n != x]
    proxy = PartitionProxy(s.broker_port)
    url = f"mqtt://127.0.0.1:{proxy.port}"
    agent = StandIn(
        s, f"agent-{x}", {"PHRAME_DESIRED_MQTT_URL": url, "PHRAME_MQTT_KEEPALIVE_S": str(KEEPALIVE_S)}
    )
    placement = StandIn(s, "placement", {"PHRAME_RESCHEDULE_AFTER_S": str(GRACE_S)})
    beats: list[float] = []

    def heard(_msg: Message) -> None:
        beats.append(time.monotonic())

    assert s.mqtt is not None
    s.mqtt.subscribe(f"phrame/actual/nodes/{x}/heartbeat", heard)
    try:
        faults.kill(f"agent-{x}")
        agent.start()
        n = len(beats)
        s.wait(lambda: proxy.accepted and len(beats) > n + 1, f"{x}'s agent heard through the proxy", 30)
        faults.kill("placement")
        since = time.time()
        placement.start()
        s.wait(lambda: s.placement.get("ts", 0) > since, "the stand-in placement's first state", 30)
        faults.settle("converged with the stand-ins", 60)
        before, unmanaged = faults.snapshot(), faults.unmanaged_state()
        on_x = {cid: v for cid, v in before.items() if v[0].endswith(f"@{x}")}
        roam_before = roam_on(faults)

        proxy.partition()
        seen: dict[str, float] = {}

        def watch() -> bool:
            now = time.monotonic()
            rows = {r["node"]: r for r in s.api("api/nodes")["nodes"]}
            if not rows[x]["online"]:
                seen.setdefault("offline", now)
            if any(p["node"] == x for p in s.placement.get("pending") or []):
                seen.setdefault("pending", now)
            if x not in assigned(faults, "roam"):
                seen.setdefault("moved", now)
            return "moved" in seen and roam_on(faults)[y] == 2

        s.wait(watch, f"roam moved off {x} and running on {y}", TIMEOUT_S + GRACE_S + 30)
        s.wait(lambda: "disconnected from" in agent.text(), f"{x}'s agent to notice it lost the broker", 30)
        # the partitioned node's containers all still run, roam's too: its agent removed nothing
        still = faults.snapshot()
        assert {cid: still.get(cid) for cid in on_x} == on_x, f"{x}'s containers changed during the partition"
        assert roam_on(faults)[x] == roam_before[x] > 0
        _code, doc = faults.status_json()  # phrame status says so too (it judges by the same rule)
        assert {r["node"]: r["state"] for r in doc["nodes"]}[x] == "offline", doc
        last = max(beats)  # the last heartbeat through (what was sent since waits in the proxy)
        offline_after, moved_after = seen["offline"] - last, seen["moved"] - last
        print(
            f"\npartition: {x} reported offline {offline_after:.1f} s after its last heartbeat "
            f"(timeout {TIMEOUT_S:g} s), pending from {seen['pending'] - last:.1f} s, roam moved "
            f"{moved_after:.1f} s after it (timeout + grace {TIMEOUT_S + GRACE_S:g} s)"
        )
        assert TIMEOUT_S - SLACK_S <= offline_after <= TIMEOUT_S + 5
        assert seen["pending"] < seen["moved"]  # the grace period was counted down, visibly
        assert TIMEOUT_S + GRACE_S - SLACK_S <= moved_after <= TIMEOUT_S + GRACE_S + 10
        moved = assigned(faults, "roam")

        proxy.heal()
        healed = time.monotonic()
        faults.verdict(
            "9 network partition agent-broker, then healed",
            BOUND_S,
            healed,
            before,
            unmanaged,
            # roam's replica left the node; worker (spread: one per node) had nowhere to go and
            # is placed on the node again once it is back: a new container there
            expect_changed={"roam", "worker"},
            also=lambda: roam_on(faults) == Counter({y: 2}) and None not in assigned(faults, "worker"),
        )
        # nothing moves back: a decision taken after the heal (on a commit pushed after it)
        # keeps roam where it went
        readme = s.clone / "README.md"
        readme.write_text(readme.read_text() + "\nA line pushed after the partition healed.\n")
        sha, _ = s.commit_and_push("faults: a commit after the partition")
        s.wait(lambda: s.placement.get("base") == sha, "placement to decide on the commit after the heal", 30)
        assert assigned(faults, "roam") == moved == [y, y], s.placement
        assert roam_on(faults) == Counter({y: 2})
        # the returning node's agent removed what its manifest no longer lists (roam; worker
        # until placement placed it there again) and nothing else, anywhere
        after = faults.snapshot()
        went = {f"roam@{x}", f"worker@{x}"}
        kept = {cid: v for cid, v in before.items() if v[0] not in went}
        assert {cid: after.get(cid) for cid in kept} == kept
        workers = [cid for cid, v in after.items() if v[0] == f"worker@{x}"]
        assert len(workers) == 1, after
        replaced = workers[0] not in before
        print(f"partition: after the heal {x}'s worker container was {'replaced' if replaced else 'kept'}")
    finally:
        proxy.heal()
        placement.stop()
        faults.release("placement")
        agent.stop(signal.SIGKILL)  # no "offline": the stack's agent takes over the session
        faults.release(f"agent-{x}")
        proxy.close()
    faults.settle("converged with the stack's own agent and placement back", 60)
    s.env_file("services/roam.yaml").unlink()
    s.commit_and_push("faults: roam removed")
    s.wait(lambda: not roam_on(faults), "roam removed", 60)
    faults.settle("converged after the case", 60)
