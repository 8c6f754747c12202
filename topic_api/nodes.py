"""The node views of ``/api/nodes`` and ``/api/nodes/{node}``: health, host stats, drift.

Built by :mod:`topic_api.app` from :class:`topic_api.state.ApiState`'s indexes. Pure:
node topics, the node's verdict and ``now`` in, JSON-ready dicts out. The verdict is the
actual view's (:class:`phrame.actual.ActualView`), the one rule placement and config-sync use too.
A report the mirror refused (not strict JSON) is named in its sender's ``errors`` and
``reason``, and in no other node's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.container_exits import DEFAULT_WINDOW_S
from schemas.node_health import NodeVerdict, judge_node, presence
from topic_api.drift import node_items
from topic_api.models import Commits, Generations, HistoryEntry, Host, ItemCounts, NodeSummary
from topic_api.planes import NodeTopics


@dataclass(frozen=True)
class Receipts:
    """What this API heard of the node: its liveness verdict (None: never heard) and its
    recent heartbeats."""

    verdict: NodeVerdict | None = None
    history: list[HistoryEntry] = field(default_factory=list)


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _error_text(e: Any) -> str:
    if isinstance(e, str):
        return e
    if isinstance(e, Mapping) and isinstance(e.get("message"), str):
        where = " ".join(str(e[k]) for k in ("item", "file", "node") if e.get(k))
        return f"{where}: {e['message']}" if where else e["message"]
    return json.dumps(e, sort_keys=True)


def _num(value: Any) -> float | None:
    return value if isinstance(value, int | float) else None


def _host(heartbeat: Any) -> Host | None:
    h = _obj(heartbeat).get("host")
    if not isinstance(h, Mapping):
        return None
    return Host(
        cpu_percent=_num(h.get("cpu_percent")),
        load1=_num(h.get("load1")),
        mem_total=_num(h.get("mem_total")),
        mem_used=_num(h.get("mem_used")),
        disk_total=_num(h.get("disk_total")),
        disk_used=_num(h.get("disk_used")),
    )


def is_pending(desired: NodeTopics | None, actual: NodeTopics | None) -> bool:
    """The node has a newer manifest than the one it applied."""
    want = _int(_obj(desired.manifest if desired else None).get("generation"))
    have = _int(_obj(actual.status if actual else None).get("generation"))
    return want is not None and (have is None or have < want)


def items_of(
    desired: NodeTopics | None,
    actual: NodeTopics | None,
    *,
    now: float | None = None,
    recent_exit_s: float = DEFAULT_WINDOW_S,
) -> list[dict[str, Any]]:
    return node_items(
        desired.items if desired else {},
        actual.items if actual else {},
        desired.manifest if desired else None,
        pending=is_pending(desired, actual),
        now=now,
        recent_exit_s=recent_exit_s,
    )


def disconnect_grace(items: list[dict[str, Any]], placements: Mapping[str, Any]) -> float | None:
    """The longest ``disconnect_grace_s`` (from placement's state) of the environments whose
    items the node runs; ``None`` when placement said it for none of them."""
    graces = []
    for env in sorted({e for i in items if isinstance(e := i.get("environment"), str)}):
        grace = _num(_obj(placements.get(env)).get("disconnect_grace_s"))
        if grace is not None:
            graces.append(float(grace))
    return max(graces, default=None)


def node_summary(
    name: str,
    desired: NodeTopics | None,
    actual: NodeTopics | None,
    receipts: Receipts,
    *,
    now: float,
    timeout_s: float,
    items: list[dict[str, Any]] | None = None,
    recent_exit_s: float = DEFAULT_WINDOW_S,
    disconnect_grace_s: float | None = None,
) -> NodeSummary:
    """The NodeSummary of docs/api.md (``items``: :func:`items_of`, computed when not given;
    ``disconnect_grace_s``: :func:`disconnect_grace`)."""
    status = actual.status if actual else None
    verdict = receipts.verdict or judge_node(None, None, now, timeout_s)  # never heard: unknown
    st, manifest = _obj(status), _obj(desired.manifest if desired else None)
    if items is None:
        items = items_of(desired, actual, now=now, recent_exit_s=recent_exit_s)
    converged = st.get("converged")
    errors = st.get("errors")
    invalid = actual.invalid if actual else {}
    refused = [f"invalid report at {t}: {why}" for t, why in sorted(invalid.items())]
    reason = f"{refused[0]}; {verdict.reason}" if refused else verdict.reason
    kinds = Counter(kind for kind, _ in (actual.items if actual else ()))
    counts = ItemCounts(
        containers=kinds["containers"], networks=kinds["networks"], processes=kinds["processes"]
    )
    return {
        "node": name,
        "state": verdict.state,
        "online": verdict.is_online,
        "presence": presence(verdict, st or None, now, disconnect_grace_s),
        "reason": reason,
        "heartbeat_age_s": verdict.heartbeat_age_s,
        "host": _host(actual.heartbeat if actual else None),
        "converged": converged if isinstance(converged, bool) else None,
        "generation": Generations(
            desired=_int(manifest.get("generation")), applied=_int(st.get("generation"))
        ),
        "commit": Commits(desired=_str(manifest.get("commit")), applied=_str(st.get("commit"))),
        "drift": sum(1 for i in items if i["status"] != "in-sync"),
        "recent_exits": sum(1 for i in items if i.get("recent_exit")),
        "errors": refused + ([_error_text(e) for e in errors] if isinstance(errors, list) else []),
        "counts": counts,
        "history": receipts.history,
    }
