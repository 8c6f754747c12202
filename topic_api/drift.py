"""Desired against actual for one node's items: the status of each item and what differs.

Called by :mod:`topic_api.nodes` for ``/api/nodes`` (drift counts) and ``/api/nodes/{node}``
(items). Pure: payloads and ``now`` in, plain dicts out; a malformed payload (not an object,
a missing field) is read as "unknown", never raised on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.container_exits import DEFAULT_WINDOW_S, recent_exit

FAILED_STATES = ("exited", "dead", "error", "failed")
STATUSES = ("in-sync", "drift", "missing", "extra", "failed", "pending")


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def is_failed(actual: Mapping[str, Any]) -> bool:
    """The observed item errs, exited or is unhealthy."""
    return (
        bool(actual.get("error"))
        or actual.get("state") in FAILED_STATES
        or actual.get("health") == "unhealthy"
    )


def item_status(desired: Any, actual: Any, *, desired_digest: str | None, pending: bool) -> str:
    """One of :data:`STATUSES`. ``pending``: the node has not applied the newest manifest yet,
    so a difference is expected to go away (reported as pending, not as drift)."""
    if actual is not None and is_failed(_obj(actual)) and (desired is not None or desired_digest):
        return "failed"
    if desired is None and not desired_digest:
        return "pending" if pending else "extra"
    if actual is None:
        return "pending" if pending else "missing"
    if not desired_digest or desired_digest != _obj(actual).get("digest"):  # no digest: cannot be in sync
        return "pending" if pending else "drift"
    return "in-sync"


def differences(desired: Any, actual: Any, desired_digest: str | None, kind: str) -> list[dict[str, Any]]:
    """The fields that differ: presence, digest, image and (containers, processes) running."""
    if actual is None or (desired is None and not desired_digest):
        present = {"field": "present", "desired": desired is not None or bool(desired_digest)}
        return [{**present, "actual": actual is not None}]
    a, d = _obj(actual), _obj(desired)
    out: list[dict[str, Any]] = []
    if desired_digest != a.get("digest"):
        out.append({"field": "digest", "desired": desired_digest, "actual": a.get("digest")})
    if d.get("image") and a.get("image") and d["image"] != a["image"]:
        out.append({"field": "image", "desired": d["image"], "actual": a["image"]})
    if kind != "networks" and a.get("state") not in (None, "running"):
        out.append({"field": "state", "desired": "running", "actual": a.get("state")})
    if a.get("health") == "unhealthy":
        out.append({"field": "health", "desired": "healthy", "actual": "unhealthy"})
    if a.get("error"):
        out.append({"field": "error", "desired": None, "actual": a.get("error")})
    return out


def node_items(
    desired_items: Mapping[tuple[str, str], Any],
    actual_items: Mapping[tuple[str, str], Any],
    manifest: Any,
    *,
    pending: bool,
    now: float | None = None,
    recent_exit_s: float = DEFAULT_WINDOW_S,
) -> list[dict[str, Any]]:
    """Every item of a node (desired, manifest-listed or observed), sorted by kind and id.
    ``recent_exit`` (:func:`schemas.container_exits.recent_exit`) needs ``now``: None without."""
    listed = _obj(_obj(manifest).get("items"))
    keys = set(desired_items) | set(actual_items)
    for key in listed:
        kind, _, item_id = str(key).partition("/")
        if item_id:
            keys.add((kind, item_id))
    out = []
    for kind, item_id in sorted(keys):
        desired = desired_items.get((kind, item_id))
        actual = actual_items.get((kind, item_id))
        digest = _obj(desired).get("digest") or listed.get(f"{kind}/{item_id}")
        env, _, rest = item_id.partition(".")
        out.append(
            {
                "kind": kind,
                "id": item_id,
                "environment": env,
                "service": None if kind == "networks" else rest.split(".")[0] or None,
                "status": item_status(desired, actual, desired_digest=digest, pending=pending),
                "desired": desired,
                "actual": actual,
                "differences": differences(desired, actual, digest, kind),
                "commit": _obj(desired).get("commit"),
                "health": _obj(actual).get("health"),
                # it runs as desired (the status says so) but died within the window
                "recent_exit": None if now is None else recent_exit(actual, now=now, window_s=recent_exit_s),
            }
        )
    return out
