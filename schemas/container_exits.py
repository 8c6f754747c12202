"""The one rule for "this container died recently and runs again", read from actual items.

Called by the topic API (:mod:`topic_api.drift`, per item) and ``phrame status``
(:mod:`phrame.cli.status_view`), so both say the same. The agent reports Docker's
``finished_at`` (kept by Docker while the container runs again) and, when it started the
container itself, ``last_exit`` with the exit code it read first. Pure: the caller passes
``now`` (unix seconds, its own clock); never raises on a malformed payload.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

DEFAULT_WINDOW_S = 600.0  # PHRAME_API_RECENT_EXIT_S


def docker_time(value: Any) -> float | None:
    """Docker's RFC 3339 time (nanoseconds allowed) as unix seconds; None for Docker's zero
    time (``0001-01-01T00:00:00Z``: never), anything unreadable, or not a string."""
    if not isinstance(value, str) or value.startswith("0001-"):
        return None
    head, dot, rest = value.partition(".")
    if dot:  # at most microseconds for fromisoformat; keep the zone that follows the digits
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{head}.{rest[:digits][:6].ljust(6, '0')}{rest[digits:]}"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def recent_exit(actual: Any, *, now: float, window_s: float) -> dict[str, Any] | None:
    """``{"exit_code", "finished_at", "age_s", "restarted_by"}`` for a running container whose
    last exit is at most ``window_s`` old, else None. The exit code is known only when the
    agent's ``last_exit`` is of that same exit (Docker resets ``ExitCode`` on start)."""
    if not isinstance(actual, Mapping) or actual.get("state") != "running":
        return None
    finished = actual.get("finished_at")
    at = docker_time(finished)
    if at is None or now - at > window_s:
        return None
    last = actual.get("last_exit")
    same = isinstance(last, Mapping) and last.get("finished_at") == finished
    code = last.get("exit_code") if same and isinstance(last, Mapping) else None
    by = last.get("restarted_by") if same and isinstance(last, Mapping) else None
    return {
        "exit_code": code if isinstance(code, int) and not isinstance(code, bool) else None,
        "finished_at": finished,
        "age_s": round(max(0.0, now - at), 3),  # a reader's clock behind the node's: not negative
        "restarted_by": by if isinstance(by, str) else None,
    }
