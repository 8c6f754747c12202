"""A held environment keeps what is published, purely: the rendering with its topics put back.

:class:`~config_sync.approvals.controller.Approvals`' gate calls :func:`changes` (does this
commit change the environment at all? a commit that changes only another environment is not
held here) and :func:`hold_back` (the rendering with every desired topic of the held
environments replaced by the very object decoded from the broker, so nothing of theirs is
published, cleared or given a new manifest entry). No I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from config_sync.publication.plane import owned_topic
from schemas import Topics


def _env_topics(
    payloads: Mapping[str, dict[str, Any]], env: str, topics: Topics
) -> dict[str, dict[str, Any]]:
    out = {}
    for topic, payload in payloads.items():
        parsed = owned_topic(topics, topic)
        if parsed is not None and parsed.kind != "manifest" and parsed.environment == env:
            out[topic] = payload
    return out


def _same(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    if "digest" in new and "digest" in old:
        return bool(new["digest"] == old["digest"])
    return _without_commit(new) == _without_commit(old)


def _without_commit(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != "commit"}


def changes(
    env: str, rendered: Mapping[str, dict[str, Any]], previous: Mapping[str, dict[str, Any]], topics: Topics
) -> bool:
    """Whether publishing ``rendered`` would change anything of ``env`` (items, declarations)."""
    new, old = _env_topics(rendered, env, topics), _env_topics(previous, env, topics)
    if set(new) != set(old):
        return True
    return any(not _same(new[t], old[t]) for t in new)


def hold_back(
    rendered: Mapping[str, dict[str, Any]],
    previous: Mapping[str, dict[str, Any]],
    held: Collection[str],
    topics: Topics,
) -> dict[str, dict[str, Any]]:
    """``rendered`` with the desired topics of the ``held`` environments as published."""
    out = {}
    for topic, payload in rendered.items():
        parsed = owned_topic(topics, topic)
        if parsed is None or parsed.kind == "manifest" or parsed.environment not in held:
            out[topic] = payload
    for env in held:
        out.update(_env_topics(previous, env, topics))
    return out
