"""The bodies sent to a target, purely: a Slack-compatible message or the ``phrame.notify/v1`` document.

:class:`~config_sync.notify.notifier.Notifier` calls :func:`body` once per recipient. The
JSON document follows ``schemas/json/notify-event.schema.json``; the Slack message has the
``text`` every Slack-compatible receiver reads (Mattermost, Rocket.Chat, Discord's ``/slack``
endpoint) and ``blocks`` for Slack itself. Text from nodes (reasons) is escaped, never markup.
"""

from __future__ import annotations

from typing import Any

from config_sync.notify.events import MAX_REASONS, RECOVERED, Transition
from schemas import canonical_json

SCHEMA = "phrame.notify/v1"
SLACK_SECTION_CHARS = 3000  # Slack refuses a section text longer than this
HEADLINES = {
    "failed": (":red_circle:", "deployment failed"),
    "degraded": (":large_orange_circle:", "deployment degraded"),
    "suspended": (":double_vertical_bar:", "deployment suspended"),
    RECOVERED: (":large_green_circle:", "deployment recovered"),
}


def json_document(transition: Transition, event: str, target: str) -> dict[str, Any]:
    """The generic JSON document (schema ``phrame.notify/v1``)."""
    return {
        "schema": SCHEMA,
        "event": event,
        "environment": transition.environment,
        "commit": transition.commit,
        "ref": transition.ref,
        "state": transition.state,
        "previous_state": transition.previous,
        "reasons": list(transition.reasons[:MAX_REASONS]),
        "url": transition.url,
        "at": round(transition.at, 3),
        "target": target,
    }


def _escape(text: str) -> str:
    """Slack's three control characters of mrkdwn; everything else stays as written."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_message(transition: Transition, event: str) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (the whole message) and ``blocks``."""
    emoji, what = HEADLINES[event]
    env, short = _escape(transition.environment), transition.commit[:12]
    headline = f"{emoji} *{env}*: {what} at `{short}` ({_escape(transition.ref)})"
    if transition.url:
        headline += f" <{_escape(transition.url)}|details>"
    reasons = "\n".join(f"• {_escape(r)}" for r in transition.reasons[:MAX_REASONS])
    context = f"{transition.previous} → {transition.state}"
    text = _clip("\n".join(p for p in (headline, reasons) if p), SLACK_SECTION_CHARS)
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(headline, SLACK_SECTION_CHARS)}}
    ]
    if reasons:
        section = {"type": "mrkdwn", "text": _clip(reasons, SLACK_SECTION_CHARS)}
        blocks.append({"type": "section", "text": section})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": text, "blocks": blocks}


def body(transition: Transition, event: str, *, target: str, format: str) -> bytes:
    """The UTF-8 JSON bytes POSTed to a target of ``format`` (``slack`` or ``json``)."""
    if format == "slack":
        return canonical_json(slack_message(transition, event))
    return canonical_json(json_document(transition, event, target))
