"""Canonical JSON, the item digest, and the one strict way to read a JSON payload.

The digest identifies a desired item's spec: the agent recreates a container when it
changes, so it must depend only on the spec's content, never on key order or on the
commit that produced it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any


def canonical_json(value: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no insignificant whitespace."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(spec: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``spec`` (the spec alone, no commit)."""
    return "sha256:" + hashlib.sha256(canonical_json(spec)).hexdigest()


# Lists and objects nest at most this deep in a payload (ours need < 10; the config files'
# YAML reader has the same limit): deep enough for any report, far from the parser's limit.
MAX_JSON_DEPTH = 64
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # or raw: b"\xed" (U+D000...U+DFFF)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is too large for a float")
    return value


# one decoder for every call (json.loads with hooks would build one per call)
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)


def load_json(data: bytes | str, *, max_depth: int | None = MAX_JSON_DEPTH) -> Any:
    """Strict ``json.loads`` that fails only with ``ValueError``, whatever the input.

    Every reader of outside input (MQTT payloads, webhook bodies, kv writes, the mirrors'
    snapshots) uses it. Refused, each with a message saying why: bad UTF-8, bad JSON,
    ``NaN``/``Infinity`` and numbers too large for a float (no JSON writer can echo them),
    a lone surrogate ``\\ud800`` (no UTF-8 writer can), and nesting past ``max_depth``
    levels of lists and objects (``None``: only the parser's own limit, for a large document
    whose parts were checked when they came in, such as a mirror's snapshot). Deep nesting
    is a ValueError here, never the parser's RecursionError (which would get past a
    reader's ``except ValueError``).
    """
    if isinstance(data, str):
        text, raw = data, data.encode("utf-8", "surrogatepass")
    else:  # as json.loads decodes bytes (UTF-8, -16 or -32; a UnicodeDecodeError is a ValueError)
        text, raw = data.decode(json.detect_encoding(data), "surrogatepass"), data
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        limit = "past the parser's limit" if max_depth is None else f"more than {max_depth} levels"
        raise ValueError(f"JSON nested too deeply ({limit})") from None
    # only a payload with that many brackets, or an escape that may be a surrogate, is walked
    deep = max_depth is not None and raw.count(b"[") + raw.count(b"{") > max_depth
    maybe_surrogate = b"\xed" in raw or (b"\\u" in raw and _ESCAPED_SURROGATE.search(raw) is not None)
    if deep or maybe_surrogate or (isinstance(data, str) and not data.isascii()):
        _check_value(value, max_depth)
    return value


def _check_value(value: Any, max_depth: int | None) -> None:
    """Depth and lone surrogates of a parsed value, without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, list | dict):
            if max_depth is not None and depth >= max_depth:
                raise ValueError(f"JSON nested too deeply (more than {max_depth} levels)")
            if isinstance(item, dict):
                for key, inner in item.items():
                    _check_text(key)
                    stack.append((inner, depth + 1))
            else:
                stack.extend((inner, depth + 1) for inner in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"string {text[:40]!r} holds a lone surrogate (not valid Unicode)") from None
