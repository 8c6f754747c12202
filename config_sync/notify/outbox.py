"""The bounded queue of notifications and the thread that delivers them, retrying with backoff.

:meth:`Outbox.put` never blocks (a full outbox drops the message, logged and counted); one
daemon thread (a :class:`~phrame.runtime.BackgroundLoop`) runs :meth:`Outbox.run_due`, which
tests call directly with a fake clock.
Messages wait in one lane per (environment, target), in order: a target that is down holds
back only its own later messages (so a ``recovered`` never overtakes its ``failed``), and each
message gets at most ``attempts`` tries, waiting :class:`~phrame.runtime.Backoff` between them
(or the receiver's ``Retry-After``, capped by the backoff's maximum). Messages still queued at
:meth:`stop` are lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from config_sync.notify.delivery import Delivery
from config_sync.notify.events import Message
from phrame.runtime import BackgroundLoop, Backoff, is_temporary

log = logging.getLogger(__name__)
# sent, retried (a try failed, another follows), failed (given up), dropped (outbox full)
Result = Callable[[Message, str], None]
DEFAULT_BACKOFF = Backoff(1.0, 60.0, jitter=0.2)


@dataclass
class _Pending:
    message: Message
    due: float
    tries: int = 0


class Outbox:
    def __init__(
        self,
        delivery: Delivery,
        *,
        attempts: int = 6,
        backoff: Backoff = DEFAULT_BACKOFF,
        capacity: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        on_result: Result | None = None,
    ) -> None:
        self.delivery, self.attempts, self.backoff = delivery, max(1, attempts), backoff
        self.capacity, self.clock, self.on_result = capacity, clock, on_result
        self.lanes: OrderedDict[tuple[str, str], deque[_Pending]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        # the delivering thread: tries what is due, then waits for the next due or a put
        self._loop = BackgroundLoop("config-sync-notify", self.run_due)

    def put(self, message: Message) -> bool:
        """Queue ``message`` (never blocks); False when the outbox is full and it was dropped."""
        with self._lock:
            if self._size >= self.capacity:
                full = True
            else:
                full = False
                lane = (message.environment, message.target.name)
                self.lanes.setdefault(lane, deque()).append(_Pending(message, self.clock()))
                self._size += 1
        if not full:
            self._loop.wake()
            return True
        log.warning(
            "notification outbox full (%d): dropped %s of %s for %s",
            self.capacity,
            message.event,
            message.environment,
            message.target.name,
        )
        self._tell(message, "dropped")
        return False

    def pending(self) -> int:
        with self._lock:
            return self._size

    def run_due(self) -> float | None:
        """Try the head of every lane that is due; seconds until the next is due (None: empty)."""
        with self._lock:
            now = self.clock()
            due = [lane[0] for lane in self.lanes.values() if lane[0].due <= now]
        for item in due:
            self._attempt(item)
        with self._lock:
            if not self.lanes:
                return None
            return max(0.0, min(lane[0].due for lane in self.lanes.values()) - self.clock())

    def _attempt(self, item: _Pending) -> None:
        m = item.message
        item.tries += 1
        try:
            self.delivery.deliver(m.target.url_file, m.body, target=m.target.name)
        except Exception as e:  # a loop never dies from one item; anything unforeseen is given up
            if is_temporary(e) and item.tries < self.attempts:
                delay = self.backoff.delay(item.tries)
                asked = getattr(e, "delay", None)
                if asked is not None:
                    delay = min(max(asked, delay), self.backoff.max_s)
                log.info(
                    "notification %s of %s to %s failed (try %d of %d: %s); again in %.1f s",
                    m.event,
                    m.environment,
                    m.target.name,
                    item.tries,
                    self.attempts,
                    e,
                    delay,
                )
                with self._lock:
                    item.due = self.clock() + delay
                self._tell(m, "retried")
                return
            log.warning(
                "notification %s of %s at %s to %s not delivered after %d try(ies): %s",
                m.event,
                m.environment,
                m.commit[:12],
                m.target.name,
                item.tries,
                e,
            )
            self._finish(item, "failed")
            return
        log.info("notified %s: %s of %s at %s", m.target.name, m.event, m.environment, m.commit[:12])
        self._finish(item, "sent")

    def _finish(self, item: _Pending, result: str) -> None:
        m = item.message
        with self._lock:
            key = (m.environment, m.target.name)
            lane = self.lanes.get(key)
            if lane and lane[0] is item:
                lane.popleft()
                self._size -= 1
                if lane:
                    lane[0].due = min(lane[0].due, self.clock())  # its turn has come
                else:
                    del self.lanes[key]
        self._tell(m, result)

    def _tell(self, message: Message, result: str) -> None:
        if self.on_result is not None:
            try:
                self.on_result(message, result)
            except Exception:
                log.exception("notification result hook failed; continuing")

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop(10)
