"""The generated broker configuration enforced by a real mosquitto (docs/operations/broker.md).

mosquitto runs exactly the ``mosquitto.conf`` and ACL that ``phrame broker-config``
writes for the sample inventory, with test certificates and a password file: TLS and
WebSocket-over-TLS listeners, no anonymous access, one account per node agent.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import docker
import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from config_sync.service import ConfigSync
from config_sync.settings import SyncSettings
from node_agent.docker_port import DockerPort
from node_agent.loop import Agent
from node_agent.processes import ProcessSupervisor
from node_agent.settings import AgentSettings
from phrame.cli import main as phrame_main
from phrame.mqtt import MqttClient, MqttError, MqttSettings, PublishRefused
from placement.loop import build_loop
from placement.settings import PlacementSettings
from tests.integration.test_placement_git import ConfigRemote
from tests.integration.test_placement_lock import Instance
from tests.support.certs import Pki, make_pki
from tests.support.mosquitto import Mosquitto
from tests.support.mqtt import Inbox
from tests.support.services import free_port, require_binary, wait_for_port, wait_until

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]

INVENTORY = Path(__file__).parents[2] / "fixtures" / "phrame-config"
ACCOUNTS = (
    "node-edge-01",
    "node-edge-02",
    "config-sync",
    "mirror-actual",
    "mirror-desired",
    "placement",
    "topic-api",
    "observer",
)


@dataclass
class SecureBroker:
    mosquitto: Mosquitto
    pki: Pki
    mqtt_port: int
    ws_port: int

    def settings(self, user: str, *, scheme: str = "mqtts", **kw: object) -> MqttSettings:
        port = self.ws_port if scheme in ("ws", "wss") else self.mqtt_port
        base = MqttSettings(
            url=f"{scheme}://127.0.0.1:{port}",
            username=user,
            password=f"pw-{user}",
            tls_ca=str(self.pki.ca),
            reconnect_max_s=2,
        )
        return replace(base, **kw)  # type: ignore[arg-type]


def password(user: str) -> str:
    return f"pw-{user}"


@pytest.fixture(scope="module")
def broker() -> Iterator[SecureBroker]:
    passwd_bin = require_binary("mosquitto_passwd", "mosquitto")
    # mosquitto started as root drops to its own user before reading these files, so
    # they live in a directory it may enter (pytest's tmp_path is private to root).
    conf_dir = Path(tempfile.mkdtemp(prefix="phrame-broker-"))
    conf_dir.chmod(0o755)
    pki = make_pki(("localhost", "127.0.0.1"), directory=conf_dir / "pki")
    mqtt_port, ws_port = free_port(), free_port()
    code = phrame_main([
        "broker-config", "--inventory", str(INVENTORY), "--out", str(conf_dir),
        "--bind", "127.0.0.1", "--mqtt-port", str(mqtt_port), "--ws-port", str(ws_port),
        "--tls-dir", str(pki.dir), "--conf-dir", str(conf_dir), "--persistence-dir", "",
    ])  # fmt: skip
    assert code == 0
    passwd = conf_dir / "passwd"
    for i, user in enumerate(ACCOUNTS):
        create = ["-c"] if i == 0 else []
        subprocess.run([passwd_bin, *create, "-b", str(passwd), user, password(user)], check=True)
    passwd.chmod(0o644)
    conf = (conf_dir / "mosquitto.conf").read_text().splitlines()
    mosquitto = Mosquitto(conf, port=mqtt_port, defaults=False).start()
    assert wait_for_port(ws_port), mosquitto.log()
    try:
        yield SecureBroker(mosquitto, pki, mqtt_port, ws_port)
    finally:
        mosquitto.stop()
        shutil.rmtree(conf_dir, ignore_errors=True)


def connect(clients: list[MqttClient], settings: MqttSettings, cid: str) -> MqttClient:
    client = MqttClient(settings, cid)
    client.start(timeout=5)
    clients.append(client)
    return client


def test_generated_acl_lists_every_inventory_node() -> None:
    from phrame.cli.cmd_broker_config import inventory_nodes
    from phrame.mqtt.broker_config import acl_text

    text = acl_text(inventory_nodes(INVENTORY))
    for node in ("core-01", "edge-01", "edge-02", "edge-03"):
        assert f"user node-{node}\ntopic read phrame/desired/nodes/{node}/#\n" in text


def test_agent_reads_only_its_own_desired_topics(broker: SecureBroker, clients: list) -> None:
    sync = connect(clients, broker.settings("config-sync"), "config-sync")
    sync.publish_batch([
        ("phrame/desired/nodes/edge-01/manifest", b'{"n": 1}'),
        ("phrame/desired/nodes/edge-02/manifest", b'{"n": 2}'),
    ])  # fmt: skip
    agent = connect(clients, broker.settings("node-edge-01"), "agent-edge-01")
    # A wide read returns only what the ACL lets edge-01 see.
    seen = agent.collect_retained("phrame/desired/#", settle=0.3)
    assert seen == {"phrame/desired/nodes/edge-01/manifest": b'{"n": 1}'}
    inbox = Inbox()
    # mosquitto grants a wildcard subscription and filters each message against the ACL.
    agent.subscribe("phrame/desired/nodes/edge-02/#", inbox)
    assert agent.subscribe("phrame/desired/nodes/edge-01/#", inbox) is True
    assert agent.subscribe("phrame/cmd/nodes/edge-01/#", inbox) is True
    assert inbox.wait_for("phrame/desired/nodes/edge-01/manifest")
    # B's message is sent first, so once A's own has arrived B's would have too.
    sync.publish_batch([("phrame/desired/nodes/edge-02/manifest", b'{"n": 3}'),
                        ("phrame/desired/nodes/edge-01/x", b"own")])  # fmt: skip
    assert inbox.wait_for("phrame/desired/nodes/edge-01/x")
    with inbox.cond:
        assert not inbox.cond.wait_for(lambda: "phrame/desired/nodes/edge-02/manifest" in inbox.topics, 0.5)


def test_agent_writes_only_its_own_actual_topics(broker: SecureBroker, clients: list) -> None:
    mirror = connect(clients, broker.settings("mirror-actual"), "mirror-actual")
    inbox = Inbox()
    mirror.subscribe("phrame/actual/#", inbox)
    agent = connect(clients, broker.settings("node-edge-01"), "agent-edge-01-w")
    with pytest.raises(PublishRefused) as refused:
        agent.publish_batch([("phrame/actual/nodes/edge-02/status", b"forged")], timeout=5)
    assert refused.value.topics == ["phrame/actual/nodes/edge-02/status"]
    agent.publish_batch([("phrame/actual/nodes/edge-01/status", b"mine")], timeout=5)
    assert inbox.wait_for("phrame/actual/nodes/edge-01/status")
    with inbox.cond:
        assert not inbox.cond.wait_for(lambda: "phrame/actual/nodes/edge-02/status" in inbox.topics, 0.5)
    # The agent may not write the desired plane either, even its own node's.
    with pytest.raises(PublishRefused):
        agent.publish_batch([("phrame/desired/nodes/edge-01/manifest", b"x")], timeout=5)


def test_log_commands_reach_the_agent_and_only_its_own_replies_reach_the_api(
    broker: SecureBroker, clients: list
) -> None:
    """topic-api may send a log command and read the agents' replies; an agent may answer on
    its own node's reply topic only; nobody else may send a command."""
    api = connect(clients, broker.settings("topic-api"), "topic-api")
    replies = Inbox()
    assert api.subscribe("phrame/actual/nodes/+/replies/+", replies) is True
    agent = connect(clients, broker.settings("node-edge-01"), "agent-edge-01-logs")
    commands = Inbox()
    assert agent.subscribe("phrame/cmd/nodes/edge-01/#", commands) is True
    command = "phrame/cmd/nodes/edge-01/containers/demo.web.0/logs"
    api.publish_batch([(command, b'{"id": "c1"}')], retain=False, timeout=5)
    assert commands.wait_for(command)
    with pytest.raises(PublishRefused):
        agent.publish_batch([("phrame/actual/nodes/edge-02/replies/c1", b"forged")], retain=False, timeout=5)
    agent.publish_batch([("phrame/actual/nodes/edge-01/replies/c1", b"tail")], retain=False, timeout=5)
    assert replies.wait_for("phrame/actual/nodes/edge-01/replies/c1")
    assert "phrame/actual/nodes/edge-02/replies/c1" not in replies.topics
    observer = connect(clients, broker.settings("observer"), "observer")
    with pytest.raises(PublishRefused):
        observer.publish_batch([(command, b'{"id": "c2"}')], retain=False, timeout=5)


