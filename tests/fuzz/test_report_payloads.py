"""Fuzzing the reports the mirror and the topic API read (hypothesis, under the fuzz budget).

One node sends hostile bytes as its heartbeat, status or an item (NaN, Infinity, 1e999,
lone surrogates, nesting up to past the parser's limit, bytes that are no JSON); another
node reports well. The real mirror loop takes each message and writes its snapshot file,
the topic API's reader parses it, indexes it and renders the node rows and topics: every
answer is strict JSON, the good node's row is whole, and a refused report is named in its
sender's row. In process (no broker): the mirror's callback is what the broker would call.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror.loop import MirrorLoop
from mirror.snapshot import SnapshotWriter
from phrame.mqtt import Message
from schemas import Topics
from tests.fuzz.profile import fuzz
from tests.support.mirror import mirror_settings
from tests.support.topic_api import heartbeat
from topic_api.nodes import Receipts, node_summary
from topic_api.responses import ApiJSON
from topic_api.state import ApiState
from topic_api.watcher import read_document

T = Topics()
TOPICS = [T.heartbeat("bad"), T.status("bad"), T.actual_item("bad", "containers", "e.web.0")]
LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(),  # NaN and the infinities too: json.dumps writes them as NaN/Infinity
    st.text(st.characters() | st.characters(categories=["Cs"]), max_size=8),  # lone surrogates
)
DOC = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)  # fmt: skip
DEPTH = st.sampled_from([10, 63, 64, 65, 200, 900, 975, 982, 1000, 5000])
PAYLOAD = st.one_of(
    DOC.map(lambda d: json.dumps(d).encode()),  # escapes: a lone surrogate as \ud800
    DOC.map(lambda d: json.dumps(heartbeat(1.0) | {"x": d}).encode()),
    DEPTH.map(lambda n: b"[" * n + b"]" * n),
    DEPTH.map(lambda n: b'{"ts": 1, "x": ' + b'{"a":' * n + b"1" + b"}" * n + b"}"),
    st.sampled_from([b"NaN", b"[Infinity]", b'{"ts": -Infinity}', b"[1e999]", b'"\\ud800"', b"\xed\xa0\x80"]),
    st.binary(max_size=64),
)


def strict(data: bytes) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"answer holds {name}")

    return json.loads(data, parse_constant=refuse)


def test_hostile_reports_reach_only_their_senders_row(tmp_path: Path) -> None:
    loop = MirrorLoop(mirror_settings("mqtt://127.0.0.1:1", tmp_path))
    good = json.dumps(heartbeat(time.time())).encode()

    @settings(fuzz(0.5), deadline=None, suppress_health_check=list(HealthCheck))
    @given(topic=st.sampled_from(TOPICS), payload=PAYLOAD)
    def check(topic: str, payload: bytes) -> None:
        loop.on_message(Message(T.heartbeat("good"), good, True))
        loop.on_message(Message(topic, payload, True))
        head, changes, _ = loop._take()
        writer = SnapshotWriter(tmp_path / "actual.json")
        assert writer.write(loop._encoder.encode(head, changes))
        state = ApiState("phrame")
        now = time.time()
        state.apply("actual", read_document(writer.path), now)
        rows = {}
        for name in state.node_names():
            node = state.planes["actual"].index.nodes.get(name)
            receipts = Receipts(state.view.verdict(name, now))
            rows[name] = node_summary(name, None, node, receipts, now=now, timeout_s=20)
        strict(ApiJSON({"nodes": list(rows.values())}).body)
        strict(ApiJSON({"topics": state.all_topics()}).body)
        assert rows["good"]["online"] and rows["good"]["errors"] == [], rows["good"]
        if topic in head["invalid"]:
            assert topic not in state.all_topics()
            assert any(topic in e for e in rows["bad"]["errors"]), rows["bad"]
        loop.on_message(Message(topic, b"", True))  # cleared: the next example starts clean

    check()
