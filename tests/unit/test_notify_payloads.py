"""config_sync.notify.payloads: the Slack message and the phrame.notify/v1 document (pure)."""

from __future__ import annotations

import json

from config_sync.notify.events import Transition
from config_sync.notify.payloads import body, json_document, slack_message
from schemas import check_payload

SHA = "0123456789abcdef" * 2 + "01234567"
FAILED = Transition(
    "studio-a",
    SHA,
    "main",
    "progressing",
    "failed",
    ("edge-01: pull failed: manifest for <img> & co not found",),
    url="https://gitlab.example.test/ops/phrame-config/-/commit/" + SHA,
    at=1764855000.123456,
)


def test_the_json_document_follows_its_schema() -> None:
    doc = json_document(FAILED, "failed", "pager")
    check_payload("notify-event", doc)
    assert doc == {
        "schema": "phrame.notify/v1",
        "event": "failed",
        "environment": "studio-a",
        "commit": SHA,
        "ref": "main",
        "state": "failed",
        "previous_state": "progressing",
        "reasons": ["edge-01: pull failed: manifest for <img> & co not found"],
        "url": FAILED.url,
        "at": 1764855000.123,
        "target": "pager",
    }
    recovered = Transition("studio-a", SHA, "main", "progressing", "healthy", at=5.0)
    check_payload("notify-event", json_document(recovered, "recovered", "pager"))
    many = Transition("studio-a", SHA, "main", "healthy", "degraded", tuple(f"r{i}" for i in range(50)))
    doc = json_document(many, "degraded", "pager")
    assert len(doc["reasons"]) == 20
    check_payload("notify-event", doc)


def test_the_slack_message_has_text_and_blocks_with_node_text_escaped() -> None:
    msg = slack_message(FAILED, "failed")
    headline = f":red_circle: *studio-a*: deployment failed at `{SHA[:12]}` (main) <{FAILED.url}|details>"
    reason = "• edge-01: pull failed: manifest for &lt;img&gt; &amp; co not found"
    assert msg == {
        "text": f"{headline}\n{reason}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": headline}},
            {"type": "section", "text": {"type": "mrkdwn", "text": reason}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": "progressing → failed"}]},
        ],
    }
    recovered = slack_message(Transition("studio-a", SHA, "main", "progressing", "healthy"), "recovered")
    assert (
        recovered["text"] == f":large_green_circle: *studio-a*: deployment recovered at `{SHA[:12]}` (main)"
    )
    assert [b["type"] for b in recovered["blocks"]] == ["section", "context"]


def test_a_huge_reason_is_clipped_to_what_slack_takes() -> None:
    long = Transition("studio-a", SHA, "main", "progressing", "failed", ("x" * 10_000,))
    msg = slack_message(long, "failed")
    assert len(msg["text"]) == 3000 and msg["text"].endswith("…")
    assert all(len(b["text"]["text"]) <= 3000 for b in msg["blocks"] if b["type"] == "section")


def test_body_is_utf8_json_of_the_target_format() -> None:
    assert json.loads(body(FAILED, "failed", target="ops", format="slack")) == slack_message(FAILED, "failed")
    assert json.loads(body(FAILED, "failed", target="ops", format="json"))["target"] == "ops"
