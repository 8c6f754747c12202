"""config-sync's own retained per-environment payloads, read back after a restart.

The deploy records and the approvals each keep one retained payload per environment on the
desired plane; :func:`env_payloads` picks them out of what the broker holds, checks each
against its schema and hands back the valid ones, logging (never raising for) the rest.
Pure apart from the log.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from schemas import PayloadError, Topics, check_payload, load_json

log = logging.getLogger(__name__)


def env_payloads(
    published: Mapping[str, bytes], topics: Topics, kind: str, schema: str, *, invalid: str = ""
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(environment, payload)`` for each retained ``kind`` topic of ``published`` that reads
    and passes ``schema``; an unreadable one is logged (``invalid``: what that means) and skipped."""
    for topic, raw in published.items():
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        if parsed.kind != kind or parsed.environment is None or not raw:
            continue
        try:
            doc = load_json(raw)
            check_payload(schema, doc)
        except (ValueError, PayloadError) as e:
            log.warning("ignoring the retained %s (%s)%s", topic, e, f"; {invalid}" if invalid else "")
            continue
        yield parsed.environment, doc
