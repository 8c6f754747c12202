"""``MqttClient.fail_over``: leave a broker node that answers but serves an older retained
set for the next URL of the list (two real mosquittos stand for two nodes of one broker).

config-sync calls it when its read-back finds the node it reads from storing none of what
it sends again (anti-entropy's ``on_stale``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from phrame.mqtt import MqttClient, MqttSettings
from tests.support.mosquitto import Mosquitto
from tests.support.mqtt import Inbox
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.mqtt]


@pytest.fixture
def second() -> Iterator[Mosquitto]:
    broker = Mosquitto().start()
    yield broker
    proc = broker.proc
    broker.stop()
    if proc is not None and proc.stderr is not None:
        proc.stderr.close()


def test_fail_over_moves_to_the_next_url_with_subscriptions_renewed(mosquitto, second: Mosquitto) -> None:
    client = MqttClient(MqttSettings(url=f"{mosquitto.url},{second.url}", reconnect_max_s=1), "fail-over")
    other = MqttClient(MqttSettings(url=second.url), "fail-over-writer")
    single = MqttClient(MqttSettings(url=mosquitto.url), "fail-over-single")
    try:
        client.start(timeout=10)
        other.start(timeout=10)
        single.start(timeout=10)
        inbox = Inbox()
        assert client.subscribe("t/#", inbox)
        assert client.broker_url == mosquitto.url
        connects = client.connect_count
        assert client.fail_over("a test")
        assert client.broker_url == second.url
        wait_for(lambda: client.connect_count > connects and client.is_connected, "reconnected", 10)
        other.publish_batch([("t/x", b"on the second node")])
        assert inbox.wait_for("t/x", payload=b"on the second node")
        assert client.collect_retained("t/#") == {"t/x": b"on the second node"}
        assert not single.fail_over("one URL: nowhere to go")
        assert single.is_connected and single.broker_url == mosquitto.url
    finally:
        for c in (client, other, single):
            c.stop()
