"""The generated NATS permissions on a real nats-server: each node agent reads only its own
desired topics and writes only its own actual ones; config-sync writes the desired plane.
NATS acknowledges a forbidden publish and drops it, so the drop is checked by a reader."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phrame.mqtt import MqttClient, MqttError, MqttSettings
from phrame.mqtt.broker_config import SERVICE_ACCOUNTS
from phrame.mqtt.nats_config import AUTH_FILE, PASSWORDS_FILE, password_variable, write_nats_config
from tests.support.mqtt import Inbox
from tests.support.nats import NatsCluster

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]
NODES = ["edge-01", "edge-02"]


def password(account: str) -> str:
    return f"pw-{account}-secret"


@pytest.fixture(scope="module")
def nats() -> Iterator[NatsCluster]:
    cluster = NatsCluster(1, extra=[f'include "{AUTH_FILE}"'])  # nats-server reads includes beside its config
    write_nats_config(NODES, cluster.dir, prefix="phrame")
    accounts = [*SERVICE_ACCOUNTS, *(f"node-{n}" for n in NODES)]
    (cluster.dir / PASSWORDS_FILE).write_text(
        "".join(f'{password_variable(a)} = "{password(a)}"\n' for a in accounts)
    )
    with cluster:
        yield cluster


def client(nats: NatsCluster, account: str, clients: list[MqttClient]) -> MqttClient:
    url = nats.nodes[0].url
    c = MqttClient(
        MqttSettings(url=url, username=account, password=password(account), protocol="auto"), account
    )
    c.start(timeout=20)
    clients.append(c)
    return c


def test_a_node_reads_only_its_own_desired_topics(nats: NatsCluster, clients: list[MqttClient]) -> None:
    sync = client(nats, "config-sync", clients)
    edge1 = client(nats, "node-edge-01", clients)
    own, other = Inbox(), Inbox()
    assert edge1.subscribe("phrame/desired/nodes/edge-01/#", own) is True
    assert edge1.subscribe("phrame/desired/nodes/edge-02/#", other) is False  # refused
    sync.publish_batch(
        [("phrame/desired/nodes/edge-01/manifest", b"m1"), ("phrame/desired/nodes/edge-02/manifest", b"m2")]
    )
    assert own.wait_for("phrame/desired/nodes/edge-01/manifest", timeout=10, payload=b"m1")
    assert not other.messages
    # the agent's read-back filter (node_agent/loop.py: <node>/+/#, read at QoS 0) is granted
    assert edge1.collect_retained("phrame/desired/nodes/edge-01/+/#") == {
        "phrame/desired/nodes/edge-01/manifest": b"m1"
    }


def test_a_node_writes_only_its_own_actual_topics(nats: NatsCluster, clients: list[MqttClient]) -> None:
    observer = client(nats, "observer", clients)
    seen = Inbox()
    assert observer.subscribe("phrame/actual/#", seen) is True
    edge2 = client(nats, "node-edge-02", clients)
    edge2.publish("phrame/actual/nodes/edge-01/status", b"forged", retain=False)  # acknowledged, dropped
    edge2.publish("phrame/actual/nodes/edge-02/status", b"own", retain=False)
    assert seen.wait_for("phrame/actual/nodes/edge-02/status", timeout=10, payload=b"own")
    assert "phrame/actual/nodes/edge-01/status" not in seen.topics


def test_a_wrong_password_is_refused(nats: NatsCluster) -> None:
    settings = MqttSettings(url=nats.nodes[0].url, username="node-edge-01", password="wrong", protocol="auto")
    with pytest.raises(MqttError):
        MqttClient(settings, "node-edge-01").start(timeout=5)
