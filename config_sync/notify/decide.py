"""What to send for a transition, purely: the event (if any), who gets it, what to remember.

:class:`~config_sync.notify.notifier.Notifier` keeps one :class:`Memory` per environment and
calls :func:`decide` under its lock, then :func:`recipients`. A state is sent once in a row per
(environment, commit): a repeated check of the same state sends nothing, a flap
(``degraded`` → ``healthy`` → ``degraded``) one message per transition. ``recovered`` is sent
when an environment becomes ``healthy`` after a problem that was sent, whichever commit
brought it back: a later deployment, or the same one (a replica that crash-looped long after
its deployment converged running well again). No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config_sync.notify.events import PROBLEMS, RECOVERED, Target, Transition


@dataclass(frozen=True)
class Memory:
    """The last event sent for one environment, and the problem still open (None: none)."""

    commit: str
    event: str
    problem: str | None


@dataclass(frozen=True)
class Decision:
    event: str | None  # None: nothing to send
    memory: Memory | None  # what to remember from now on
    recovered_from: str | None = None  # for ``recovered``: the problem it ends


def decide(memory: Memory | None, transition: Transition) -> Decision:
    state, commit = transition.state, transition.commit
    if state in PROBLEMS:
        if memory is not None and memory.commit == commit and memory.event == state:
            return Decision(None, memory)  # the same state of the same commit: sent already
        return Decision(state, Memory(commit, state, state))
    if state == "healthy" and memory is not None and memory.problem is not None:
        return Decision(RECOVERED, Memory(commit, RECOVERED, None), recovered_from=memory.problem)
    # progressing, unknown, or healthy with nothing to recover from: no message, nothing forgotten
    return Decision(None, memory)


def open_problem(state: str, health: str) -> str | None:
    """The problem a finished deployment (its record's ``state`` and ``health``, followed
    after it ended) was notified of, for :meth:`~config_sync.notify.notifier.Notifier.remember`
    after a restart: a ``failed`` or ``degraded`` health; else its verdict, ``failed`` or
    ``degraded``, unless it is healthy since (its recovery was sent); None: none open."""
    if health in PROBLEMS:
        return health
    if health != "healthy" and state in PROBLEMS:
        return state
    return None


def recipients(targets: Iterable[Target], decision: Decision) -> list[Target]:
    """The targets that take ``decision.event``: it is in their ``on``; for ``recovered``, the
    problem it ends must be too (a target told nothing of a failure hears of no recovery)."""
    if decision.event is None:
        return []
    wanted = {decision.event} | ({decision.recovered_from} if decision.recovered_from else set())
    return [t for t in targets if wanted <= t.on]
