"""Whether a promotion may be taken: the rollout must be waiting for it, at the commit named. Pure.

:meth:`config_sync.rollouts.controller.RolloutController.promote` calls :func:`decide_promotion`
with the rollout's last state (its retained document) and the commit the request names. A
promotion is taken only while the canary wave is healthy and waits (``waiting-promotion``):
asked for earlier, it would let the rollout pass its canary without ever stopping there.
The request names the commit (full, or a unique prefix of at least 7 hex digits), so a
promotion meant for one commit can never release another's canary. Never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

COMMIT = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass(frozen=True)
class Promotion:
    status: int  # 202 taken, 400 the request names no commit, 409 nothing waits for this one
    message: str
    commit: str | None = None  # the rollout's full commit, when taken

    @property
    def is_taken(self) -> bool:
        return self.status == 202


def _where(state: Mapping[str, Any]) -> str:
    """What the rollout is doing, e.g. ``wave 1 is progressing (0/2 healthy)``."""
    kind = state.get("state")
    wave, done, total = state.get("wave"), state.get("done"), state.get("total")
    if kind == "progressing":
        return f"wave {wave} is progressing ({done}/{total} healthy)"
    if kind == "complete":
        return f"the rollout of {str(state.get('commit'))[:12]} is complete"
    return f"the rollout is {kind} at wave {wave} ({done}/{total} healthy)"


def decide_promotion(env: str, service: str, state: Mapping[str, Any] | None, commit: Any) -> Promotion:
    """May ``service``'s rollout in ``env`` (its ``state`` document, None: none known) be
    promoted at ``commit`` (as the request gave it)?"""
    name = f"{env}/{service}"
    if not isinstance(commit, str) or not commit:
        if state is None:
            now = f"{name}: nothing to promote: no rollout of it is running"
        elif state.get("state") == "waiting-promotion":
            now = f"{name} waits with {state.get('commit')}"
        else:
            now = f"{name}: nothing to promote: {_where(state)}"
        return Promotion(400, f'name the commit to promote: {{"commit": "<sha>"}} ({now})')
    commit = commit.strip().lower()
    if not COMMIT.match(commit):
        return Promotion(400, f"commit {commit[:80]!r} is not a commit sha (7 to 64 hex digits)")
    if state is None:
        return Promotion(409, f"{name}: nothing to promote: no rollout of it is running")
    if state.get("state") != "waiting-promotion":
        return Promotion(409, f"{name}: nothing to promote: {_where(state)}")
    waiting = str(state.get("commit", ""))
    if not waiting.startswith(commit):
        return Promotion(
            409,
            f"{name}: commit {commit[:12]} is not the one waiting: {waiting[:12]} waits for its promotion",
        )
    return Promotion(202, f"{name}: promotion of {waiting[:12]} queued", waiting)
