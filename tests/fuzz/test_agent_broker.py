"""A real node agent (``phrame node-agent``) on a real mosquitto under a batch of hostile
desired-plane payloads and restart commands: it stays alive, keeps heartbeating, names
each refused topic in its status, and still converges a valid process published after.

The batch comes from the same generators as the pure fuzz tests (``tests.fuzz.payloads``)
with a printed seed (``FUZZ_SEED`` replays one). Only payloads the agent must refuse are
sent, so nothing here creates Docker objects or pulls an image.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from node_agent.desired import DesiredStore
from schemas import Topics
from tests.fuzz.payloads import encode, hostile_message, mutate
from tests.support import agent_support as spec
from tests.support.agent_support import ActualWatcher, AgentEnv, AgentProcess

T = Topics()
BATCH = int(os.environ.get("FUZZ_AGENT_BATCH", "300"))


@pytest.fixture
def env(docker_client, docker_cleanup) -> Iterator[AgentEnv]:
    yield AgentEnv(docker_client, "unused:1", docker_cleanup)  # no container is ever desired


@pytest.fixture
def watcher(mosquitto, env: AgentEnv) -> Iterator[ActualWatcher]:
    w = ActualWatcher(mosquitto.url, env.node)
    yield w
    w.stop()


def refused_batch(rng: random.Random, node: str, env: str) -> tuple[list[tuple[str, bytes]], dict[str, str]]:
    """``BATCH`` hostile messages the agent must refuse, and the error each of its own
    topics must show after the batch (the last message of a topic decides)."""
    mine = f"phrame/desired/nodes/{node}/"  # what the agent subscribes to
    batch: list[tuple[str, bytes]] = []
    while len(batch) < BATCH:
        topic, payload = hostile_message(rng, node, env=env)
        if not topic.startswith(mine):
            batch.append((topic, payload))  # not its topic: never seen, never an error
            continue
        alone = DesiredStore(T, node)
        alone.apply(topic, payload)
        if topic in alone.errors():  # a mutation that left a valid spec would really run
            batch.append((topic, payload))
    replay = DesiredStore(T, node)
    for topic, payload in batch:
        if topic.startswith(mine):
            replay.apply(topic, payload)
    return batch, replay.errors()


def heartbeat_seq(watcher: ActualWatcher) -> int:
    return int((watcher.latest.get(T.heartbeat(watcher.node)) or {}).get("seq", -1))


def test_hostile_payloads_leave_the_agent_alive_reporting_and_converging(
    env: AgentEnv, mosquitto, watcher: ActualWatcher, tmp_path: Path
) -> None:
    seed = int(os.environ.get("FUZZ_SEED", random.randrange(2**32)))
    print(f"FUZZ_SEED={seed}")  # shown with a failure: replays this batch
    rng = random.Random(seed)
    batch, expected = refused_batch(rng, env.node, env.env)
    cmd = T.restart(env.node, f"{env.env}.web.0")  # no such container: refused either way
    commands = [(cmd, encode(mutate({"reason": "fuzz"}, rng), rng)) for _ in range(20)]
    agent = AgentProcess(
        env.process_env(str(tmp_path / "state"), PHRAME_DESIRED_MQTT_URL=mosquitto.url),
        str(tmp_path / "agent.log"),
    )
    pid = None
    try:
        watcher.wait_for(lambda: heartbeat_seq(watcher) >= 0, 30, "a first heartbeat")
        watcher.client.publish_batch(batch, timeout=120)
        watcher.client.publish_batch(commands, retain=False)
        watcher.wait_for(
            lambda: set(expected.values()) <= set((watcher.status() or {}).get("errors") or []),
            60,
            f"each refused topic on the status (seed {seed})",
        )
        assert agent.proc.poll() is None, agent.log()
        seen = heartbeat_seq(watcher)
        watcher.wait_for(lambda: heartbeat_seq(watcher) >= seen + 2, 10, "heartbeats after the batch")

        job = spec.process(env.env, "job", ["sleep", "600"])
        watcher.publish(spec.topics_doc(env.node, [job]))
        item = lambda: watcher.item("processes", job["name"]) or {}  # noqa: E731
        watcher.wait_for(
            lambda: item().get("state") == "running", 30, f"the valid process running (seed {seed})"
        )
        pid = item().get("pid")
        watcher.wait_for(lambda: bool((watcher.status() or {}).get("converged")), 30, "converged")
        assert agent.proc.poll() is None, agent.log()
        assert "Traceback" not in agent.log(), agent.log()[-5000:]
    finally:
        code = agent.terminate()
        if pid:  # the agent leaves its processes running when it stops: ours to end
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
    assert code == 0, agent.log()[-5000:]
