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


@pytest.mark.slow
def test_a_change_made_while_the_daemon_was_down_is_applied_once_it_answers(
    mosquitto: Mosquitto, dockerd: PrivateDockerd, tmp_path: Path
):
    node = f"restart-{dockerd.tag}"
    with contextlib.closing(dockerd.client()) as client:
        image = busybox_image(client)
    watcher = ActualWatcher(mosquitto.url, node)
    first = _spec(node, image, "1")
    watcher.publish(spec.topics_doc(node, [first]))
    agent = AgentProcess(_env(node, dockerd, mosquitto, tmp_path), str(tmp_path / "agent.log"))
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


@pytest.fixture
def live_dockerd() -> Iterator[PrivateDockerd]:
    d = PrivateDockerd(live_restore=True)
    try:
        d.start()
        yield d
    finally:
        d.close()


@pytest.mark.slow
def test_an_idle_agent_says_at_once_that_its_daemon_went_away_and_came_back(
    mosquitto: Mosquitto, live_dockerd: PrivateDockerd, tmp_path: Path
):
    """With --live-restore the containers run on while dockerd restarts, so no die event
    comes, and the resync is 600 s away: the status must not keep saying converged while
    the daemon is gone. The event stream's end brings a pass, which fails and says why; its
    return brings another, converged, that restarted nothing."""
    dockerd, node = live_dockerd, f"idle-{live_dockerd.tag}"
    with contextlib.closing(dockerd.client()) as client:
        image = busybox_image(client)
    watcher = ActualWatcher(mosquitto.url, node)
    watcher.publish(spec.topics_doc(node, [_spec(node, image, "1")]))
    agent = AgentProcess(_env(node, dockerd, mosquitto, tmp_path), str(tmp_path / "agent.log"))
    try:
        watcher.wait_for(lambda: (watcher.status() or {}).get("converged"), 30, "the first converge")
        with contextlib.closing(dockerd.client()) as client:
            (before,) = client.containers.list(filters={"label": f"io.phrame.node={node}"})
        idle(watcher)
        dockerd.stop()
        gone = time.monotonic()
        watcher.wait_for(
            lambda: any("Docker unreachable" in e for e in (watcher.status() or {}).get("errors", [])),
            10,
            "the status to say the daemon is unreachable (the resync is 600 s away)",
        )
        said = time.monotonic() - gone
        assert watcher.status()["state"] == "online" and not watcher.status()["converged"]
        idle(watcher)
        dockerd.start()
        back = time.monotonic()
        watcher.wait_for(lambda: watcher.status()["converged"], 10, "converged again, the daemon back")
        print(
            f"\nsaid unreachable {said:.2f} s after dockerd exited, converged {time.monotonic() - back:.2f} s after it answered"
        )
        with contextlib.closing(dockerd.client()) as client:
            (after,) = client.containers.list(filters={"label": f"io.phrame.node={node}"})
        assert (
            after.id == before.id and after.attrs["State"]["StartedAt"] == before.attrs["State"]["StartedAt"]
        )
        assert agent.proc.poll() is None, agent.log()
    finally:
        watcher.stop()
        agent.terminate()


def _env(node: str, dockerd: PrivateDockerd, mosquitto: Mosquitto, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "DOCKER_HOST": dockerd.host,
        "PHRAME_NODE_NAME": node,
        "PHRAME_STATE_DIR": str(tmp_path / "state"),
        "PHRAME_DESIRED_MQTT_URL": mosquitto.url,
        "PHRAME_HEARTBEAT_S": "0.5",
        "PHRAME_STOP_TIMEOUT_S": "1",
        # no timer brings a pass: only what the agent sees of the daemon can
        "PHRAME_RESYNC_S": "600",
    }


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


@pytest.mark.slow
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
