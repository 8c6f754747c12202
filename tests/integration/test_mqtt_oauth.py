"""OAuth2 client credentials end to end: a real token endpoint and a broker that checks tokens.

The token endpoint (Starlette/uvicorn) issues HMAC-signed tokens living 3 s; the broker
(amqtt with :class:`tests.support.oauth_server.TokenAuthPlugin`) admits only a valid,
unexpired token for the user name. amqtt speaks MQTT 3.1.1, so these clients use the
3.1.1 setting. Both servers are child processes, stopped and restarted by pid.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phrame.mqtt import MqttClient, MqttError, MqttSettings
from tests.support.mqtt import Inbox
from tests.support.oauth_server import TokenBroker, TokenServer, mint_token
from tests.support.services import eventually, require
from tests.support.waiting import wait_for

pytestmark = pytest.mark.mqtt
SECRET = "test-signing-key"
LIFETIME = 3.0


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    server = TokenServer(SECRET, {"agent-a": "a-secret", "observer": "o-secret"}, lifetime=LIFETIME)
    yield server.start()
    server.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TokenBroker]:
    try:
        import amqtt  # noqa: F401
    except ImportError:
        require(False, "amqtt not installed (dev dependency)")
    b = TokenBroker(SECRET, tmp_path / "auth.log")
    yield b.start()
    b.stop()


def oauth_settings(broker: TokenBroker, server: TokenServer, client_id: str, secret: str) -> MqttSettings:
    return MqttSettings(
        url=broker.url,
        protocol="3.1.1",
        oauth2_token_url=server.url,
        oauth2_client_id=client_id,
        oauth2_client_secret=secret,
        oauth2_retry_max_s=1.5,
        reconnect_max_s=1,
    )


def token_settings(broker: TokenBroker, user: str, token: str) -> MqttSettings:
    return MqttSettings(url=broker.url, protocol="3.1.1", username=user, password=token)


def start(clients: list[MqttClient], settings: MqttSettings, cid: str) -> MqttClient:
    client = MqttClient(settings, cid)
    client.start(timeout=5)
    clients.append(client)
    return client


def observer(clients: list[MqttClient], broker: TokenBroker) -> MqttClient:
    token = mint_token(SECRET, "observer", time.time() + 120)
    return start(clients, token_settings(broker, "observer", token), "observer")


@pytest.mark.slow
def test_a_valid_token_connects_expired_and_forged_are_refused(broker: TokenBroker) -> None:
    valid = mint_token(SECRET, "agent-a", time.time() + 30)
    client = MqttClient(token_settings(broker, "agent-a", valid), "agent-a")
    client.start(timeout=5)
    client.stop()
    expired = mint_token(SECRET, "agent-a", time.time() - 1)
    forged = mint_token("another-key", "agent-a", time.time() + 30)
    someone_elses = mint_token(SECRET, "observer", time.time() + 30)
    for token in (expired, forged, someone_elses):
        with pytest.raises(MqttError, match="refused"):
            MqttClient(token_settings(broker, "agent-a", token), "agent-a").start(timeout=5)
    assert broker.decisions("agent-a") == ["ok", "refused", "refused", "refused"]


@pytest.mark.slow
def test_wrong_client_secret_gets_no_token(token_server: TokenServer, broker: TokenBroker) -> None:
    settings = oauth_settings(broker, token_server, "agent-a", "not-the-secret")
    with pytest.raises(MqttError, match="no OAuth2 token"):
        MqttClient(settings, "agent-a").start(timeout=2)
    assert token_server.issued() == 0


@pytest.mark.slow
def test_refresh_before_expiry_keeps_subscriptions_and_inflight_messages(
    token_server: TokenServer, broker: TokenBroker, clients: list[MqttClient]
) -> None:
    agent = start(clients, oauth_settings(broker, token_server, "agent-a", "a-secret"), "agent-a")
    inbox_agent, inbox_obs = Inbox(), Inbox()
    agent.subscribe("cmd/#", inbox_agent)
    watcher = observer(clients, broker)
    watcher.subscribe("out/#", inbox_obs)
    # Publish a steady stream (one message per poll) until two token refreshes (every 2.25 s)
    # happened under it: the stream ends on that progress, not after a fixed count.
    payloads: list[bytes] = []

    def stream() -> bool:
        payloads.append(f"m{len(payloads)}".encode())
        agent.publish(f"out/{len(payloads) % 7}", payloads[-1], retain=False)
        return agent.connect_count >= 3

    wait_for(
        stream, "two token refreshes under the stream", 20, interval=0.05, observe=lambda: agent.connect_count
    )
    agent.publish_batch([("out/end", b"end")], retain=False, timeout=10)
    assert inbox_obs.wait_for(payload=b"end")
    with inbox_obs.cond:
        assert inbox_obs.cond.wait_for(lambda: set(payloads) <= set(inbox_obs.payloads), 5), (
            f"lost: {sorted(set(payloads) - set(inbox_obs.payloads))[:5]}"
        )
    oks = [d for d in broker.decisions("agent-a") if d == "ok"]
    assert len(oks) >= 3, "the client did not reconnect with fresh tokens"
    assert agent.connect_count >= 3
    # Each new token was fetched and used before the previous one expired.
    times = broker.connect_times("agent-a")
    assert all(b - a < LIFETIME for a, b in itertools.pairwise(times)), times
    # The subscription made before the refreshes still delivers.
    watcher.publish_batch([("cmd/x", b"still-subscribed")], retain=False)
    assert inbox_agent.wait_for(payload=b"still-subscribed")


@pytest.mark.slow
def test_token_endpoint_down_for_10s_is_retried_then_recovered(
    token_server: TokenServer, broker: TokenBroker, clients: list[MqttClient]
) -> None:
    agent = start(clients, oauth_settings(broker, token_server, "agent-a", "a-secret"), "agent-a")
    inbox = Inbox()
    agent.subscribe("cmd/#", inbox)
    issued_before = token_server.issued()
    token_server.stop()
    time.sleep(LIFETIME + 1)  # the agent's token has now expired
    # A broker restart now: reconnecting needs a token the endpoint cannot give.
    broker.stop()
    broker.start()
    assert eventually(lambda: "refused" in broker.decisions("agent-a"), 5)
    assert not agent.is_connected
    time.sleep(max(0.0, 10 - (LIFETIME + 1) - 1))
    token_server.start()  # same port, after ~10 s down
    assert eventually(lambda: agent.is_connected, 10), "no recovery after the endpoint returned"
    assert token_server.issued() >= 1 and issued_before >= 1
    observer(clients, broker).publish_batch([("cmd/y", b"after")], retain=False)
    assert inbox.wait_for(payload=b"after"), "subscription not renewed after recovery"


def test_mqtt5_against_a_311_only_broker_says_which_setting_to_change(broker: TokenBroker) -> None:
    token = mint_token(SECRET, "agent-a", time.time() + 30)
    v5 = MqttSettings(url=broker.url, username="agent-a", password=token)  # protocol 5 by default
    with pytest.raises(MqttError, match=r"PHRAME_MQTT_PROTOCOL=3\.1\.1"):
        MqttClient(v5, "agent-a").start(timeout=1.5)


def test_a_cut_or_garbled_token_answer_is_retried_never_the_end_of_refresh() -> None:
    """A proxy restarting mid-answer: a truncated body, then a bad status line, then a token."""
    import json as _json
    import socket
    import threading

    from phrame.mqtt.oauth import TokenProvider

    token_body = _json.dumps({"access_token": "t-ok", "expires_in": 60}).encode()
    answers = [
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"acc',
        b"GARBAGE\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(token_body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + token_body,
    ]
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    served: list[int] = []

    def serve() -> None:
        for answer in answers:
            conn, _addr = server.accept()
            with conn:
                conn.recv(65536)  # the request
                conn.sendall(answer)
                served.append(len(answer))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    settings = MqttSettings(
        url="mqtt://127.0.0.1:1",
        oauth2_token_url=f"http://127.0.0.1:{port}/token",
        oauth2_client_id="agent-a",
        oauth2_client_secret="s",
        oauth2_retry_max_s=0.2,
    )
    provider = TokenProvider(settings, http_timeout_s=5)
    provider.start()
    try:
        assert eventually(provider.has_token, 10), f"no token after {len(served)} answers"
        assert provider.current == "t-ok" and len(served) == 3
    finally:
        provider.stop()
        server.close()
        thread.join(5)


@pytest.mark.slow
def test_refresh_under_mqtt5_keeps_the_session_both_ways(
    token_server: TokenServer, mosquitto, clients: list[MqttClient]
) -> None:
    """amqtt speaks only 3.1.1; mosquitto (anonymous here, so any token is accepted) shows
    the MQTT 5 side of a token switch: the session survives the reconnect, so QoS 1
    messages published TO the agent while it reconnects are queued and delivered, and
    those it publishes are all acknowledged."""
    settings = MqttSettings(
        url=mosquitto.url,
        protocol="5",
        oauth2_token_url=token_server.url,
        oauth2_client_id="agent-a",
        oauth2_client_secret="a-secret",
        oauth2_retry_max_s=1.5,
        reconnect_max_s=1,
    )
    agent = start(clients, settings, "agent-a")
    to_agent, from_agent = Inbox(), Inbox()
    # The token lives 3 s and is refreshed at 2.25 s: on a loaded machine the first refresh can
    # drop the connection that carries this SUBSCRIBE before its SUBACK. The subscription is
    # renewed on the reconnect either way, so wait until a probe from the peer arrives instead
    # of trusting the first acknowledgement.
    agent.subscribe("cmd/#", to_agent)
    peer = start(clients, MqttSettings(url=mosquitto.url), "peer")
    assert peer.subscribe("out/#", from_agent)

    def probe_arrives() -> bool:
        peer.publish("cmd/probe", b"probe", retain=False)
        return to_agent.wait_for("cmd/probe", timeout=0.5)

    wait_for(probe_arrives, "the agent's subscription in force at the broker", 15)
    # a message every 2 ms each way until two token refreshes happened under the stream
    sent_in: list[bytes] = []
    sent_out: list[bytes] = []

    def stream() -> bool:
        i = len(sent_in)
        sent_in.append(f"in{i}".encode())
        sent_out.append(f"out{i}".encode())
        peer.publish(f"cmd/{i % 5}", sent_in[i], retain=False)
        agent.publish(f"out/{i % 5}", sent_out[i], retain=False)
        return agent.connect_count >= 3

    wait_for(
        stream,
        "two token refreshes under the stream",
        20,
        interval=0.002,
        observe=lambda: agent.connect_count,
    )
    assert token_server.issued() >= 3
    with to_agent.cond:
        assert to_agent.cond.wait_for(lambda: set(sent_in) <= set(to_agent.payloads), 10), (
            f"lost on the way in: {sorted(set(sent_in) - set(to_agent.payloads))[:5]}"
        )
    with from_agent.cond:
        assert from_agent.cond.wait_for(lambda: set(sent_out) <= set(from_agent.payloads), 10), (
            f"lost on the way out: {sorted(set(sent_out) - set(from_agent.payloads))[:5]}"
        )
