"""The value types of notifications: a transition of one environment, and a ``notify:`` target.

Built by the service (a deployment's outcome, or the health of an environment's newest
deployment after it ended, both judged by the health model) and handed to
:meth:`config_sync.notify.notifier.Notifier.notify`; frozen, no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# the deployment states of the health model (docs/architecture/health.md)
STATES = ("progressing", "healthy", "degraded", "failed", "suspended", "unknown")
PROBLEMS = ("failed", "degraded", "suspended")  # a transition into one of these is sent
RECOVERED = "recovered"  # healthy again after a problem that was sent
EVENTS = (*PROBLEMS, RECOVERED)
MAX_REASONS = 20  # lines of ``reasons`` a message carries (the JSON schema's maxItems)


@dataclass(frozen=True)
class Transition:
    """Environment ``environment`` at ``commit`` (of ``ref``) went from ``previous`` to ``state``."""

    environment: str
    commit: str
    ref: str
    previous: str
    state: str
    reasons: tuple[str, ...] = ()
    url: str | None = None
    at: float = 0.0  # unix seconds


@dataclass(frozen=True)
class Target:
    """One entry of ``notify:``: where (the name of a URL file) and which events, in what format."""

    name: str
    format: str  # slack | json
    url_file: str
    on: frozenset[str] = field(default_factory=lambda: frozenset(EVENTS))


@dataclass(frozen=True)
class Message:
    """One POST to make: ``body`` (JSON bytes) to the URL in ``target.url_file``."""

    environment: str
    target: Target
    event: str
    commit: str
    body: bytes
