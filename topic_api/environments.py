"""The environment views of ``/api/environments`` and ``/api/environments/{env}``.

Built by :mod:`topic_api.app` from the desired plane's index: last sync (commit, valid or
the errors with file:line), placement state and the deploy records config-sync keeps
retained, and the staged rollouts. Pure; a malformed payload
shows as null fields, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topic_api.planes import EnvTopics

ERROR_FIELDS = ("file", "line", "column", "rule", "message")


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _error(e: Any) -> dict[str, Any]:
    if isinstance(e, str):
        return {"file": None, "line": None, "rule": None, "message": e}
    m = _obj(e)
    out = {k: m.get(k) for k in ERROR_FIELDS}
    out["message"] = out["message"] if isinstance(out["message"], str) else str(e)
    return out


def _commit(sync: Mapping[str, Any]) -> str | None:
    for value in (sync.get("commit"), _obj(sync.get("last_applied")).get("commit")):
        if isinstance(value, str):
            return value
    return None


def environment_view(name: str, env: EnvTopics, *, with_services: bool = False) -> dict[str, Any]:
    """The Env of docs/api.md (plus ``services`` for the one-environment view)."""
    sync = _obj(env.sync)
    ok = sync.get("ok")
    errors = sync.get("errors")
    deploys = _obj(env.deploys).get("deploys")
    view: dict[str, Any] = {
        "environment": name,
        "sync": env.sync if isinstance(env.sync, Mapping) else None,
        "ok": ok if isinstance(ok, bool) else None,
        "commit": _commit(sync),
        "errors": [_error(e) for e in errors] if isinstance(errors, list) else [],
        "placement": env.placement if isinstance(env.placement, Mapping) else None,
        "deploys": [d for d in deploys if isinstance(d, Mapping)] if isinstance(deploys, list) else [],
    }
    # staged rollouts by service (config-sync's rollouts/<service> topics), in progress or done;
    # absent when the environment has none
    rollouts = {svc: doc for svc, doc in sorted(env.rollouts.items()) if isinstance(doc, Mapping)}
    if rollouts:
        view["rollouts"] = rollouts
    if with_services:
        view["services"] = dict(sorted(env.services.items()))
    return view