def test_websocket_over_tls_with_the_same_acl(broker: SecureBroker, clients: list) -> None:
    agent = connect(clients, broker.settings("node-edge-02", scheme="wss"), "agent-edge-02-ws")
    assert agent.is_connected
    agent.publish_batch([("phrame/actual/nodes/edge-02/status", b"ws")], timeout=5)
    with pytest.raises(PublishRefused):
        agent.publish_batch([("phrame/actual/nodes/edge-01/status", b"ws")], timeout=5)


def test_mqtt_311_fallback_gets_the_same_acl(broker: SecureBroker, clients: list) -> None:
    # its own retained topics: the module's broker is shared, and the tests run in any order
    sync = connect(clients, broker.settings("config-sync"), "config-sync-v311")
    sync.publish_batch([
        ("phrame/desired/nodes/edge-01/manifest", b'{"n": 1}'),
        ("phrame/desired/nodes/edge-02/manifest", b'{"n": 2}'),
    ])  # fmt: skip
    agent = connect(clients, broker.settings("node-edge-01", protocol="3.1.1"), "agent-edge-01-v311")
    got = agent.collect_retained("phrame/desired/#")
    assert set(got) <= {"phrame/desired/nodes/edge-01/manifest", "phrame/desired/nodes/edge-01/x"}
    assert got


