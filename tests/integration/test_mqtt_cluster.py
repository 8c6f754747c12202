"""The shared MQTT client on a broker of several nodes: a real NATS cluster (JetStream, its
MQTT listener), and a real mosquitto for the refused-subscription case.

What the client must do there: take the list of the cluster's URLs and fail over to another
node when its node dies (subscriptions renewed, retained state readable), speak MQTT 3.1.1
where 5 is refused (``PHRAME_MQTT_PROTOCOL=auto``), and ask again for a subscription the
broker refused. Every wait is bounded and waits on what the client or broker shows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from tests.support.mqtt import Inbox
from tests.support.nats import NatsCluster
from tests.support.services import free_port
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[NatsCluster]:
    c = NatsCluster(3).start()
    yield c
    c.stop()


def connect(clients: list[MqttClient], url: str, cid: str, timeout: float = 30, **kw: object) -> MqttClient:
    settings = MqttSettings(url=url, protocol="auto", reconnect_max_s=1, **kw)  # type: ignore[arg-type]
    client = MqttClient(settings, cid)
    client.start(timeout=timeout)
    clients.append(client)
    return client


def test_auto_speaks_311_to_nats_and_retained_messages_cross_nodes(
    cluster: NatsCluster, clients: list[MqttClient]
) -> None:
    a, b = cluster.nodes[0], cluster.nodes[1]
    writer = connect(clients, a.url, "writer-auto")
    assert writer.protocol == "3.1.1"  # NATS refuses MQTT 5 at connect; auto fell back
    writer.publish_batch([("phrame-t/desired/a", b"1"), ("phrame-t/desired/b", b"2")], timeout=30)
    reader = connect(clients, b.url, "reader-auto")
    got = reader.collect_retained("phrame-t/desired/#", settle=0.5, timeout=20)
    assert got == {"phrame-t/desired/a": b"1", "phrame-t/desired/b": b"2"}


def test_a_dead_first_url_is_skipped() -> None:
    dead = f"mqtt://127.0.0.1:{free_port()}"  # nothing listens there
    with NatsCluster(1) as single:
        client = MqttClient(
            MqttSettings(url=f"{dead},{single.nodes[0].url}", protocol="auto", reconnect_max_s=1), "skip-dead"
        )
        try:
            client.start(timeout=30)
            assert client.broker_url == single.nodes[0].url
        finally:
            client.stop()


def test_failover_when_the_connected_node_dies(cluster: NatsCluster, clients: list[MqttClient]) -> None:
    urls = cluster.urls
    listener = connect(clients, urls, "listener-fo")
    inbox = Inbox()
    assert wait_for(lambda: listener.subscribe("phrame-fo/#", inbox), "subscription granted", 40)
    home = next(n for n in cluster.nodes if n.url == listener.broker_url)
    writer_url = next(n.url for n in cluster.nodes if n is not home)
    writer = connect(clients, writer_url, "writer-fo")
    writer.publish("phrame-fo/one", b"before")
    assert inbox.wait_for("phrame-fo/one", timeout=20, payload=b"before")
    cluster.kill(home)
    try:
        assert wait_for(
            lambda: listener.is_connected and listener.broker_url != home.url, "reconnected elsewhere", 60
        )
        # the subscription is renewed on the new node (NATS may refuse it for a while during
        # the election: the client asks again until granted)
        assert wait_for(
            lambda: (writer.publish("phrame-fo/two", b"after"), inbox.wait_for("phrame-fo/two", timeout=1))[
                1
            ],
            "a message after the failover",
            90,
        )
    finally:
        cluster.start_node(home)


def permissions(*subjects: str) -> list[str]:
    allowed = ", ".join(f'"{x}"' for x in subjects)
    return [
        "authorization { users: [",
        f"  {{user: reader, password: r-secret, permissions: {{subscribe: [{allowed}]}}}},",
        "  {user: writer, password: w-secret}",
        "] }",
    ]


def test_a_refused_subscription_is_asked_for_again(clients: list[MqttClient]) -> None:
    # NATS refuses (SUBACK 0x80) what the user may not read; `X/#` needs `X` and `X.>`
    with NatsCluster(1, extra=permissions("open", "open.>")) as nats:
        url = nats.nodes[0].url
        reader = connect(clients, url, "reader", username="reader", password="r-secret")
        inbox = Inbox()
        assert reader.subscribe("closed/#", inbox) is False  # refused
        writer = connect(clients, url, "writer", username="writer", password="w-secret")
        # the operator grants it; nats-server re-reads its configuration on SIGHUP
        nats.extra = permissions("open", "open.>", "closed", "closed.>")
        nats.reload()
        assert wait_for(
            lambda: (
                writer.publish("closed/x", b"now"),
                inbox.wait_for("closed/x", timeout=0.5, payload=b"now"),
            )[1],
            "the refused subscription granted on a later try",
            30,
        )


def test_a_read_creates_no_jetstream_consumer(clients: list[MqttClient]) -> None:
    # A QoS 1 subscription costs NATS a replicated JetStream consumer on $MQTT_msgs; while a
    # node of the cluster is down, creating one can time out (5 s) into SUBACK 0x80 again and
    # again. A read (collect_retained) subscribes at QoS 0: the retained replay, no consumer.
    with NatsCluster(1) as nats:
        node = nats.nodes[0]
        writer = connect(clients, node.url, "writer-rd")
        writer.publish_batch([("phrame-rd/a", b"1"), ("phrame-rd/b", b"2")], timeout=30)
        reader = connect(clients, node.url, "reader-rd")
        consumers: list[int] = []
        reading = threading.Event()

        def watch() -> None:
            while not reading.wait(0.05):
                state = (nats.streams(node).get("$MQTT_msgs") or {}).get("state") or {}
                consumers.append(int(state.get("consumer_count", 0)))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            got = reader.collect_retained("phrame-rd/#", settle=2.0, timeout=20)
        finally:
            reading.set()
            watcher.join()
        assert got == {"phrame-rd/a": b"1", "phrame-rd/b": b"2"}
        assert consumers and max(consumers) == 0, f"consumers on $MQTT_msgs during the read: {consumers}"
        # a permanent subscription keeps QoS 1 (a consumer: messages queued across reconnects)
        assert reader.subscribe("phrame-rd/#", Inbox())
        assert wait_for(
            lambda: ((nats.streams(node).get("$MQTT_msgs") or {}).get("state") or {}).get("consumer_count"),
            "the permanent subscription's consumer",
            20,
        )
        # and a read of that very filter leaves it at QoS 1 (a SUBSCRIBE replaces the QoS;
        # NATS deletes the consumers of a subscription lowered to QoS 0)
        assert reader.collect_retained("phrame-rd/#", settle=0.3, timeout=20) == got
        state = (nats.streams(node).get("$MQTT_msgs") or {}).get("state") or {}
        assert state.get("consumer_count"), state
