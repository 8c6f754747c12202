"""Asking again for a subscription the broker refused.

A SUBACK with a failure code is not always final: a clustered broker still electing the
leader of its session stream (NATS answers 0x80 for about half a minute after a node dies)
refuses what it grants a little later, and an operator may fix an ACL while a service runs.
:class:`SubscribeRetries` keeps, per refused filter, a timer that calls the client back
after ``backoff(tries)`` seconds (1, 2, 4, … at most 30); a grant or :meth:`stop` ends it.
One daemon timer thread per refused filter at most; nothing runs while every grant holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from phrame.runtime.retry import backoff

MAX_DELAY_S = 30.0


class SubscribeRetries:
    def __init__(
        self,
        resubscribe: Callable[[str], None],
        *,
        first_delay_s: float = 1.0,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        self._resubscribe = resubscribe
        self._first_delay_s, self._max_delay_s = first_delay_s, max_delay_s
        self._lock = threading.Lock()
        self._tries: dict[str, int] = {}
        self._timers: dict[str, threading.Timer] = {}
        self._stopped = False

    def refused(self, topic_filter: str) -> float:
        """``topic_filter`` was refused: ask again later; returns the delay."""
        with self._lock:
            tries = self._tries.get(topic_filter, 0)
            self._tries[topic_filter] = tries + 1
            delay = backoff(tries + 1, base=self._first_delay_s, cap=self._max_delay_s)
            old = self._timers.pop(topic_filter, None)
            if old is not None:
                old.cancel()
            if not self._stopped:
                timer = threading.Timer(delay, self._fire, args=(topic_filter,))
                timer.daemon = True
                timer.name = f"mqtt-resubscribe {topic_filter}"
                self._timers[topic_filter] = timer
                timer.start()
        return delay

    def granted(self, topic_filter: str) -> None:
        with self._lock:
            self._tries.pop(topic_filter, None)
            timer = self._timers.pop(topic_filter, None)
        if timer is not None:
            timer.cancel()

    def pending(self) -> list[str]:
        """The filters waiting for another try."""
        with self._lock:
            return sorted(self._timers)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            timers = list(self._timers.values())
            self._timers.clear()
        for timer in timers:
            timer.cancel()

    def _fire(self, topic_filter: str) -> None:
        with self._lock:
            if self._stopped or self._timers.get(topic_filter) is not threading.current_thread():
                return
            del self._timers[topic_filter]
        self._resubscribe(topic_filter)
