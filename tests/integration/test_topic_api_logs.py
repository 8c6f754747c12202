"""``POST /api/nodes/{node}/containers/{id}/logs``: the topic API asks the node's agent for a
container's tail over the real broker and waits for the answer.

Real mosquitto, the mirrors and ``phrame topic-api`` (uvicorn) as processes; a small
responder on the broker stands in for the agent (the agent's side is
``test_agent_log_commands.py``). A token is needed even though reads are open (401 without
one, or with an unknown one); the tail comes back with 200; an unknown node or container is
404; an offline node is refused at once (409); a node whose agent says nothing gives 504
after ``PHRAME_API_LOGS_TIMEOUT_S``. Each request is audited.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phrame.auth import TokenStore
from phrame.mqtt import Message, MqttClient, MqttSettings
from schemas import Topics, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, fleet, heartbeat
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.mqtt]
T = Topics()
LIVE, MUTE, GONE = "logs-1", "mute-1", "gone-1"
ITEM = "demo.svc0.0"
BOB = "bob-reads"
TIMEOUT_S = 1.5


@pytest.fixture
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


class Responder:
    """Plays the agents: live heartbeats for ``LIVE`` and ``MUTE``; answers ``LIVE``'s log
    commands with the lines it was asked for; keeps every command it heard."""

    def __init__(self, url: str) -> None:
        self.client = MqttClient(MqttSettings(url=url), "logs-test-agent")
        self.heard: list[dict[str, Any]] = []
        self.stop_event = threading.Event()
        self.beats = threading.Thread(target=self._beat, daemon=True)

    def start(self) -> Responder:
        self.client.start(timeout=10)
        self.client.subscribe(f"{T.cmd_node(LIVE)}/#", self._on_command)
        self.client.subscribe(f"{T.cmd_node(MUTE)}/#", lambda m: self.heard.append(json.loads(m.payload)))
        self.beats.start()
        return self

    def _beat(self) -> None:
        seq = 0
        while not self.stop_event.is_set():
            seq += 1
            for node in (LIVE, MUTE):
                self.client.publish(T.heartbeat(node), json.dumps(heartbeat(time.time(), seq)).encode())
            self.stop_event.wait(0.5)

    def _on_command(self, msg: Message) -> None:
        doc = json.loads(msg.payload)
        self.heard.append(doc)
        check_payload("cmd-logs", doc)
        assert not msg.retain and T.parse(msg.topic).kind == "logs"
        reply = {
            "id": doc["id"],
            "node": LIVE,
            "item": ITEM,
            "at": time.time(),
            "lines": [f"line {i}" for i in range(doc["lines"])],
            "truncated": True,
        }
        check_payload("actual-reply", reply)
        self.client.publish(T.reply(LIVE, doc["id"]), json.dumps(reply).encode(), retain=False)

    def stop(self) -> None:
        self.stop_event.set()
        self.beats.join(5)
        self.client.stop()


def test_the_api_asks_the_agent_and_answers_with_its_tail(broker: Mosquitto, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("bob", ["read"], BOB)], tokens)
    agent = Responder(broker.url).start()
    retained = fleet([LIVE, MUTE, GONE], 1)
    retained[T.status(GONE)] = json.dumps({"state": "offline", "agent": "test"}).encode()
    agent.client.publish_batch(retained.items())
    api = ApiStack(
        broker.url, tmp_path / "api", PHRAME_TOKENS_FILE=str(tokens), PHRAME_API_LOGS_TIMEOUT_S=str(TIMEOUT_S)
    ).start()
    try:
        api.wait_json(
            "/api/nodes",
            lambda d: (
                {n["node"]: n["state"] for n in d["nodes"]}
                == {LIVE: "online", MUTE: "online", GONE: "offline"}
            ),
            "two nodes online, one offline",
        )

        def ask(node: str, token: str | None, item: str = ITEM, lines: str = "") -> httpx.Response:
            query = f"?lines={lines}" if lines else ""
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            url = f"{api.url}/api/nodes/{node}/containers/{item}/logs{query}"
            return httpx.post(url, headers=headers, timeout=30)

        assert ask(LIVE, None).status_code == 401  # reads are open; a tail still needs a token
        assert ask(LIVE, "unknown").status_code == 401
        assert not agent.heard, "a refused request published a command"

        r = ask(LIVE, BOB, lines="3")
        assert r.status_code == 200, r.text
        tail = r.json()
        assert tail["lines"] == ["line 0", "line 1", "line 2"] and tail["truncated"] is True, tail
        assert tail["node"] == LIVE and tail["item"] == ITEM and tail["id"] == agent.heard[-1]["id"]
        assert ask(LIVE, BOB).json()["lines"][-1] == "line 49"  # 50 by default

        assert ask(LIVE, BOB, lines="0").status_code == 400
        assert ask(LIVE, BOB, lines="201").status_code == 400
        assert ask("ghost", BOB).status_code == 404
        assert ask(LIVE, BOB, item="demo.nothing.0").status_code == 404

        started = time.monotonic()
        offline = ask(GONE, BOB)
        assert offline.status_code == 409 and "offline" in offline.json()["error"], offline.text
        assert time.monotonic() - started < TIMEOUT_S, "an offline node was waited for"

        started = time.monotonic()
        mute = ask(MUTE, BOB)
        assert mute.status_code == 504 and "no answer" in mute.json()["error"], mute.text
        assert time.monotonic() - started >= TIMEOUT_S
        wait_for(lambda: any(h.get("lines") == 50 for h in agent.heard[-1:]), "the mute node's command", 5)

        log = api.logs()
        assert f"audit: topic-api logs {LIVE}/{ITEM} by bob: accepted (200)" in log, log[-3000:]
        assert f"audit: topic-api logs {MUTE}/{ITEM} by bob: failed (504)" in log
    finally:
        api.stop()
        agent.stop()
