"""A heartbeat as the liveness readers take it: its ``ts`` and ``interval_s``, checked.

:class:`phrame.actual.view.ActualView` (config-sync, placement, ``phrame status``) reads
every heartbeat of the fleet (2,000 a second at 10,000 nodes) and uses two of its fields.
The usual payload is decoded as ``load_json`` decodes it (no ``NaN``, no float too large)
and its top level checked here by hand (the schema's required fields, their types and
bounds) instead of the schema validator; anything unusual (an escape that may be a lone
surrogate, more brackets than ``load_json``'s depth, text that is not UTF-8, JSON it cannot
decode, a top level the hand check refuses) takes the strict path, ``load_json`` and the
schema, which say why. ``host`` and ``counts`` are not read here, so their figures are left
to the readers that show them (the topic API checks the whole payload). Pure; raises
``ValueError`` (``PayloadError`` is one) for a payload not to act on.
"""

from __future__ import annotations

import json
import math
from typing import Any

from schemas import MAX_JSON_DEPTH, Topics, check_payload, load_json

SCHEMA = "actual-heartbeat"
# what a liveness reader subscribes to heartbeats with: at most once, no acknowledgement per
# beat (a lost beat is a late one: the next comes within its interval, and liveness allows
# several), so neither the broker nor the reader handles a PUBACK for each of thousands a second
HEARTBEAT_QOS = 0


def liveness_filters(topics: Topics) -> list[tuple[str, int]]:
    """What a liveness reader subscribes to, each filter with its QoS: every node's status
    (QoS 1) and heartbeat (:data:`HEARTBEAT_QOS`)."""
    return [(topics.node_status_filter(), 1), (topics.heartbeat_filter(), HEARTBEAT_QOS)]


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999: no JSON writer can echo it
        raise ValueError(f"number {text[:20]} is too large")
    return value


# NaN and Infinity refused, a float too large for one refused; the C scanner does the rest
_DECODER = json.JSONDecoder(parse_constant=_refuse, parse_float=_finite)


def _is_number(v: object) -> bool:
    return type(v) is float or type(v) is int  # not bool


def heartbeat_fields(payload: bytes) -> tuple[float, float]:
    """(``ts``, ``interval_s``) of a valid heartbeat payload; ``ValueError`` otherwise."""
    doc: Any = None
    ts: Any
    seq: Any
    interval: Any
    if (
        b"\\u" not in payload
        and b"\xed" not in payload
        and payload.count(b"{") + payload.count(b"[") <= MAX_JSON_DEPTH
    ):
        try:
            text = payload.decode()
            # the C scanner alone (JSONDecoder.decode adds two whitespace matches): the
            # agent's canonical JSON has no whitespace around it; any other takes the strict path
            doc, end = _DECODER.scan_once(text, 0)  # type: ignore[attr-defined]
            if end != len(text):
                doc = None
        except (ValueError, StopIteration):  # bad UTF-8 or JSON: the strict path says which
            doc = None
    if not (
        type(doc) is dict
        and _is_number(ts := doc.get("ts"))
        and ts >= 0
        and type(seq := doc.get("seq")) is int
        and seq >= 0
        and _is_number(interval := doc.get("interval_s"))
        and interval > 0
        and type(doc.get("host")) is dict
    ):
        doc = load_json(payload)
        check_payload(SCHEMA, doc)  # refuses it (the hand check is the schema's top level)
    return float(doc["ts"]), float(doc["interval_s"])
