"""The whole loop on a broker that is three machines: a real NATS cluster (JetStream, its MQTT
listener), config-sync, two real node agents on the real daemon, a real git remote.

Five times, a commit changes a service on each node, and the node leading the
retained-message stream (``$MQTT_rmsgs``) is SIGKILLed in the middle of the publication
(after the items, before the manifests). NATS may then acknowledge a retained update and
never store it, and serve an older set from a surviving or restarted node for a while.
Each time: every node converges on the commit, every node of the cluster serves exactly
what config-sync published once settled (no stale retained topic), and the deployment
turns green only once the containers run the commit. The recovery (kill → all of that) is
written as a fault case (``out/faults.json``, the table in docs/faults.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.mqtt import MqttClient, MqttError, MqttSettings
from schemas import Topics
from tests.faults.harness import FaultRecord, write_record
from tests.support.agent_support import AgentEnv, AgentProcess
from tests.support.nats import NatsCluster, NatsNode
from tests.support.sync_support import ConfigRemote, settings_for
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.docker,
    pytest.mark.mqtt,
    pytest.mark.slow,
    pytest.mark.timeout(1100),
    pytest.mark.skipif(
        os.environ.get("PHRAME_NATS_LOOP") != "1",
        reason="opt-in (PHRAME_NATS_LOOP=1) until shown reliable: nats-server 2.15.1 feeds each "
        "server's retained index through one R1 consumer hosted on the node that led $MQTT_rmsgs "
        "when that server started, so a server serves a frozen retained set until its consumer's "
        "host is back, and JetStream requests time out (5 s) through every election; the rounds "
        "passed in separate runs but not yet in three consecutive full runs on this shared machine",
    ),
]
T = Topics()
ROUNDS = 5
BOUND_S = 120.0
RETAINED = "$MQTT_rmsgs"


def mqtt(url: str) -> MqttSettings:
    return MqttSettings(url=url, protocol="auto", reconnect_max_s=1)


def service(name: str, node: str, image: str, version: int) -> str:
    return (
        f"name: {name}\nimage: {image}\ncommand: [sleep, '3600']\nrestart: 'no'\n"
        f"stop_grace_period: 1s\nenv:\n  VERSION: '{version}'\nplacement:\n  node: {node}\n"
    )


def repo(env: AgentEnv, nodes: list[str], version: int) -> dict[str, str]:
    files = {f"nodes/{n}.yaml": f"name: {n}\n" for n in nodes}
    files[f"environments/{env.env}/environment.yaml"] = f"name: {env.env}\n"
    for i, node in enumerate(nodes):
        files[f"environments/{env.env}/services/s{i}.yaml"] = service(f"s{i}", node, env.image, version)
    return files


def versions(client: docker.DockerClient, nodes: list[str]) -> dict[str, str]:
    """node -> the VERSION its running managed container has ("" when none runs)."""
    out = {n: "" for n in nodes}
    for node in nodes:
        for c in client.containers.list(filters={"label": f"io.phrame.node={node}"}, ignore_removed=True):
            env = dict(e.split("=", 1) for e in c.attrs["Config"]["Env"] if "=" in e)
            out[node] = env.get("VERSION", "")
    return out


def deploy(client: MqttClient, env: str) -> dict[str, Any]:
    try:  # during an election NATS refuses new subscriptions for a while (SUBACK 0x80)
        raw = client.collect_retained(T.env_deploys(env), settle=0.2).get(T.env_deploys(env))
    except MqttError:
        return {}
    records = json.loads(raw)["deploys"] if raw else []
    return records[0] if records else {}


def whole(cluster: NatsCluster) -> bool:
    """The retained stream has a leader and every other node is a current replica."""
    leader = cluster.leader(RETAINED)
    if leader is None:
        return False
    group = (cluster.streams(leader).get(RETAINED) or {}).get("cluster") or {}
    replicas = group.get("replicas") or []
    return len(replicas) == len(cluster.nodes) - 1 and all(r.get("current") for r in replicas)


def stale_on(node: NatsNode, published: dict[str, bytes | None]) -> list[str]:
    """The topics ``node`` serves otherwise than config-sync published them."""
    client = MqttClient(mqtt(node.url), f"stale-check-{node.name}-{time.monotonic_ns()}")
    try:
        client.start(timeout=10)
        held = client.collect_retained(T.desired_filter(), settle=0.3, timeout=20)
    except MqttError as e:  # a node not serving yet is not settled
        return [f"<{node.name} unreadable: {e}>"]
    finally:
        client.stop()
    return sorted(t for t, p in published.items() if held.get(t) != p)


def test_stream_leader_killed_mid_change_five_times(
    tmp_path: Path, docker_client: docker.DockerClient, env: AgentEnv
) -> None:
    cluster = NatsCluster(3).start()
    nodes = [env.node, f"{env.node}-b"]
    remote = ConfigRemote(tmp_path / "git")
    remote.commit("v0", files=repo(env, nodes, 0))
    agents: list[AgentProcess] = []
    kills: list[float] = []
    armed = threading.Event()

    def kill_the_leader() -> None:
        """config-sync's hook between a commit's items and its manifests."""
        if not armed.is_set():
            return
        armed.clear()
        leader = wait_for(
            lambda: cluster.leader(RETAINED), "a leader of the retained stream", 30, interval=0.1
        )
        assert leader is not None
        kills.append(time.monotonic())
        cluster.kill(leader)
        killed.append(leader)

    killed: list[NatsNode] = []
    base = settings_for(
        remote, tmp_path / "sync", cluster.urls, poll_s=3600, debounce_s=0,
        deploy_timeout_s=BOUND_S, deploy_settle_s=0.5, anti_entropy_s=5,
    )  # fmt: skip
    settings = replace(base, mqtt=mqtt(cluster.urls), actual_mqtt=mqtt(cluster.urls))
    svc = ConfigSync(settings, reporter=LocalReporter(), before_manifests=kill_the_leader)
    watcher = MqttClient(mqtt(cluster.urls), "nats-loop-watcher")
    recoveries: list[float] = []
    try:
        for node in nodes:
            agents.append(
                AgentProcess(
                    env.process_env(
                        str(tmp_path / f"agent-{node}"),
                        PHRAME_NODE_NAME=node,
                        PHRAME_DESIRED_MQTT_URL=cluster.urls,
                        PHRAME_MQTT_PROTOCOL="auto",
                        PHRAME_MQTT_RECONNECT_MAX_S="1",
                        PHRAME_SHARED_DAEMON="1",
                    ),
                    str(tmp_path / f"agent-{node}.log"),
                )
            )
        svc.start()
        watcher.start(timeout=120)  # the cluster creates its MQTT streams first (slow on a loaded machine)

        def agent_logs() -> str:
            return "\n".join(a.log()[-3000:] for a in agents)

        wait_for(
            lambda: versions(docker_client, nodes) == {n: "0" for n in nodes},
            "v0 running on both nodes",
            240,  # the cluster's first MQTT streams and sessions, on a loaded machine
            observe=agent_logs,
        )
        for version in range(1, ROUNDS + 1):
            # all three nodes back in the stream's group, caught up: then the round's kill
            wait_for(
                lambda: whole(cluster), f"round {version}: {RETAINED} led, with every replica current", 60
            )
            armed.set()
            sha = remote.commit(f"v{version}", files=repo(env, nodes, version))
            svc.trigger_sync("main")
            wait_for(lambda n=version: len(killed) == n, f"round {version}: the leader killed mid-change", 60)
            # a supervisor brings the killed node back (systemd Restart=always, a pod restart):
            # here once the survivors elected a new leader. NATS needs it back: every server
            # reads retained updates through one R1 consumer, hosted on the node that led the
            # stream when that server started; until its host returns the server serves a
            # frozen retained set (see docs/operations/broker.md, NATS)
            back = killed[-1]
            wait_for(
                lambda b=back: cluster.leader(RETAINED) not in (None, b),
                f"round {version}: a new leader of {RETAINED}",
                60,
                interval=0.2,
            )
            cluster.start_node(back)
            green_too_early: list[dict[str, str]] = []

            def settled(
                sha: str = sha, version: int = version, early: list[dict[str, str]] = green_too_early
            ) -> bool:
                record = deploy(watcher, env.env)
                running = versions(docker_client, nodes)
                if record.get("commit") == sha and record.get("state") == "converged":
                    if running != {n: str(version) for n in nodes}:
                        early.append(running)
                    published = dict(svc.publisher._sent)  # what config-sync holds the broker to
                    return not any(stale_on(n, published) for n in cluster.nodes if n.is_running)
                return False

            wait_for(settled, f"round {version}: converged and no stale topic", BOUND_S, interval=1.0)
            recoveries.append(time.monotonic() - kills[-1])
            print(f"round {version}: settled {recoveries[-1]:.1f} s after the kill", flush=True)
            assert not green_too_early, f"green before the containers ran v{version}: {green_too_early}"
            # the restarted node serves what was published too (checked by settled() as well)
            wait_for(
                lambda b=back: not stale_on(b, dict(svc.publisher._sent)),
                f"round {version}: the restarted {back.name} serves what was published",
                BOUND_S,
                interval=1.0,
            )
    finally:
        watcher.stop()
        svc.stop()
        for agent in agents:
            agent.terminate()
        for node in nodes:
            for c in docker_client.containers.list(all=True, filters={"label": f"io.phrame.node={node}"}):
                c.remove(force=True)
        cluster.stop()
    worst = max(recoveries)
    record = FaultRecord(
        f"11 NATS cluster: retained-stream leader SIGKILLed mid-change x{ROUNDS}",
        BOUND_S,
        round(worst, 2),
        0,
        0,
    )
    print("\n" + record.line(), [round(r, 1) for r in recoveries])
    write_record(record)
    assert worst <= BOUND_S
