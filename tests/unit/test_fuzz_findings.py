"""Regressions for what the fuzz suite (``tests/fuzz``) found, each reduced to its smallest
input: the fuzzers keep the class of input covered, these keep the exact case."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from node_agent.commands import RestartCommands
from node_agent.desired import DesiredStore
from node_agent.errors import MAX_ERROR_CHARS
from node_agent.reporting import ActualReporter
from phrame.config_repo import Problem, load_directory
from phrame.mqtt import Message
from schemas import Topics
from tests.support import agent_support as spec
from tests.unit.test_validate_limits import problems_of

T = Topics()


def where(problems: list[Problem]) -> list[tuple[str, str, int, int]]:
    return [(p.file, p.rule, p.line, p.column) for p in problems]


def test_a_file_that_is_one_tagged_scalar_is_a_schema_problem_at_line_1(tmp_path: Path) -> None:
    """``!!str 0`` as a whole file: ruamel keeps a tagged scalar with no line; validation
    raised TypeError while placing the schema error."""
    problems = problems_of(tmp_path, {"environments/lab/environment.yaml": "!!str 0\n"})
    assert where(problems) == [("environments/lab/environment.yaml", "schema", 1, 1)]


def test_an_anchor_defined_twice_is_read_silently_the_later_one_wins(tmp_path: Path) -> None:
    """YAML 1.2 lets an anchor be defined again (an alias names the latest). ruamel warned
    through ``warnings`` (a multi-line message on config-sync's stderr per file, and an
    exception wherever warnings are errors, as in these tests) instead of reading it."""
    text = "name: n1\nlabels:\n  a: &v x\n  b: &v y\n  c: *v\n"
    assert problems_of(tmp_path, {"nodes/n1.yaml": text}) == []
    repo, _ = load_directory(tmp_path / "repo")
    assert repo.nodes["n1"].data["labels"] == {"a": "x", "b": "y", "c": "y"}


# -- the node agent: what a refused payload costs the status and the log --------------------

HUGE = "y" * 100_000


def test_a_refused_payload_quoting_a_huge_value_makes_a_short_status_error() -> None:
    """The schema error quoted the whole value: one refused payload of 1 MiB made a 1 MiB
    line in the node status (published at every pass, one per refused topic)."""
    store = DesiredStore(T, "n1")
    doc = spec.container("e", "web")
    doc["labels"] = {"a": [HUGE]}
    topic = T.desired_item("n1", "containers", "e.web.0")
    store.apply(topic, json.dumps(doc).encode())
    (error,) = store.errors().values()
    assert len(error) <= MAX_ERROR_CHARS
    assert error.startswith(f"{topic}: desired-container: /labels/a: ")
    assert error.endswith("is not of type 'string'")  # what is wrong survives the cut


def test_a_refused_restart_command_logs_a_short_line(caplog: pytest.LogCaptureFixture) -> None:
    commands = RestartCommands(T, "n1", docker=None, own_container_id=None)  # type: ignore[arg-type]
    msg = Message(T.restart("n1", "e.web.0"), json.dumps([HUGE]).encode(), False)
    with caplog.at_level(logging.WARNING):
        assert not commands.accept(msg)
    (record,) = caplog.records
    assert len(record.getMessage()) <= MAX_ERROR_CHARS + 200
    assert "is not of type 'object'" in record.getMessage()


def test_a_refused_payload_with_a_lone_surrogate_key_leaves_a_status_that_encodes() -> None:
    """``{"env": {"\\ud800": {}}}``: the schema error's pointer held the key as it is, and
    the status carrying it could not be encoded: every pass failed at its report. (The strict
    reader now refuses the payload first; the error still names the key, escaped.)"""
    store = DesiredStore(T, "n1")
    doc = spec.container("e", "web")
    doc["env"] = {"\ud800": {"": None}}
    topic = T.desired_item("n1", "containers", "e.web.0")
    store.apply(topic, json.dumps(doc).encode())  # ensure_ascii: the surrogate as an escape
    (error,) = store.errors().values()
    assert "\\ud800" in error
    sent: list[bytes | None] = []
    reporter = ActualReporter(Recorder(sent), T, "n1", inspect=lambda _ref: {})
    assert reporter.report_status("online", errors=[error])
    assert json.loads(sent[0] or b"")["errors"] == [error]


class Recorder:
    def __init__(self, sent: list[bytes | None]) -> None:
        self.sent = sent

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        self.sent.append(payload)


def test_a_merge_of_a_set_is_a_problem_at_its_place(tmp_path: Path) -> None:
    """``<<: !!set {a}``: ruamel's merge took the set for a mapping and raised
    AttributeError, which escaped validation as a traceback."""
    text = "name: web\nimage: x:1\nenv:\n  <<: !!set {a}\n"
    (p,) = problems_of(tmp_path, {"environments/lab/services/web.yaml": text})
    assert where([p]) == [("environments/lab/services/web.yaml", "yaml-syntax", 4, 3)]
    assert "merge" in p.message
