"""Which reader reads a YAML file is a decision with a named reason, never a swallowed error.

The fast reader (libyaml, ``yaml_events``) declines the forms it does not construct, each
with a reason that is logged; ruamel.yaml reads those files. Any other exception inside the
fast reader is a bug and reaches the caller instead of being hidden behind ruamel's reading.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from phrame.config_repo import yaml_events
from phrame.config_repo.yaml_reading import parse_json, parse_yaml
from phrame.config_repo.yaml_scalars import Fallback

LOGGER = "phrame.config_repo.yaml_reading"


@pytest.mark.parametrize(
    ("text", "reason", "data"),
    [
        ("base: &b {x: 1}\nall:\n  <<: *b\n  y: 2\n", "<<", {"base": {"x": 1}, "all": {"x": 1, "y": 2}}),
        ("port: 0x1F\n", "0x1F", {"port": 31}),
        ("when: 2026-01-01T10:00:00Z\n", "2026-01-01T10:00:00Z", None),
        ("%YAML 1.2\n---\na: 1\n", "directive", {"a": 1}),
        ("a: !!set {x}\n", "collection tag tag:yaml.org,2002:set", None),
        ("a: !!binary aGk=\n", "tag:yaml.org,2002:binary", None),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "depth", None),
        ("a: [1, 2\n", "libyaml: ", None),
    ],
)
def test_a_declined_file_is_read_by_ruamel_and_the_reason_is_logged(
    caplog: pytest.LogCaptureFixture, text: str, reason: str, data: Any
) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        doc, problems = parse_yaml("svc.yaml", text.encode())
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.DEBUG
    assert record.getMessage().startswith("svc.yaml: read with ruamel.yaml")
    assert f"({reason}" in record.getMessage()
    if data is not None:
        assert problems == [] and doc is not None and doc.data == data


def test_an_ordinary_file_is_no_decision_to_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        doc, problems = parse_yaml("svc.yaml", b"name: web\nimage: x:1\nports: [80]\n")
    assert doc is not None and not problems
    assert [r for r in caplog.records if r.name == LOGGER] == []


class FastReaderBug(Exception):
    pass


def test_a_bug_in_the_fast_reader_is_raised_not_read_around(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_value: str) -> Any:
        raise FastReaderBug("a bug in the fast reader")

    monkeypatch.setattr(yaml_events, "plain_scalar", broken)
    with pytest.raises(FastReaderBug):
        parse_yaml("svc.yaml", b"name: web\n")
    with pytest.raises(FastReaderBug):  # JSON files take their positions from the fast reader
        parse_json("node.json", b'{"replicas": 2}')


def test_the_declined_reason_is_what_the_fast_reader_named() -> None:
    with pytest.raises(Fallback) as caught:
        yaml_events.compose("a: 1\n---\nb: 2\n", max_values=None, max_depth=50, growth=10, slack=10)
    assert caught.value.reason == "several documents"