def test_wrong_password_is_refused(broker: SecureBroker) -> None:
    client = MqttClient(broker.settings("node-edge-01", password="wrong"), "agent-bad-pw")
    with pytest.raises(MqttError, match="refused"):
        client.start(timeout=5)
    assert not client.is_connected


def test_unknown_user_and_anonymous_are_refused(broker: SecureBroker) -> None:
    for settings in (
        broker.settings("intruder"),
        broker.settings("node-edge-01", username=None, password=None),
    ):
        with pytest.raises(MqttError):
            MqttClient(settings, "agent-anon").start(timeout=3)


def test_plain_mqtt_is_refused_on_the_tls_port(broker: SecureBroker) -> None:
    plain = broker.settings("node-edge-01", scheme="mqtt")
    with pytest.raises(MqttError, match="could not connect"):
        MqttClient(plain, "agent-plain").start(timeout=2)


def test_untrusted_server_certificate_is_refused(broker: SecureBroker) -> None:
    no_ca = broker.settings("node-edge-01", tls_ca=None)  # system store: our CA is unknown
    with pytest.raises(MqttError, match="could not connect"):
        MqttClient(no_ca, "agent-no-ca").start(timeout=2)


def test_config_sync_reads_node_statuses_and_containers_for_deploys_and_rollouts(
    broker: SecureBroker, clients: list
) -> None:
    """phrame/deploy turns green from the agents' status topics and names the nodes offline
    by their heartbeat; a staged rollout's health gate reads each replica's container report:
    config-sync must see those three, and nothing else of the actual plane."""
    sync = connect(clients, broker.settings("config-sync"), "config-sync-deploy")
    inbox = Inbox()
    sync.subscribe("phrame/actual/#", inbox)
    agent = connect(clients, broker.settings("node-edge-01"), "agent-edge-01-status")
    agent.publish_batch([
        ("phrame/actual/nodes/edge-01/processes/studio-a.ticker.0", b'{"state": "running"}'),
        ("phrame/actual/nodes/edge-01/containers/studio-a.mixer.0", b'{"state": "running"}'),
        ("phrame/actual/nodes/edge-01/heartbeat", b'{"seq": 1}'),
        ("phrame/actual/nodes/edge-01/status", b'{"state": "online"}'),
    ])  # fmt: skip
    # the readable topics arrive (waited for each: one arriving says nothing of another's order)
    assert inbox.wait_for("phrame/actual/nodes/edge-01/status")
    assert inbox.wait_for("phrame/actual/nodes/edge-01/heartbeat")
    assert inbox.wait_for("phrame/actual/nodes/edge-01/containers/studio-a.mixer.0")
    with inbox.cond:  # the process report was sent before all three: it would have arrived by now
        assert "phrame/actual/nodes/edge-01/processes/studio-a.ticker.0" not in inbox.topics


