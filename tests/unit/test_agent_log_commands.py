"""Log tail commands, the agent's pure part: which commands are taken (own node, the logs
verb, valid, fresh, once; one gate with restarts), and what the reply says (the tail of one
of the node's managed containers, masked and bounded; an error otherwise). A recording
publisher and fake containers; no Docker, no broker."""

from __future__ import annotations

import json
import threading
from typing import Any

from node_agent.command_gate import CommandGate
from node_agent.commands import RestartCommands
from node_agent.log_commands import MAX_BYTES, LogCommands, LogRequest
from node_agent.models import MANAGED, NODE, ObservedContainer
from phrame.mqtt import Message
from schemas import Topics, check_payload
from tests.support.agent_support import item_labels

T = Topics()
ME, ITEM, NOW = "n1", "e.web.0", 1_000_000.0


class Containers:
    def __init__(self, output: bytes = b"one\ntwo\nthree\n") -> None:
        mine = {MANAGED: "true", NODE: ME, **item_labels(ITEM)}
        other = {MANAGED: "true", NODE: "n2", **item_labels("e.other.0")}
        self.found = [
            ObservedContainer("cid", ITEM, "running", mine),
            ObservedContainer("own", "e.agent.0", "running", {**mine, **item_labels("e.agent.0")}),
            ObservedContainer("xid", "e.other.0", "running", other),
        ]
        self.output = output
        self.asked: list[tuple[str, int]] = []

    def list_containers(self) -> list[ObservedContainer]:
        return self.found

    def inspect_container(self, name: str) -> dict[str, Any]:
        return {"Config": {"Env": ["API_TOKEN=tok-from-env-1234", "PLAIN=visible"]}}

    def logs_tail(self, ref: str, lines: int) -> bytes:
        self.asked.append((ref, lines))
        return self.output


class Recorder:
    def __init__(self, stop: threading.Event) -> None:
        self.sent: list[tuple[str, dict[str, Any], bool]] = []
        self.stop = stop

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        self.sent.append((topic, json.loads(payload or b"{}"), retain))
        self.stop.set()


def commands(docker: Containers, gate: CommandGate | None = None) -> LogCommands:
    spec = {"env": {"DB": {"file": "db"}, "PLAIN": "visible"}}
    return LogCommands(
        T, ME, docker, "own", gate=gate or CommandGate(clock=lambda: NOW),
        spec_of=lambda item: spec if item == ITEM else None, read_secret=lambda name: "file-secret-99",
        clock=lambda: NOW,
    )  # fmt: skip


def logs_message(node: str = ME, item: str = ITEM, *, retain: bool = False, **doc: Any) -> Message:
    return Message(T.logs(node, item), json.dumps({"id": "c1", "ts": NOW} | doc).encode(), retain)


def test_only_fresh_new_logs_commands_of_this_node_are_taken() -> None:
    gate = CommandGate(clock=lambda: NOW)
    logs, restarts = commands(Containers(), gate), RestartCommands(T, ME, Containers(), None, gate=gate)  # type: ignore[arg-type]
    assert not logs.accept(logs_message(node="n2"))  # another node's
    assert not logs.accept(Message(T.restart(ME, ITEM), b'{"id": "r1", "ts": 1000000}', False))
    assert not logs.accept(logs_message(lines=201))
    assert not logs.accept(logs_message(retain=True))
    assert not logs.accept(logs_message(ts=0))
    assert logs.accept(logs_message(lines=2))
    assert not logs.accept(logs_message())  # the same id again
    assert not restarts.accept(
        Message(T.restart(ME, ITEM), b'{"id": "c1", "ts": 1000000}', False)
    )  # one gate


def test_the_reply_is_the_masked_tail_published_once_not_retained() -> None:
    docker = Containers(b"start\nDB is file-secret-99\nkey tok-from-env-1234 PLAIN visible\nlast\n")
    logs, stop = commands(docker), threading.Event()
    assert logs.accept(logs_message(lines=3))
    recorder = Recorder(stop)
    logs.serve(stop, recorder)
    [(topic, reply, retain)] = recorder.sent
    check_payload("actual-reply", reply)
    assert topic == T.reply(ME, "c1") and retain is False
    assert reply["lines"] == ["DB is ***", "key *** PLAIN visible", "last"] and reply["truncated"] is True
    assert docker.asked == [("cid", 4)]  # one more than asked: whether older lines were left out


def test_other_nodes_unmanaged_and_the_agents_own_containers_get_an_error_and_no_line() -> None:
    docker = Containers()
    logs = commands(docker)
    for item in ("e.other.0", "e.nothing.0", "e.agent.0"):
        reply = logs.answer(LogRequest("c1", item, 50))
        check_payload("actual-reply", reply)
        assert reply["lines"] == [] and reply["error"], reply
    assert docker.asked == []


def test_a_tail_is_bounded_in_bytes() -> None:
    long = b"".join(b"%05d " % i + b"x" * 1000 + b"\n" for i in range(200))
    reply = commands(Containers(long)).answer(LogRequest("c1", ITEM, 200))
    assert sum(len(line.encode()) + 1 for line in reply["lines"]) <= MAX_BYTES and reply["truncated"]
    assert reply["lines"][-1].startswith("00199 ")
