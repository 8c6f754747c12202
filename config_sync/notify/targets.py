"""Reading ``notify:`` of each ``environment.yaml`` into :class:`Target` s (pure).

``Syncer.read`` calls :func:`targets_of` on a valid repository (the schema and the rules
guarantee the shape); the service hands the result to the notifier after each sync.
"""

from __future__ import annotations

from config_sync.notify.events import EVENTS, Target
from phrame.config_repo import ConfigRepo


def targets_of(repo: ConfigRepo) -> dict[str, tuple[Target, ...]]:
    """Environment -> its targets, in file order (environments without ``notify:`` left out)."""
    found: dict[str, tuple[Target, ...]] = {}
    for name, env in sorted(repo.environments.items()):
        entries = env.settings.get("notify") or []
        targets = tuple(
            Target(
                name=str(e["name"]),
                format=str(e["format"]),
                url_file=str(e["url_file"]),
                on=frozenset(e.get("on") or EVENTS),
            )
            for e in entries
            if isinstance(e, dict)
        )
        if targets:
            found[name] = targets
    return found
