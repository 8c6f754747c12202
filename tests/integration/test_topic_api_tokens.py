"""The topic API with a tokens file: scopes decide each write, and the audit list names holders.

Real mosquitto, the mirrors and ``phrame topic-api`` (uvicorn) as processes. A ``read``
token reads but writes nothing (403), a ``deploy`` token restarts but writes no kv, an
``admin`` token does both; ``PHRAME_API_TOKEN`` still works as an implicit admin. Each
write of a known holder lands in the retained ``<prefix>/desired/audit/topic-api`` list
(who, what, target, result); an unknown token gets 401 and is not listed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from phrame.auth import TokenStore
from phrame.mqtt import Message, MqttClient, MqttSettings
from schemas import Topics, check_payload
from tests.support.mosquitto import Mosquitto
from tests.support.topic_api import ApiStack, fleet
from tests.support.waiting import wait_for

T = Topics()
NODE = "tok-1"
BOB, ALICE, CAROL, LEGACY = "bob-reads", "alice-deploys", "carol-admin", "legacy-api-token"


@pytest.fixture
def broker() -> Iterator[Mosquitto]:
    b = Mosquitto().start()
    yield b
    b.stop()


class Retained:
    """A subscriber keeping the last payload of every topic it hears."""

    def __init__(self, url: str) -> None:
        self.values: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.client = MqttClient(MqttSettings(url=url), "tokens-test-watch")

    def on(self, msg: Message) -> None:
        with self.lock:
            self.values[msg.topic] = msg.payload

    def get(self, topic: str) -> bytes | None:
        with self.lock:
            return self.values.get(topic)


@pytest.mark.slow
def test_scoped_tokens_decide_writes_and_each_is_audited(broker: Mosquitto, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("bob", ["read"], BOB), ("alice", ["deploy"], ALICE), ("carol", ["admin"], CAROL)], tokens)
    watch = Retained(broker.url)
    watch.client.start(timeout=10)
    watch.client.subscribe(T.audit("topic-api"), watch.on)
    watch.client.subscribe(f"{T.cmd_node(NODE)}/#", watch.on)
    watch.client.publish_batch(fleet([NODE], 1).items())
    api = ApiStack(
        broker.url,
        tmp_path / "api",
        token=LEGACY,
        PHRAME_TOKENS_FILE=str(tokens),
        PHRAME_API_READ_TOKEN_REQUIRED="true",
    ).start()
    try:
        api.wait_json("/api/nodes", lambda d: [n["node"] for n in d["nodes"]] == [NODE], "the node")

        def call(method: str, path: str, token: str, **kw: Any) -> httpx.Response:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            return httpx.request(method, api.url + path, headers=headers, timeout=30, **kw)

        kv = "/api/kv/phrame/kv/team/note"
        assert call("GET", "/api/nodes", BOB).status_code == 200
        assert call("GET", "/api/nodes", "unknown").status_code == 401
        assert call("PUT", kv, BOB, content=b'{"a":1}').status_code == 403
        assert call("PUT", kv, ALICE, content=b'{"a":1}').status_code == 403  # deploy is not admin
        restart = f"/api/nodes/{NODE}/containers/demo.svc0.0/restart"
        assert call("POST", restart, BOB).status_code == 403
        assert call("POST", restart, "unknown").status_code == 401
        done = call("POST", restart, ALICE)
        assert done.status_code == 202, done.text
        wait_for(lambda: watch.get(T.restart(NODE, "demo.svc0.0")), "the restart command", 10)
        assert call("PUT", kv, CAROL, content=b'{"a":2}').status_code == 200
        assert call("DELETE", kv, LEGACY).status_code == 200  # PHRAME_API_TOKEN: an implicit admin

        def entries() -> list[dict[str, Any]]:
            raw = watch.get(T.audit("topic-api"))
            if not raw:
                return []
            doc = json.loads(raw)
            check_payload("desired-audit", doc)
            return list(doc["entries"])

        wait_for(lambda: len(entries()) == 6, "six audited writes", 10, observe=lambda: str(entries()))
        seen = [(e["who"], e["action"], e["result"], e["status"]) for e in entries()]
        assert seen == [
            ("bob", "kv-put", "forbidden", 403),
            ("alice", "kv-put", "forbidden", 403),
            ("bob", "restart", "forbidden", 403),
            ("alice", "restart", "accepted", 202),
            ("carol", "kv-put", "accepted", 200),
            ("api-token", "kv-delete", "accepted", 200),
        ]
        assert entries()[3]["target"] == f"{NODE}/demo.svc0.0"
        assert "audit: topic-api restart tok-1/demo.svc0.0 by alice: accepted (202)" in api.logs()
    finally:
        api.stop()
        watch.client.stop()
