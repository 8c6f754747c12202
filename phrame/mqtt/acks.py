"""Waiting for the broker's acknowledgements (PUBACK, SUBACK) of what the client sent.

Fed by :class:`MqttClient`'s paho callbacks on the network thread, waited on by the
publishing thread. It never calls paho: paho holds its own locks while it reports an
acknowledgement, so taking one of paho's here could deadlock.
"""

from __future__ import annotations

import threading
import time

from phrame.mqtt.errors import PublishRefused, PublishTimeout


class AckTracker:
    """PUBACKs by message id, ordered by a sequence so a reused id is never mistaken."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._acks: dict[int, tuple[int, bool]] = {}  # mid -> (sequence, refused?)
        self._subacks: dict[int, bool] = {}  # mid -> refused?
        # mid -> how many batches wait for its PUBACK to look again: only those wake their
        # waiter (a wake-up per PUBACK made a batch of thousands cost twice raw paho's time)
        self._wanted: dict[int, int] = {}

    def mark(self) -> int:
        """The sequence before a batch: only acknowledgements after it count for it."""
        with self._cond:
            return self._seq

    def acked(self, mid: int, *, refused: bool) -> None:
        with self._cond:
            self._seq += 1
            self._acks[mid] = (self._seq, refused)
            if mid in self._wanted:
                self._cond.notify_all()

    def subacked(self, mid: int, *, refused: bool) -> None:
        with self._cond:
            self._subacks[mid] = refused
            self._cond.notify_all()

    def wait_suback(self, mid: int, timeout: float) -> bool | None:
        """Whether the subscription was refused; ``None`` if no SUBACK came in time."""
        with self._cond:
            if not self._cond.wait_for(lambda: mid in self._subacks, timeout):
                return None
            return self._subacks.pop(mid)

    def wait_batch(self, sent: dict[int, str], mark: int, timeout: float, where: str) -> None:
        """Return once every mid in ``sent`` (mid -> topic) was acknowledged after ``mark``."""
        deadline = time.monotonic() + timeout

        def is_done(mid: int) -> bool:
            return self._acks.get(mid, (-1, False))[0] > mark

        # A mid once acknowledged after ``mark`` stays so (a later ack only raises its
        # sequence), so each wake-up checks from the first one still open: the PUBACKs of a
        # batch arrive about in order, and rescanning all of it on each of them was quadratic.
        mids, first = list(sent), 0

        def all_done() -> bool:
            nonlocal first
            while first < len(mids) and is_done(mids[first]):
                first += 1
            return first == len(mids)

        with self._cond:
            while not all_done():
                left = deadline - time.monotonic()
                if left <= 0:
                    pending = sorted(t for m, t in sent.items() if not is_done(m))
                    raise PublishTimeout(
                        f"{len(pending)} of {len(sent)} messages not acknowledged by {where} "
                        f"within {timeout:.0f}s (first: {pending[0]}); they stay queued",
                        pending=pending,
                    )
                # woken by the PUBACK of the last one still open: the broker acknowledges a
                # connection's messages in order, so that is mostly the batch's last, once
                wanted = next(m for m in reversed(mids) if not is_done(m))
                self._wanted[wanted] = self._wanted.get(wanted, 0) + 1
                try:
                    self._cond.wait(left)
                finally:
                    if self._wanted[wanted] == 1:
                        del self._wanted[wanted]
                    else:
                        self._wanted[wanted] -= 1
            refused = sorted(t for m, t in sent.items() if self._acks[m][1])
        if refused:
            raise PublishRefused(
                f"broker {where} refused {len(refused)} messages (ACL?), first: {refused[0]}",
                topics=refused,
            )
