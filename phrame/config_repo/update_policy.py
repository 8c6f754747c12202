"""A container service's staged-rollout policy (``update:``), and the rules that check it.

config-sync's rollout controller asks :func:`update_policy` for each service (the service's
own ``update`` keys merged over the environment's ``defaults.update``, key by key);
``rules.semantic_problems`` runs :func:`service_update_problems` for each service, then
:func:`dedupe_update_problems`. Pure: reads documents that passed
their schema, never renders and never changes a spec's digest (``update`` is not in any
desired item, so adding or tuning it restarts nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.keys import per_environment
from phrame.config_repo.model import ConfigRepo, Document, Environment
from phrame.config_repo.problems import Problem
from schemas.registry import pointer

DEFAULT_MIN_HEALTHY_S = 10.0
DEFAULT_HEALTHY_DEADLINE_S = 300.0


@dataclass(frozen=True)
class UpdatePolicy:
    """How a change reaches a service's replicas (docs/config/format.md: Staged rollouts)."""

    max_parallel: int | None = None  # None: every replica in one wave
    canary: int = 0
    min_healthy_s: float = DEFAULT_MIN_HEALTHY_S
    healthy_deadline_s: float = DEFAULT_HEALTHY_DEADLINE_S
    on_failure: str = "pause"  # pause | rollback

    def wave_size(self, first: bool, remaining: int) -> int:
        """How many replicas the next wave changes (``first``: the canary wave, if any)."""
        size = self.canary if first and self.canary else (self.max_parallel or remaining)
        return max(1, min(size, remaining))

    def wave_count(self, total: int) -> int:
        waves, left, first = 0, total, True
        while left > 0:
            left -= self.wave_size(first, left)
            waves, first = waves + 1, False
        return waves


def merged_update(env: Environment, doc: Document) -> dict[str, Any] | None:
    """The ``update`` mapping in force for service ``doc``; None when neither it nor the
    environment's defaults set one."""
    data = doc.data if isinstance(doc.data, dict) else {}
    defaults = env.settings.get("defaults")
    default = defaults.get("update") if isinstance(defaults, dict) else None
    own = data.get("update")
    if not isinstance(own, dict) and not isinstance(default, dict):
        return None
    return {**(default if isinstance(default, dict) else {}), **(own if isinstance(own, dict) else {})}


def policy_from(update: Mapping[str, Any]) -> UpdatePolicy:
    parallel = update.get("max_parallel")
    return UpdatePolicy(
        max_parallel=int(parallel) if parallel is not None else None,
        canary=int(update.get("canary", 0)),
        min_healthy_s=float(update.get("min_healthy_s", DEFAULT_MIN_HEALTHY_S)),
        healthy_deadline_s=float(update.get("healthy_deadline_s", DEFAULT_HEALTHY_DEADLINE_S)),
        on_failure=str(update.get("on_failure", "pause")),
    )


def update_policy(env: Environment, doc: Document) -> UpdatePolicy | None:
    """The policy of a valid container service; None: it changes every replica at once."""
    if isinstance(doc.data, dict) and doc.data.get("kind", "container") != "container":
        return None
    update = merged_update(env, doc)
    return policy_from(update) if update is not None else None


def policies(repo: ConfigRepo, cache: ReadCache | None = None) -> dict[tuple[str, str], UpdatePolicy]:
    """(environment, service) -> policy, for the services that have one; with ``cache``, an
    environment's are kept by the paths and blobs of its files."""
    out = {}
    for _name, env in sorted(repo.environments.items()):
        out.update(per_environment(cache, "update-policies", repo, env, _policies))
    return out


def _policies(env: Environment) -> dict[tuple[str, str], UpdatePolicy]:
    found = {}
    for name, doc in sorted(env.services.items()):
        policy = update_policy(env, doc)
        if policy is not None:
            found[(env.name, name)] = policy
    return found


def _where(env: Environment, doc: Document, key: str) -> tuple[Document, list[str | int]]:
    """The document and path that set ``key`` of the merged update: the service's own, else
    the environment's default (so the message points at the line to change)."""
    own = doc.data.get("update") if isinstance(doc.data, dict) else None
    if isinstance(own, dict) and key in own:
        return doc, ["update", key]
    assert env.doc is not None  # the value came from the defaults
    return env.doc, ["defaults", "update", key]


def dedupe_update_problems(problems: Iterable[Problem]) -> Iterator[Problem]:
    """Each place in a file once (an environment default shared by many services)."""
    seen: set[tuple[str, int, int, str]] = set()
    for problem in problems:
        key = (problem.file, problem.line, problem.column, problem.rule)
        if key not in seen:
            seen.add(key)
            yield problem


def service_update_problems(env: Environment, doc: Document) -> Iterator[Problem]:
    """``update-canary`` and ``update-deadline`` of one service (its ``update:`` over the
    environment's defaults), before :func:`dedupe_update_problems`."""
    defaults_ok = env.doc is None or env.doc.is_sound("defaults", "update")
    if not isinstance(doc.data, dict) or not doc.is_sound("update") or not defaults_ok:
        return
    if doc.data.get("kind", "container") != "container" or not doc.is_sound("replicas"):
        return
    update = merged_update(env, doc)
    if update is None:
        return
    policy = policy_from(update)
    replicas = doc.data.get("replicas", 1)
    if isinstance(replicas, int) and policy.canary > replicas:
        where, path = _where(env, doc, "canary")
        msg = f"canary {policy.canary} is more than the service's {replicas} replica(s)"
        if where is not doc:
            msg += f" (service {doc.data.get('name', '?')!r}, from the environment's defaults)"
        yield _at(where, path, "update-canary", msg)
    if policy.healthy_deadline_s <= policy.min_healthy_s:
        key = "healthy_deadline_s" if "healthy_deadline_s" in update else "min_healthy_s"
        where, path = _where(env, doc, key)
        msg = (
            f"healthy_deadline_s {policy.healthy_deadline_s:g} must be more than "
            f"min_healthy_s {policy.min_healthy_s:g}: no replica could be healthy in time"
        )
        yield _at(where, path, "update-deadline", msg)


def _at(doc: Document, path: list[str | int], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))
