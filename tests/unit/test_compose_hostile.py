"""Bad input never escapes as a traceback: a compose value of the wrong type is a
ComposeError with its line (compose refuses such files too), and a desired payload that
fails its schema is left out of an export and named in its header."""

from __future__ import annotations

import itertools

import pytest
from ruamel.yaml import YAML

from phrame.compose import ComposeError, export_node, import_compose
from schemas import Topics
from tests.support.compose_repo import container_payload

KEYS = ["image", "command", "environment", "ports", "volumes", "networks", "healthcheck", "restart", "depends_on",
        "labels", "deploy", "scale", "cpus", "mem_limit", "extra_hosts", "ulimits", "logging", "stop_signal",
        "network_mode", "user", "pull_policy"]  # fmt: skip
BAD = ["5", "[5, {a: 1}]", "{a: [1]}", "'x'", "true", "{}", "[]", "{replicas: two, resources: 5}", "[[1]]"]


@pytest.mark.parametrize(("key", "value"), list(itertools.product(KEYS, BAD)))
def test_a_wrong_type_is_a_compose_error_or_a_note(key: str, value: str) -> None:
    text = (
        f"services:\n  a:\n    image: busybox\n    {key}: {value}\n"
        if key != "image"
        else f"services:\n  a:\n    image: {value}\n"
    )
    try:
        result = import_compose(text, env="demo", node="n1")
    except ComposeError as e:
        assert e.line >= 2 and "a" in e.message
        return
    assert isinstance(result.files, dict)


def test_a_wrong_type_names_the_key_and_line() -> None:
    with pytest.raises(ComposeError) as e:
        import_compose("services:\n  a:\n    image: busybox\n    ports: 5\n", env="demo", node="n1")
    assert e.value.line == 4 and "ports" in e.value.message


@pytest.mark.parametrize(
    "top",
    [
        "networks: {back: 5}",
        "networks: {back: {labels: 5, ipam: {config: 5}}}",
        "volumes: {v: [1]}",
        "x-phrame: 5",
        "x-phrame: {secrets: [1]}",
    ],
)
def test_odd_top_level_values_do_not_crash(top: str) -> None:
    try:
        import_compose(
            f"services:\n  a:\n    image: busybox\n    networks: [back]\n{top}\n", env="demo", node="n1"
        )
    except ComposeError as e:
        assert e.line >= 1


def test_an_invalid_payload_is_left_out_of_the_export_and_named() -> None:
    good_topic, good = container_payload("a", "web", 0)
    bad_topic, bad = container_payload("a", "api", 0)
    del bad["image"]
    net_topic = Topics().desired_item("n1", "networks", "a.back")
    text = export_node({good_topic: good, bad_topic: bad, net_topic: {"kind": "network", "driver": 5}}, "n1")
    doc = YAML(typ="safe").load(text)
    assert list(doc["services"]) == ["web"] and "networks" not in doc
    assert "left out (invalid payload): containers/a.api.0" in text and "networks/a.back" in text
