"""The one entry point of notifications: :meth:`Notifier.notify` with a :class:`Transition`.

The service calls it from one place (a deployment judged, or the health of the newest
deployment after it ended changing) on whatever thread judged it; it decides under a lock
(``decide``), builds each recipient's body (``payloads``) and hands them to the
:class:`Outbox`, so it returns at once and never raises. Targets come from the last valid
``environment.yaml`` of each environment (:meth:`configure`, after each sync); a transition
of an environment not configured yet (just after a restart, before its first sync) waits
for its targets. What was sent is remembered in memory only: a restart forgets it
(:meth:`remember` puts back what the deployment history knows).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from config_sync.notify.decide import Memory, decide, recipients
from config_sync.notify.events import Message, Target, Transition
from config_sync.notify.outbox import Outbox
from config_sync.notify.payloads import body

log = logging.getLogger(__name__)
MAX_WAITING = 10  # transitions kept per environment whose targets are not read yet


class Notifier:
    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.targets: dict[str, tuple[Target, ...]] = {}
        self.memory: dict[str, Memory] = {}
        self.waiting: dict[str, list[Transition]] = {}  # for an environment not configured yet
        self._lock = threading.Lock()

    def configure(self, targets: Mapping[str, tuple[Target, ...]]) -> None:
        """Each environment of ``targets`` gets these targets (an empty tuple: none)."""
        with self._lock:
            for env, found in targets.items():
                self.targets[env] = tuple(found)
            ready = [t for env in targets for t in self.waiting.pop(env, ())]
        for transition in ready:
            self.notify(transition)

    def remember(self, environment: str, commit: str, problem: str) -> None:
        """``environment`` is in ``problem`` at ``commit`` and that was sent before (a restart):
        not sent again, and its recovery is."""
        with self._lock:
            self.memory.setdefault(environment, Memory(commit, problem, problem))

    def notify(self, transition: Transition) -> int:
        """Queue one message per target that takes this transition; how many were queued."""
        try:
            return self._notify(transition)
        except Exception:  # a notification never fails what reported the transition
            t = transition
            log.exception("notification of %s in %s failed; continuing", t.state, t.environment)
            return 0

    def _notify(self, t: Transition) -> int:
        with self._lock:
            if t.environment not in self.targets:  # not read yet: decided once it is
                self.waiting.setdefault(t.environment, []).append(t)
                del self.waiting[t.environment][:-MAX_WAITING]
                return 0
            decision = decide(self.memory.get(t.environment), t)
            if decision.memory is not None:
                self.memory[t.environment] = decision.memory
            to = recipients(self.targets.get(t.environment, ()), decision)
        if decision.event is None:
            return 0
        queued = 0
        for target in to:
            data = body(t, decision.event, target=target.name, format=target.format)
            queued += self.outbox.put(Message(t.environment, target, decision.event, t.commit, data))
        log.info(
            "%s: %s at %s (%s → %s): %d notification(s) queued",
            t.environment,
            decision.event,
            t.commit[:12],
            t.previous,
            t.state,
            queued,
        )
        return queued

    def start(self) -> None:
        self.outbox.start()

    def stop(self) -> None:
        self.outbox.stop()
