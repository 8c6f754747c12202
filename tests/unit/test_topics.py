"""The topic layout: every builder's output parses back to what built it; anything else is refused."""

from __future__ import annotations

import pytest

from schemas import Topic, Topics, canonical_json, check_payload, digest
from schemas.registry import PayloadError

T = Topics("phrame")


@pytest.mark.parametrize(
    ("topic", "parsed"),
    [
        (T.desired_item("edge-01", "containers", "studio-a.mixer.1"),
         Topic("desired", "containers", "edge-01", "studio-a", "studio-a.mixer.1", "mixer")),
        (T.desired_item("edge-01", "networks", "studio-a.media"),
         Topic("desired", "networks", "edge-01", "studio-a", "studio-a.media", None)),
        (T.desired_item("edge-01", "processes", "studio-a.ptp.0"),
         Topic("desired", "processes", "edge-01", "studio-a", "studio-a.ptp.0", "ptp")),
        (T.manifest("edge-01"), Topic("desired", "manifest", "edge-01")),
        (T.prefetch("edge-01", "studio-a"), Topic("desired", "prefetch", "edge-01", "studio-a")),
        (T.env_service("studio-a", "tams"), Topic("desired", "service", None, "studio-a", None, "tams")),
        (T.env_sync("studio-a"), Topic("desired", "sync", None, "studio-a")),
        (T.env_placement("studio-a"), Topic("desired", "placement", None, "studio-a")),
        (T.env_deploys("studio-a"), Topic("desired", "deploys", None, "studio-a")),
        (T.status("edge-01"), Topic("actual", "status", "edge-01")),
        (T.heartbeat("edge-01"), Topic("actual", "heartbeat", "edge-01")),
        (T.actual_item("edge-01", "containers", "studio-a.tams.0"),
         Topic("actual", "containers", "edge-01", "studio-a", "studio-a.tams.0", "tams")),
        (T.restart("edge-01", "studio-a.tams.0"),
         Topic("cmd", "restart", "edge-01", "studio-a", "studio-a.tams.0", "tams")),
    ],
)  # fmt: skip
def test_build_then_parse(topic: str, parsed: Topic) -> None:
    assert T.parse(topic) == parsed
    assert parsed.schema_name  # every shape has a schema for its payload


def test_layout_strings_match_design() -> None:
    assert T.desired_item("n", "containers", "e.s.0") == "phrame/desired/nodes/n/containers/e.s.0"
    assert T.status("n") == "phrame/actual/nodes/n/status"
    assert T.env_deploys("e") == "phrame/desired/environments/e/deploys"
    assert T.prefetch("n", "e") == "phrame/desired/nodes/n/prefetch/e"
    assert T.restart("n", "e.s.0") == "phrame/cmd/nodes/n/containers/e.s.0/restart"
    assert Topics("site/x").manifest("n") == "site/x/desired/nodes/n/manifest"


@pytest.mark.parametrize(
    "bad",
    [
        "other/desired/nodes/n/manifest",
        "phrame/desired/nodes/N/manifest",
        "phrame/desired/nodes/n/volumes/e.s.0",
        "phrame/desired/nodes/n/containers/../x",
        "phrame/actual/nodes/n/manifest",
        "phrame/cmd/nodes/n/containers/e.s.0/stop",
        "phrame/desired/nodes/n/containers/e.s.0/extra",
        "phrame/desired/nodes/+/manifest",
        "phrame/actual/nodes/n/prefetch/e",
        "phrame/desired/nodes/n/prefetch/E",
        "phrame/desired/nodes/n/prefetch",
    ],
)
def test_parse_refuses_what_does_not_fit(bad: str) -> None:
    with pytest.raises(ValueError):
        T.parse(bad)


def test_builders_refuse_wildcards_and_bad_names() -> None:
    with pytest.raises(ValueError):
        T.status("#")
    with pytest.raises(ValueError):
        T.desired_item("n", "containers", "e/s")
    with pytest.raises(ValueError):
        Topics("bad/#")


def test_digest_is_independent_of_key_order_and_sensitive_to_values() -> None:
    a = {"image": "x:1", "env": {"A": "1", "B": "2"}}
    b = {"env": {"B": "2", "A": "1"}, "image": "x:1"}
    assert digest(a) == digest(b)
    assert canonical_json(a) == b'{"env":{"A":"1","B":"2"},"image":"x:1"}'
    assert digest(a) != digest({**a, "image": "x:2"})
    assert digest(a).startswith("sha256:") and len(digest(a)) == 71


def test_payload_check_names_the_field() -> None:
    check_payload("actual-status", {"state": "online", "converged": True})
    with pytest.raises(PayloadError) as err:
        check_payload("actual-status", {"state": "sleeping"})
    assert "/state" in str(err.value)
