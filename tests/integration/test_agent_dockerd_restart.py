"""An agent whose Docker daemon restarts: a private dockerd (tests/support/private_dockerd.py),
never the machine's shared one, a real mosquitto and ``phrame node-agent`` as a subprocess.

The agent must stay up while the daemon is away, say so, and act as soon as the daemon
answers again: a change that arrived in between is applied then, not at the next resync.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentProcess
from tests.support.docker import busybox_image
from tests.support.mosquitto import Mosquitto
from tests.support.private_dockerd import PrivateDockerd

pytestmark = [pytest.mark.docker, pytest.mark.mqtt]
NODE_ENV = "t"


@pytest.fixture
def dockerd() -> Iterator[PrivateDockerd]:
    d = PrivateDockerd()
    try:
        d.start()  # skips (fails under PHRAME_REQUIRE_SERVICES=1) where it cannot run
        yield d
    finally:
        d.close()


def _spec(node: str, image: str, round_: str) -> dict[str, object]:
    return spec.container(
        NODE_ENV,
        "web",
        image=image,
        command=["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"],
        env={"ROUND": round_},
        restart="unless-stopped",  # back after the daemon's restart, as in production
    )


def test_a_change_made_while_the_daemon_was_down_is_applied_once_it_answers(
    mosquitto: Mosquitto, dockerd: PrivateDockerd, tmp_path: Path
):
    node = f"restart-{dockerd.tag}"
    with contextlib.closing(dockerd.client()) as client:
        image = busybox_image(client)
    watcher = ActualWatcher(mosquitto.url, node)
    first = _spec(node, image, "1")
    watcher.publish(spec.topics_doc(node, [first]))
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "DOCKER_HOST": dockerd.host,
        "PHRAME_NODE_NAME": node,
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_HEARTBEAT_S": "0.5",
        "PHRAME_STOP_TIMEOUT_S": "1",
        # no timer brings the pass: only the daemon's return can
        "PHRAME_RESYNC_S": "600",
    }
    agent = AgentProcess(env, str(tmp_path / "agent.log"))
    try:
        watcher.wait_for(lambda: (watcher.status() or {}).get("converged"), 30, "the first converge")
        dockerd.stop()
        second = _spec(node, image, "2")
        doc = spec.topics_doc(node, [second])
        doc[watcher.topics.manifest(node)] = spec.manifest([second], generation=2)
        watcher.publish(doc)
        watcher.wait_for(
            lambda: any("Docker unreachable" in e for e in (watcher.status() or {}).get("errors", [])),
            30,
            "the change's pass to fail and say the daemon is unreachable",
        )
        assert not watcher.status()["converged"], watcher.status()
        idle(watcher)  # no pass left that could meet the daemon's return by chance
        dockerd.start()
        back = time.monotonic()
        watcher.wait_for(
            lambda: (watcher.status() or {}).get("converged") and watcher.status().get("generation") == 2,
            20,
            "the change applied after the daemon came back (the resync is 600 s away)",
        )
        took = time.monotonic() - back
        with contextlib.closing(dockerd.client()) as client:
            (c,) = client.containers.list(all=True, filters={"label": f"io.phrame.node={node}"})
            assert "ROUND=2" in c.attrs["Config"]["Env"] and c.status == "running", c.attrs["Config"]["Env"]
        assert agent.proc.poll() is None, agent.log()
        print(f"\nchange applied {took:.2f} s after the daemon answered again")
    finally:
        watcher.stop()
        agent.terminate()
    assert "Traceback" not in agent.log(), agent.log()


def idle(watcher: ActualWatcher, beats: int = 6, timeout: float = 30.0) -> None:
    """Wait until ``beats`` heartbeats in a row (0.5 s apart) count no new pass: a failed
    pass's Docker retries (about 1.5 s) are over."""

    def seq() -> int:
        return int((watcher.latest.get(watcher.topics.heartbeat(watcher.node)) or {}).get("seq", 0))

    window = [seq(), watcher.passes()]

    def quiet() -> bool:
        if watcher.passes() != window[1]:
            window[:] = [seq(), watcher.passes()]
        return seq() >= window[0] + beats

    watcher.wait_for(quiet, timeout, f"{beats} heartbeats without a new pass")


def test_the_private_daemon_keeps_its_containers_across_a_restart(dockerd: PrivateDockerd):
    """The helper itself: a restart on the same data root keeps containers (by their restart
    policy) and leaves the shared daemon's bridge alone."""
    docker0 = Path("/sys/class/net/docker0").exists()
    with contextlib.closing(dockerd.client()) as client:
        image = busybox_image(client)
        c = client.containers.run(
            image, ["sleep", "600"], detach=True, restart_policy={"Name": "unless-stopped"}
        )
    dockerd.restart()
    with contextlib.closing(dockerd.client()) as client:
        again = client.containers.get(c.id)
        assert again.status == "running", again.status
    assert Path("/sys/class/net/docker0").exists() == docker0, "docker0 was deleted"
