"""The mirror's snapshot bytes: the incremental encoding (each topic's JSON kept between
snapshots, joined in order) equals one ``json.dumps`` of the whole document, byte for byte,
through sets, updates, clears and invalid payloads; and the loop's wake-ups of its writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.encoding import REMOVED, SnapshotEncoder, encode_document
from mirror.loop import MirrorLoop
from phrame.mqtt import Message
from tests.support.mirror import mirror_settings
from tests.unit.test_mqtt_parts import CountingCondition

NODES = "phrame/actual/nodes/"


def full_snapshot(loop: MirrorLoop, head: dict[str, Any]) -> bytes:
    """What the mirror wrote before: the whole document encoded at once."""
    return encode_document(head | {"topics": dict(loop._topics)})


def feed(loop: MirrorLoop, topic: str, payload: bytes) -> None:
    loop.on_message(Message(topic, payload, True))


def test_each_snapshot_equals_the_whole_document_encoded_at_once(tmp_path: Path) -> None:
    loop = MirrorLoop(mirror_settings("mqtt://127.0.0.1:1", tmp_path))
    steps: list[list[tuple[str, bytes]]] = [
        [  # the retained plane: values that json.dumps escapes, orders or spells its own way
            (NODES + "b/status", b'{"state":"online","z":1,"a":[1.50,2e3,-0.0,true,null]}'),
            (NODES + "a/heartbeat", b'{"ts":1.0,"seq":1,"interval_s":5,"host":{}}'),
            (
                NODES + "\u00e9t\u00e9/status",
                '{"caf\u00e9":"\u00fc\\u00e9\\n\\"","k":{"y":1,"x":2}}'.encode(),
            ),
            (NODES + "a/containers/web", b'  {"b": 1, "a": {"d": [], "c": {}}}  '),
            (NODES + "a/containers/\U0001f600", b'"\\ud83d\\ude00"'),
            (NODES + "c/status", b'{"n":123456789012345678901234567890}'),
        ],
        [  # a heartbeat again, a new topic, a clear, an invalid payload on a held topic
            (NODES + "a/heartbeat", b'{"ts":2.0,"seq":2,"interval_s":5,"host":{"load1":0.1}}'),
            (NODES + "a/containers/db", b"{}"),
            (NODES + "c/status", b""),
            (NODES + "b/status", b"{not json"),
        ],
        [],  # nothing changed
        [  # the invalid topic valid again, a cleared one back, everything else gone
            (NODES + "b/status", b'{"state":"offline"}'),
            (NODES + "c/status", b"[]"),
            (NODES + "a/heartbeat", b""),
            (NODES + "a/containers/web", b""),
            (NODES + "a/containers/db", b""),
            (NODES + "a/containers/\U0001f600", b""),
            (NODES + "\u00e9t\u00e9/status", b""),
        ],
    ]
    for step in steps:
        for topic, payload in step:
            feed(loop, topic, payload)
        head, changes, _ = loop._take()
        assert loop._encoder.encode(head, changes) == full_snapshot(loop, head)
    assert json.loads(full_snapshot(loop, head))["topics"] == {NODES + "b/status": {"state": "offline"},
                                                             NODES + "c/status": []}  # fmt: skip


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
changes_of = st.dictionaries(
    st.sampled_from(["a", "b", "\u00e9", "a/b", "B", ""]), json_values | st.just(REMOVED)
)


@settings(max_examples=100, deadline=None)
@given(
    steps=st.lists(changes_of, max_size=6),
    head=st.dictionaries(st.sampled_from(["invalid", "plane", "m"]), json_values),
)
def test_any_changes_give_the_bytes_of_one_dumps(steps: list[dict[str, Any]], head: dict[str, Any]) -> None:
    encoder, held = SnapshotEncoder(), {}
    for changes in steps:
        for topic, value in changes.items():
            if value is REMOVED:
                held.pop(topic, None)
            else:
                held[topic] = value
        assert encoder.encode(head, changes) == encode_document(head | {"topics": held})
        assert len(encoder) == len(held)


def test_the_writer_is_woken_by_the_first_unwritten_change_or_heartbeat_only(tmp_path: Path) -> None:
    loop = MirrorLoop(mirror_settings("mqtt://127.0.0.1:1", tmp_path))
    loop._cond = cond = CountingCondition()
    beat = b'{"ts":1.0,"seq":1,"interval_s":5,"host":{}}'
    for i in range(100):  # a write is due by the first of each kind; the rest change no due time sooner
        feed(loop, f"{NODES}n{i}/heartbeat", beat)
        feed(loop, f"{NODES}n{i}/status", b'{"state":"online"}')
    assert cond.wakeups == 2
    with cond:
        loop._take()
    feed(loop, f"{NODES}n1/heartbeat", beat)
    feed(loop, f"{NODES}n1/heartbeat", beat)
    assert cond.wakeups == 3  # the next snapshot's first heartbeat