# -- client ids are tied to user names


def agent_for(broker: SecureBroker, node: str, tmp_path: Path) -> Agent:
    """A node agent built as ``phrame node-agent`` builds it, for the broker only: its
    Docker client points at nothing (no pass runs here)."""
    settings = AgentSettings(node=node, state_dir=tmp_path / f"state-{node}")
    nowhere = docker.DockerClient(base_url=f"tcp://127.0.0.1:{free_port()}", version="1.41")
    mqtt = broker.settings(f"node-{node}")
    port = DockerPort(node, client=nowhere, attempts=1)
    return Agent(
        settings,
        docker=port,
        supervisor=ProcessSupervisor(settings.state_dir),
        desired_mqtt=mqtt,
        actual_mqtt=mqtt,
    )


def agent_connections(agent: Agent) -> list[MqttClient]:
    return list({id(c): c for c in (agent.actual_client, agent.desired_client)}.values())


def hijack(broker: SecureBroker, user: str, client_id: str) -> paho.Client:
    """Log in as ``user`` with ``client_id`` and a clean start (so a taken-over session's
    will is published at once), as an attacker with a stolen node password would."""
    connected = threading.Event()
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
    client.username_pw_set(user, password(user))
    client.tls_set_context(ssl.create_default_context(cafile=str(broker.pki.ca)))
    client.on_connect = lambda *_a: connected.set()
    client.connect("127.0.0.1", broker.mqtt_port, clean_start=True)
    client.loop_start()
    assert connected.wait(5), f"{user} could not log in as {client_id}"
    return client


def stays_put(clients: list[MqttClient], within: float = 2.0) -> None:
    """Every client keeps its first connection for ``within`` seconds (fails as soon as one
    is disconnected or reconnects: a takeover shows as either)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        moved = [c.client_id for c in clients if not c.is_connected or c.connect_count != 1]
        assert not moved, f"taken over: {moved}"
        time.sleep(0.05)


def test_a_node_password_cannot_take_over_another_nodes_agent(
    broker: SecureBroker, clients: list, tmp_path: Path
) -> None:
    edge02 = agent_for(broker, "edge-02", tmp_path)
    assert edge02._connect()
    try:
        edge02.reporter.report_status("online", applied=None)
        mirror = connect(clients, broker.settings("mirror-actual"), "mirror")
        inbox = Inbox()
        mirror.subscribe("phrame/actual/nodes/edge-02/status", inbox)
        assert inbox.wait_for(payload=None)
        victims = agent_connections(edge02)
        # every id edge-02's agent has or had, and its user name
        ids = {c.client_id for c in victims} | {"phrame-agent-edge-02-actual", "phrame-agent-edge-02-desired"}
        for cid in sorted(ids | {"node-edge-02"}):
            attacker = hijack(broker, "node-edge-01", cid)
            try:
                with inbox.cond:
                    offline = inbox.cond.wait_for(lambda: any(b'"offline"' in p for p in inbox.payloads), 1.0)
                assert not offline, f"node-edge-01 as {cid!r} published edge-02's will"
                stays_put(victims, within=1.0)
            finally:
                attacker.disconnect()
                attacker.loop_stop()
        held = mirror.collect_retained("phrame/actual/nodes/edge-02/status")
        assert json.loads(held["phrame/actual/nodes/edge-02/status"])["state"] == "online"
    finally:
        for c in agent_connections(edge02):
            c.stop()


def test_every_service_connects_with_both_planes_and_none_takes_another_over(
    broker: SecureBroker, clients: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each service opens one connection per broker (its user name is its client id), so
    with both planes on one broker they all stay connected side by side."""
    sync = ConfigSync(SyncSettings(repo_url=str(tmp_path / "none.git"), state_dir=str(tmp_path / "sync"),
                                   mqtt=broker.settings("config-sync")))  # fmt: skip
    sync.mqtt.start(timeout=5)
    clients.append(sync.mqtt)
    assert sync.actual is sync.mqtt
    placement_mqtt = broker.settings("placement")
    monkeypatch.setenv("PHRAME_DESIRED_MQTT_URL", placement_mqtt.url)
    monkeypatch.setenv("PHRAME_MQTT_USERNAME", "placement")
    monkeypatch.setenv("PHRAME_MQTT_PASSWORD", password("placement"))
    monkeypatch.setenv("PHRAME_TLS_CA", str(broker.pki.ca))
    placement = build_loop(PlacementSettings(repo_url=str(tmp_path / "none.git"), state_dir=tmp_path / "pl"))
    placement.connect(settle_s=0.1, max_wait_s=1.0)
    clients.extend({id(c): c for c in (placement.actual, placement.desired)}.values())
    agents = [agent_for(broker, node, tmp_path) for node in ("edge-01", "edge-02")]
    for agent in agents:
        assert agent._connect()
        clients.extend(agent_connections(agent))
    for user in ("mirror-desired", "mirror-actual", "topic-api", "observer"):
        connect(clients, broker.settings(user), f"phrame-{user}")
    assert sorted(c.client_id for c in clients) == sorted(set(c.client_id for c in clients))
    # both planes work on each agent's connection, and on config-sync's
    sync.mqtt.publish_batch([("phrame/desired/nodes/edge-01/manifest", b'{"n": 9}')])
    agent = agents[0]
    seen = agent.desired_client.collect_retained("phrame/desired/nodes/edge-01/#")
    assert seen["phrame/desired/nodes/edge-01/manifest"] == b'{"n": 9}'
    agent.actual_client.publish_batch([("phrame/actual/nodes/edge-01/status", b'{"state": "online"}')])
    got = sync.actual.collect_retained("phrame/actual/nodes/+/status")
    assert got["phrame/actual/nodes/edge-01/status"] == b'{"state": "online"}'
    stays_put(clients)


