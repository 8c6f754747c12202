"""Canonical JSON, the item digest, and the one safe way to read a JSON payload.

The digest identifies a desired item's spec: the agent recreates a container when it
changes, so it must depend only on the spec's content, never on key order or on the
commit that produced it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no insignificant whitespace."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(spec: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``spec`` (the spec alone, no commit)."""
    return "sha256:" + hashlib.sha256(canonical_json(spec)).hexdigest()


def load_json(data: bytes | str) -> Any:
    """``json.loads`` that fails only with ``ValueError``, whatever the input.

    Every reader of outside input (MQTT payloads, webhook bodies) uses it: bad UTF-8, bad
    JSON and numbers too long to convert are ValueErrors already, but nesting too deep for
    the parser is a RecursionError, which would get past a reader's ``except ValueError``.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
