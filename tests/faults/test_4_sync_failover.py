"""Fault 12: the active config-sync SIGKILLed while a commit lands; its standby takes over.

The stack's config-sync is held down and replaced by two stand-ins with the same settings
plus a lease (``PHRAME_HA_LEASE_S``): the active on a port of its own, the standby on the
stack's config-sync port with the standby's broker account and a clone of its own, so the
git hook's webhook reaches the standby. The active is SIGKILLed and a commit is pushed at
once: the standby answers the hook 202 while it still stands by, takes the lease once a whole
lease passed without a renewal, reads back what is published and deploys the commit; the
changed node's manifest is published once (its generation advances by one), the other's not
at all. Then the stack is put back as it was, and shown to be: the stand-ins stopped, their
lease cleared from the broker, the stack's own config-sync (no lease) started again on the
head the standby deployed, reporting that deployment converged, with nothing published again.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
import urllib.request
from datetime import datetime
from typing import Any

import pytest

from phrame.mqtt import MqttClient
from phrame.mqtt.broker_config import STANDBY_ACCOUNT
from phrame.mqtt.messages import Message
from schemas import Topics
from tests.faults.harness import FaultStack, service
from tests.faults.stand_in import StandIn
from tests.support.services import free_port

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
BOUND_S = 30.0
LEASE_S = 3.0
#: the stack's own config-sync started again (the supervisor's backoff, a start on two busy
#: cores) until it reports the head deployed
RESTORED_S = 60.0
FAULT = "12 active config-sync SIGKILL while a commit lands, standby takes over"
LEASE = Topics().lease("config-sync")


def readyz(port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc
    except (OSError, ValueError):
        return {}


def test_active_config_sync_killed_standby_deploys_the_commit_once(faults: FaultStack):
    s = faults.stack
    first = s.nodes[0]
    faults.settle("converged before the fault", 60)
    before, unmanaged = faults.snapshot(), faults.unmanaged_state()
    lease = {"PHRAME_HA_LEASE_S": str(LEASE_S)}
    port_a = free_port()
    active = StandIn(
        s, "config-sync", lease | {"PHRAME_INSTANCE_ID": "fault-a", "PHRAME_LISTEN": f"127.0.0.1:{port_a}"}
    )
    standby_state = s.root / "standby-state"
    standby = StandIn(
        s,
        "config-sync",
        lease
        | s.login_env(STANDBY_ACCOUNT)
        | {"PHRAME_INSTANCE_ID": "fault-b", "PHRAME_STATE_DIR": str(standby_state)},
    )
    standby.log = standby.log.with_name("config-sync-standby.stand-in.log")
    manifests: list[tuple[str, int]] = []
    lock = threading.Lock()
    listening = True  # the stack's watcher keeps this subscription: only this case's messages

    def on_manifest(msg: Message) -> None:
        if listening and msg.payload and not msg.retain:  # live publications only
            with lock:
                manifests.append((msg.topic.split("/")[3], json.loads(msg.payload)["generation"]))

    faults.kill("config-sync")  # held by the supervisor while the stand-ins run
    try:
        active.start()
        s.wait(lambda: readyz(port_a) == {"ready": True, "role": "active"}, "the active to be ready", 60)
        standby.start()
        s.wait(lambda: readyz(s.sync_port).get("role") == "standby", "the standby to stand by", 60)
        assert s.mqtt is not None
        s.mqtt.subscribe("phrame/desired/nodes/+/manifest", on_manifest)
        generations = _retained_generations(faults)

        s.git("pull", "--quiet", "--rebase", "origin", "main")  # placement's commits, if any
        s.env_file("services/fa1.yaml").write_text(service("fa1", first, env="failover"))
        s.git("add", "--all")
        s.git("commit", "--quiet", "-m", "faults: change fa1 (the active config-sync dies)")
        at, killed_at = time.monotonic(), time.time()
        assert active.stop(signal.SIGKILL) == -signal.SIGKILL
        # the hook's webhook reaches the standby: 202, queued until it is active
        said = s.git("push", "origin", "HEAD:main")
        print(f"\nthe hook's webhook answered while the standby was {readyz(s.sync_port).get('role')}")
        assert "config-sync notified (202)" in said, said
        s.wait(lambda: readyz(s.sync_port).get("role") == "active", "the standby to take over", 30)
        polled = time.monotonic() - at  # as the test saw it: after the push and a poll of /readyz
        said_b = [line for line in standby.text().splitlines() if "lease" in line or "active" in line]
        print("\n".join(said_b[-8:]))
        handover = _took_over_at(standby.text()) - killed_at  # as the standby says it (its log)
        print(
            f"\nconfig-sync handover after SIGKILL of the active: {handover:.2f} s "
            f"(seen by the test after {polled:.2f} s; lease {LEASE_S:g} s)"
        )
        # at most a lease after the last renewal it heard (sent at most a third of a lease
        # before the kill), the half-second settle and a loop tick; a loaded machine (the suite
        # shares two cores) adds its scheduling delays
        assert 0 < handover <= LEASE_S + 2.0, f"handover {handover:.2f} s, lease {LEASE_S} s"
        faults.verdict(FAULT, BOUND_S, at, before, unmanaged, expect_changed={"fa1"})
        with lock:
            seen = list(manifests)
        # no duplicate publication: the changed node's manifest once, one generation up
        assert seen == [(first, generations[first] + 1)], seen
    finally:
        try:
            active.stop(signal.SIGKILL)
            standby.stop()
            _clear_lease(faults)
        finally:  # whatever failed above, the stack gets its own config-sync back
            faults.release("config-sync")
    _restored(faults, manifests, lock)
    listening = False
    shutil.rmtree(standby_state, ignore_errors=True)


def _restored(faults: FaultStack, manifests: list[tuple[str, int]], lock: threading.Lock) -> None:
    """The stack as it was before the case: its own config-sync (no lease) back on the head
    the standby deployed, reporting it converged (what the next case waits for), the lease
    gone from the broker, and nothing published again by the restart."""
    s = faults.stack
    with lock:
        published = len(manifests)
    head = s.remote_head()
    s.wait(lambda: readyz(s.sync_port).get("ready") is True, "the stack's config-sync to be back", RESTORED_S)
    s.wait(
        lambda: s.commit_status(head) == "success",
        f"the stack's own config-sync to report {head[:12]} deployed",
        RESTORED_S,
    )
    faults.settle("converged with the stack's own config-sync", RESTORED_S)
    status = s.sync_status()
    assert status["role"] == "active" and status["lease"] is None, status.get("lease")
    with lock:
        assert len(manifests) == published, manifests[published:]
    assert s.mqtt is not None
    assert LEASE not in s.mqtt.collect_retained(LEASE, timeout=2)


def _took_over_at(log: str) -> float:
    """When the standby's log says it took the lease (its text format: local time, ms)."""
    (line,) = [line for line in log.splitlines() if "active: holding the config-sync lease" in line]
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _clear_lease(faults: FaultStack) -> None:
    """Clear the stand-ins' retained lease, as the stack's config-sync account (the one that
    may write it): the stack runs one config-sync without a lease, as before the case."""
    client = MqttClient(faults.stack.login("config-sync"), f"faults-lease-clear-{faults.run[-8:]}")
    client.start(timeout=10)
    try:
        client.publish_batch([(LEASE, None)], timeout=10)  # acknowledged: not lost in the stop
    finally:
        client.stop()


def _retained_generations(faults: FaultStack) -> dict[str, int]:
    mqtt = faults.stack.mqtt
    assert mqtt is not None
    held = mqtt.collect_retained("phrame/desired/nodes/+/manifest", timeout=5)
    return {t.split("/")[3]: json.loads(p)["generation"] for t, p in held.items()}
