"""Stream tickets: what a browser's ``EventSource`` sends instead of the token.

``EventSource`` cannot send headers, so ``/api/events`` takes ``?ticket=``: a random string
from ``POST /api/stream-tickets`` (which needs the token as a header), good for one stream,
for ``ttl_s`` seconds. A ticket authorises nothing else: no other read, never a write, so a
URL in an access log gives no lasting access. Kept in memory (lost on restart: the page
asks for another), at most ``max_open`` unredeemed; only their SHA-256 is stored.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable

TTL_S = 60.0
MAX_OPEN = 1000


class StreamTickets:
    """Touched only on the event loop."""

    def __init__(
        self, *, ttl_s: float = TTL_S, max_open: int = MAX_OPEN, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.max_open = max_open
        self.clock = clock
        self._open: dict[str, float] = {}  # sha256 of a ticket -> when it expires

    def __len__(self) -> int:
        return len(self._open)

    def issue(self) -> str | None:
        """A new ticket, or None while ``max_open`` unexpired tickets wait to be redeemed."""
        now = self.clock()
        self._drop_expired(now)
        if len(self._open) >= self.max_open:
            return None
        ticket = secrets.token_urlsafe(32)
        self._open[_digest(ticket)] = now + self.ttl_s
        return ticket

    def redeem(self, ticket: str) -> bool:
        """Whether ``ticket`` was issued, is unexpired and unused; it is used up either way."""
        expires = self._open.pop(_digest(ticket), None)
        return expires is not None and self.clock() < expires

    def _drop_expired(self, now: float) -> None:
        for key in [k for k, expires in self._open.items() if expires <= now]:
            del self._open[key]


def _digest(ticket: str) -> str:
    return hashlib.sha256(ticket.encode("utf-8", "surrogatepass")).hexdigest()