def test_a_placement_standby_leaves_the_active_instance_connected(
    broker: SecureBroker, tmp_path: Path
) -> None:
    """Two instances share the `placement` account and a lock: the standby must not log in
    before it holds the lock (it would take the active instance's connection), and it
    takes over once the active one is killed."""
    remote = ConfigRemote(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")} | {
        "PHRAME_REPO_URL": str(remote.bare),
        "PHRAME_DESIRED_MQTT_URL": broker.settings("placement").url,
        "PHRAME_MQTT_USERNAME": "placement",
        "PHRAME_MQTT_PASSWORD": password("placement"),
        "PHRAME_TLS_CA": str(broker.pki.ca),
        "PHRAME_LOCK_FILE": str(tmp_path / "placement.lock"),
        "PHRAME_PLACEMENT_INTERVAL_S": "0.2",
        "PHRAME_MQTT_RECONNECT_MAX_S": "2",
    }
    started: list[Instance] = []
    try:
        a = Instance(tmp_path, "a", env)
        started.append(a)
        wait_until(lambda: "is active" in a.text(), "instance a active", 20)
        b = Instance(tmp_path, "b", env)
        started.append(b)
        wait_until(lambda: "standing by" in b.text(), "instance b standing by", 20)
        deadline = time.monotonic() + 3.0  # a takeover shows within one reconnect delay (1 s)
        while time.monotonic() < deadline:
            assert "disconnected" not in a.text(), a.text()
            time.sleep(0.1)
        a.end()
        wait_until(lambda: "is active" in b.text(), "instance b active after a was killed", 20)
        assert "disconnected" not in b.text(), b.text()
    finally:
        for inst in started:
            inst.end()


def test_two_logins_with_one_account_are_told_why_they_keep_losing_the_connection(
    broker: SecureBroker, clients: list, caplog: pytest.LogCaptureFixture
) -> None:
    """A misconfiguration, not an attack: two processes with one account take each other's
    place over and over; the log must say so once, not only "the broker closed it"."""
    settings = broker.settings("mirror-desired", reconnect_max_s=1)
    with caplog.at_level(logging.WARNING, logger="phrame.mqtt.client"):
        connect(clients, settings, "first")
        connect(clients, settings, "second")
        wait_until(lambda: any("one connection per account" in r.getMessage() for r in caplog.records),
                   "the hint about a second login with the same account", timeout=20)  # fmt: skip
    hints = [r.getMessage() for r in caplog.records if "one connection per account" in r.getMessage()]
    assert "mirror-desired" in hints[0]
    assert len(hints) <= 2  # once per client, not once per reconnect
