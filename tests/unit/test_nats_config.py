"""The accounts and grants in NATS's permission form (phrame broker-config --format nats)."""

from __future__ import annotations

import pytest

from phrame.mqtt.nats_config import grants_of, nats_auth_text, nats_subjects


@pytest.mark.parametrize(
    ("topic_filter", "subjects"),
    [
        ("phrame/desired/#", ["phrame.desired", "phrame.desired.>"]),  # X/# is X and below
        ("phrame/actual/nodes/+/status", ["phrame.actual.nodes.*.status"]),
        ("p.x/desired/nodes/a/#", ["p//x.desired.nodes.a", "p//x.desired.nodes.a.>"]),  # a '.' in a level
        ("#", [">"]),
    ],
)
def test_a_topic_filter_becomes_the_subjects_nats_checks(topic_filter: str, subjects: list[str]) -> None:
    assert nats_subjects(topic_filter) == subjects


def test_an_empty_level_is_refused() -> None:
    with pytest.raises(ValueError, match="empty topic level"):
        nats_subjects("a//b")


def test_readwrite_grants_both_and_read_only_publishes_nothing() -> None:
    assert grants_of([("readwrite", "p/a/#"), ("read", "p/b")]) == {
        "publish": ["p.a", "p.a.>"],
        "subscribe": ["p.a", "p.a.>", "p.b"],
    }


def test_every_account_and_node_has_a_user_with_a_password_variable() -> None:
    text = nats_auth_text(["edge-01", "core-01"], "phrame")
    for account in ("config-sync", "placement", "mirror-desired", "mirror-actual", "topic-api", "observer"):
        assert f'{{user: "{account}", password: $pw_{account.replace("-", "_")},' in text
    node = next(line for line in text.splitlines() if '"node-edge-01"' in line)
    assert '"phrame.desired.nodes.edge-01.>"' in node and "edge-02" not in node and "core-01" not in node
    mirror = next(line for line in text.splitlines() if '"mirror-desired"' in line)
    assert 'publish: {deny: [">"]}' in mirror  # read-only: nothing to publish
    assert text.index('include "nats-passwords.conf"') < text.index("authorization {")
