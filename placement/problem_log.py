"""Log a lasting problem once: when it starts or changes, and once more when it clears.

The reconciler runs a pass every few seconds; an invalid head or a git host that is down
stays so for many passes, and the same ERROR line every pass buries everything else. Used
by ``placement.reconcile`` per environment (and for the pass as a whole); it only logs.
"""

from __future__ import annotations

import logging


class ProblemLog:
    """Per key, the problem last logged: a repeat of it is logged at DEBUG only."""

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self._current: dict[str, str] = {}

    def problem(self, key: str, text: str, *, level: int = logging.ERROR, exc_info: bool = False) -> None:
        """Log ``text`` at ``level`` unless it is what ``key`` last said (the same problem)."""
        if self._current.get(key) == text:
            self.log.debug("%s (still)", text)
            return
        self._current[key] = text
        self.log.log(level, "%s", text, exc_info=exc_info)

    def clear(self, key: str, recovered: str) -> None:
        """``key`` works again: say so once, if a problem was logged for it."""
        previous = self._current.pop(key, None)
        if previous is not None:
            self.log.info("%s (after: %s)", recovered, previous)
