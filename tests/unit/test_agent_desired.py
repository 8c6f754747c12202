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


def _publish(s: DesiredStore, specs: list[dict], generation: int) -> None:
    for spec_doc in specs:
        s.apply(T.desired_item(NODE, "containers", spec_doc["name"]), json.dumps(spec_doc).encode())
    s.apply(T.manifest(NODE), json.dumps(spec.manifest(specs, generation=generation)).encode())


def test_a_stale_replay_never_takes_the_node_back_below_what_it_applied():
    """A broker node serving an older retained set (a clustered broker's lagging index)
    replays generation 2 after the agent applied 3: the state stays at 3, complete."""
    s = store()
    v2, v3 = spec.container("e", "web", env={"V": "2"}), spec.container("e", "web", env={"V": "3"})
    _publish(s, [v2], 2)
    _publish(s, [v3], 3)
    s.applied(3)
    _publish(s, [v2], 2)  # the replay of the stale node: items, then its manifest
    d = s.snapshot()
    assert d.manifest is not None and d.manifest.generation == 3
    assert d.is_complete and d.containers == {"e.web.0": v3}
    assert s.stale_manifests == 1
    # a newer generation still goes in, its items in any order
    v4 = spec.container("e", "web", env={"V": "4"})
    _publish(s, [v4], 4)
    assert s.snapshot().containers == {"e.web.0": v4}


def test_the_manifest_picks_the_item_payload_it_lists_among_those_received():
    """Items arrive before their manifest; a replay may bring an older payload after the
    newer one: the store keeps the last few payloads of an item, the manifest picks."""
    s = store()
    v1, v2 = spec.container("e", "web", env={"V": "1"}), spec.container("e", "web", env={"V": "2"})
    topic = T.desired_item(NODE, "containers", "e.web.0")
    s.apply(topic, json.dumps(v2).encode())
    s.apply(topic, json.dumps(v1).encode())  # older, replayed after
    s.apply(T.manifest(NODE), json.dumps(spec.manifest([v2], generation=2)).encode())
    assert s.snapshot().is_complete and s.snapshot().containers == {"e.web.0": v2}
    assert s.apply(topic, b"")  # a clear forgets every payload of the item
    assert not s.snapshot().is_complete


def test_a_read_back_never_takes_back_a_manifest_received_but_not_yet_applied():
    """Live: generation 3 arrives (not applied yet). A read-back from a lagging broker node
    brings generation 2 (retained): ignored. A live generation 2 (config-sync numbering
    again after losing its state and the broker's) is taken: only the applied one bounds it."""
    s = store()
    v2, v3 = spec.container("e", "web", env={"V": "2"}), spec.container("e", "web", env={"V": "3"})
    man2 = json.dumps(spec.manifest([v2], generation=2)).encode()
    _publish(s, [v3], 3)
    s.apply(T.desired_item(NODE, "containers", "e.web.0"), json.dumps(v2).encode(), retained=True)
    assert not s.apply(T.manifest(NODE), man2, retained=True)
    assert s.snapshot().containers == {"e.web.0": v3} and not s.is_waiting()
    assert s.apply(T.manifest(NODE), man2)
    assert s.snapshot().containers == {"e.web.0": v2}


def test_waiting_for_the_rest_of_a_publication():
    s = store()
    assert s.is_waiting()  # no manifest
    v1, v2 = spec.container("e", "web", env={"V": "1"}), spec.container("e", "web", env={"V": "2"})
    _publish(s, [v1], 1)
    assert not s.is_waiting()
    s.apply(T.desired_item(NODE, "containers", "e.web.0"), json.dumps(v2).encode())
    assert s.is_waiting()  # an item newer than its manifest: the manifest is on its way (or lost)
    assert s.snapshot().is_complete  # meanwhile generation 1 still holds, whole
    _publish(s, [v2], 2)
    assert not s.is_waiting()
    s.apply(T.manifest(NODE), json.dumps(spec.manifest([v2, spec.container("e", "db")], 3)).encode())
    assert s.is_waiting()  # an item listed, not received
