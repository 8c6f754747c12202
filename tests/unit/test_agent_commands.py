"""Restart commands: a retained, stale, future or repeated command is dropped (and logged
with why); a fresh one with a new id runs once. On a fake clock; no Docker."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from node_agent.commands import RestartCommands
from node_agent.models import MANAGED, NODE, ObservedContainer
from phrame.mqtt import Message
from schemas import Topics
from tests.support.agent_support import item_labels

T = Topics()
NODE_NAME = "n1"
ITEM = "e.web.0"


class Containers:
    def __init__(self) -> None:
        labels = {MANAGED: "true", NODE: NODE_NAME, **item_labels(ITEM)}
        self.found = [ObservedContainer("cid", ITEM, "running", labels)]
        self.restarted: list[str] = []

    def list_containers(self) -> list[ObservedContainer]:
        return self.found

    def restart(self, name: str) -> None:
        self.restarted.append(name)


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def command(*, retain: bool = False, **fields: Any) -> Message:
    return Message(T.restart(NODE_NAME, ITEM), json.dumps(fields).encode(), retain)


@pytest.fixture
def setup() -> tuple[RestartCommands, Containers, Clock]:
    docker, clock = Containers(), Clock()
    return RestartCommands(T, NODE_NAME, docker, None, max_age_s=60.0, clock=clock), docker, clock


def test_a_fresh_command_runs_once_by_its_id(setup, caplog: pytest.LogCaptureFixture) -> None:
    commands, docker, clock = setup
    assert commands.accept(command(id="a1", ts=clock.now - 5))
    assert commands.run() == [] and docker.restarted == ["cid"]
    with caplog.at_level(logging.WARNING):
        assert not commands.accept(command(id="a1", ts=clock.now - 5))  # the same command again
    assert commands.run() == [] and docker.restarted == ["cid"]
    assert "already ran" in caplog.text and "a1" in caplog.text
    assert commands.accept(command(id="a2", ts=clock.now)) and commands.run() == []
    assert docker.restarted == ["cid", "cid"]


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (command(retain=True, id="r1", ts=Clock.now), "retained"),
        (command(id="s1", ts=0), "old"),
        (command(id="s2", ts=Clock.now - 61), "old"),
        (command(id="f1", ts=Clock.now + 3600), "future"),
        (command(ts=Clock.now), "'id' is a required property"),
        (command(id="n1"), "'ts' is a required property"),
    ],
)
def test_retained_stale_future_or_incomplete_commands_are_dropped_with_why(
    setup, caplog: pytest.LogCaptureFixture, message: Message, why: str
) -> None:
    commands, docker, _ = setup
    with caplog.at_level(logging.WARNING):
        assert not commands.accept(message)
    assert commands.run() == [] and docker.restarted == []
    assert why in caplog.text and ITEM in caplog.text


def test_the_memory_of_ids_is_bounded() -> None:
    docker, clock = Containers(), Clock()
    commands = RestartCommands(T, NODE_NAME, docker, None, max_age_s=60.0, clock=clock, max_ids=3)
    for i in range(5):
        assert commands.accept(command(id=f"x{i}", ts=clock.now))
    assert len(commands.seen) == 3
    clock.now += 61  # every id is older than a command may be: forgotten
    assert commands.accept(command(id="late", ts=clock.now)) and len(commands.seen) == 1
