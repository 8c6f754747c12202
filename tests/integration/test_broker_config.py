"""The generated broker configuration enforced by a real mosquitto (DESIGN §8, issue 3).

mosquitto runs exactly the ``mosquitto.conf`` and ACL that ``phrame broker-config``
writes for the sample inventory, with test certificates and a password file: TLS and
WebSocket-over-TLS listeners, no anonymous access, one account per node agent.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from phrame.cli import main as phrame_main
from phrame_mqtt import MqttClient, MqttError, MqttSettings, PublishRefused
from tests.support.certs import Pki, make_pki
from tests.support.mosquitto import Mosquitto
from tests.support.mqtt import Inbox
from tests.support.services import free_port, require_binary, wait_for_port

pytestmark = pytest.mark.mqtt

INVENTORY = Path(__file__).parents[2] / "fixtures" / "phrame-config"
ACCOUNTS = ("node-edge-01", "node-edge-02", "config-sync", "mirror-actual", "placement")


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
    from phrame_mqtt.broker_config import acl_text, inventory_nodes

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


def test_websocket_over_tls_with_the_same_acl(broker: SecureBroker, clients: list) -> None:
    agent = connect(clients, broker.settings("node-edge-02", scheme="wss"), "agent-edge-02-ws")
    assert agent.is_connected
    agent.publish_batch([("phrame/actual/nodes/edge-02/status", b"ws")], timeout=5)
    with pytest.raises(PublishRefused):
        agent.publish_batch([("phrame/actual/nodes/edge-01/status", b"ws")], timeout=5)


def test_mqtt_311_fallback_gets_the_same_acl(broker: SecureBroker, clients: list) -> None:
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


def test_config_sync_reads_node_statuses_for_its_deploy_status(broker: SecureBroker, clients: list) -> None:
    """phrame/deploy turns green from the agents' status topics: config-sync must see them,
    and nothing else of the actual plane."""
    sync = connect(clients, broker.settings("config-sync"), "config-sync-deploy")
    inbox = Inbox()
    sync.subscribe("phrame/actual/#", inbox)
    agent = connect(clients, broker.settings("node-edge-01"), "agent-edge-01-status")
    agent.publish_batch([
        ("phrame/actual/nodes/edge-01/heartbeat", b'{"seq": 1}'),
        ("phrame/actual/nodes/edge-01/status", b'{"state": "online"}'),
    ])  # fmt: skip
    assert inbox.wait_for("phrame/actual/nodes/edge-01/status")
    with inbox.cond:  # the heartbeat was sent first: it would have arrived by now
        assert "phrame/actual/nodes/edge-01/heartbeat" not in inbox.topics
