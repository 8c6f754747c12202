"""``phrame status``'s summary of retained topics: what is healthy and what needs attention."""

from __future__ import annotations

import json

from phrame.status_view import render_text, summarize
from schemas import Topics

T = Topics()
NOW = 1_000_000.0


def raw(doc: object) -> bytes:
    return json.dumps(doc).encode()


def healthy() -> dict[str, bytes]:
    return {
        T.status("edge-01"): raw({"state": "online", "converged": True, "generation": 3, "commit": "a" * 40}),
        T.heartbeat("edge-01"): raw({"ts": NOW - 4, "seq": 9, "interval_s": 5, "host": dict.fromkeys(
            ["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)}),
        T.env_sync("studio-a"): raw({"environment": "studio-a", "ref": "main", "ok": True,
                                      "last_applied": {"commit": "a" * 40}, "last_attempted": {"commit": "a" * 40}}),
        T.env_service("studio-a", "tams"): b"{}",  # not a status topic: ignored
    }  # fmt: skip


def test_all_online_converged_and_synced_is_healthy() -> None:
    s = summarize(healthy(), NOW, T)
    assert s.is_healthy
    (node,) = s.nodes
    assert (node.node, node.generation, node.heartbeat_age_s) == ("edge-01", 3, 4.0)
    assert "healthy" in render_text(s).splitlines()[-1]


def test_offline_node_failed_sync_unassigned_and_gc_need_attention() -> None:
    topics = healthy()
    topics[T.status("edge-02")] = raw({"state": "offline"})
    topics[T.env_sync("studio-a")] = raw({"environment": "studio-a", "ref": "main", "ok": False,
        "errors": [{"file": "nodes/x.yaml", "line": 3, "message": "bad"}]})  # fmt: skip
    topics[T.env_placement("studio-a")] = raw({"environment": "studio-a", "gc_candidates": ["edge-09"],
        "unassigned": [{"replica": "mixer.1", "reason": "no node with role=edge has 3 CPUs free"}]})  # fmt: skip
    s = summarize(topics, NOW, T)
    assert not s.is_healthy
    text = render_text(s)
    assert "nodes/x.yaml:3: bad" in text
    assert "mixer.1: no node with role=edge has 3 CPUs free" in text
    assert "node edge-09 has been offline past PHRAME_NODE_GC_S" in text
    assert text.splitlines()[-1] == "needs attention"


def test_invalid_payload_is_reported_not_trusted() -> None:
    topics = {T.status("edge-01"): b'{"state": "sleeping"}', T.heartbeat("edge-01"): b"not json"}
    (node,) = summarize(topics, NOW, T).nodes
    assert node.state == "unknown" and len(node.errors) == 2
    assert all("invalid payload" in e for e in node.errors)
