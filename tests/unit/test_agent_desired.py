"""DesiredStore: validation of desired-plane messages and the manifest completeness rule."""

from __future__ import annotations

import json

from node_agent.desired import DesiredStore
from schemas import Topics
from tests.support import agent_support as spec

T = Topics()
NODE = "node-a"


def store() -> DesiredStore:
    return DesiredStore(T, NODE, max_payload_bytes=64 * 1024)


def test_items_and_manifest_make_a_complete_state():
    s = store()
    web, net = spec.container("e", "web"), spec.network("e", "n")
    s.apply_all(spec.topic_messages(spec.topics_doc(NODE, [web, net])))
    d = s.snapshot()
    assert d.containers == {"e.web.0": web} and d.networks == {"e.n": net}
    assert d.is_complete and d.manifest is not None and d.manifest.generation == 1
    assert s.errors() == {}


def test_items_without_a_manifest_are_not_complete():
    s = store()
    s.apply_all(spec.topic_messages(spec.topics_doc(NODE, [spec.container("e", "web")], with_manifest=False)))
    assert not s.snapshot().is_complete


def test_an_empty_payload_clears_the_item():
    s = store()
    web = spec.container("e", "web")
    topic = T.desired_item(NODE, "containers", "e.web.0")
    assert s.apply(topic, json.dumps(web).encode())
    assert not s.apply(topic, json.dumps(web).encode())  # same payload: no change
    assert s.apply(topic, b"")
    assert s.snapshot().containers == {}


def test_invalid_payloads_are_recorded_and_the_last_valid_one_stays():
    s = store()
    web = spec.container("e", "web")
    topic = T.desired_item(NODE, "containers", "e.web.0")
    s.apply(topic, json.dumps(web).encode())
    cases = {
        b"{oops": "invalid JSON",
        b"[" * 50_000: "nested too deeply",  # a RecursionError in the parser
        b'{"n": 1' + b"0" * 5000 + b"}": "invalid JSON",  # an int too long to convert
        json.dumps({**web, "replica": "x"}).encode(): "replica",
        json.dumps({**web, "name": "e.other.0"}).encode(): "does not match",
        b"x" * (64 * 1024 + 1): "exceeds",
    }
    for payload, expected in cases.items():
        assert not s.apply(topic, payload)
        assert expected in s.errors()[topic]
        assert s.snapshot().containers == {"e.web.0": web}
    s.apply(topic, json.dumps(web).encode())
    assert s.errors() == {}  # a valid payload clears the error


def test_another_nodes_topic_is_refused():
    s = store()
    other = T.desired_item("node-b", "containers", "e.web.0")
    assert not s.apply(other, json.dumps(spec.container("e", "web")).encode())
    assert "not for node node-a" in s.errors()[other]
    assert s.snapshot().containers == {}


def test_manifest_with_a_different_digest_is_incomplete():
    s = store()
    old, new = spec.container("e", "web", image="a:1"), spec.container("e", "web", image="a:2")
    doc = spec.topics_doc(NODE, [old])
    doc[T.desired_item(NODE, "containers", "e.web.0")] = new
    s.apply_all(spec.topic_messages(doc))
    assert not s.snapshot().is_complete


def test_with_a_manifest_only_the_items_it_lists_are_desired():
    s = store()
    web, stale, net = spec.container("e", "web"), spec.container("e", "stale"), spec.network("e", "n")
    s.apply_all(spec.topic_messages(spec.topics_doc(NODE, [web, stale, net], with_manifest=False)))
    assert set(s.snapshot().containers) == {"e.web.0", "e.stale.0"}  # no manifest: unknown
    s.apply(T.manifest(NODE), json.dumps(spec.manifest([web], generation=2)).encode())
    d = s.snapshot()
    assert d.containers == {"e.web.0": web} and d.networks == {} and d.is_complete
