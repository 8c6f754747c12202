"""Whether placement hears the actual plane; the actual view resumed after a reconnect that lost messages.

The loop asks :meth:`Listening.check` before each pass and decides nothing while it is
false: heartbeats missed while disconnected say nothing about the nodes, and deciding on
them would unassign every replica after a broker outage. Never decides or publishes itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from phrame.actual import ActualView

log = logging.getLogger(__name__)


class Connection(Protocol):
    """What :class:`phrame.mqtt.MqttClient` tells about its link to the broker."""

    @property
    def is_connected(self) -> bool: ...

    @property
    def connect_count(self) -> int: ...

    @property
    def session_resumed(self) -> bool: ...


class Listening:
    """Follows one connection (the actual plane's) on behalf of the :class:`ActualView` it feeds."""

    def __init__(
        self, connection: Connection, view: ActualView, *, clock: Callable[[], float], where: str
    ) -> None:
        self.connection = connection
        self.view = view
        self.clock = clock
        self.where = where
        self._connects = -1  # the connection's connect_count when the view last resumed
        self._listened_at: float | None = None  # the last check that found us listening
        self.deaf_since: float | None = None  # clock value of the first check that did not

    @property
    def reason(self) -> str:
        """Why nothing is decided while :meth:`check` is false (for the log and the state)."""
        return f"not connected to the actual plane ({self.where}): nothing is decided until it is"

    def resume(self) -> None:
        """We listen from now (called on connect, before subscribing, and by :meth:`check`)."""
        now = self.clock()
        self.view.resume(now, listened_until=self._listened_at)
        self._connects = self.connection.connect_count
        self._listened_at = now

    def check(self) -> bool:
        """Whether the actual plane is heard now; resumes the view after a reconnect that may
        have missed messages, even one that happened between two checks (the connect count
        moved). A reconnect that resumed our session missed nothing (QoS 1 heartbeats were
        queued for us), as for every OAuth2 token switch: resuming then would restart the
        grace period of known-offline nodes at each switch, and with short-lived tokens their
        replicas would never move. Unless a check found us disconnected: that gap outlasted
        a pass, which a token switch never does, and the broker's queue for a session is
        bounded (mosquitto's ``max_queued_messages``), so heartbeats may have been dropped."""
        now = self.clock()
        if not self.connection.is_connected:
            if self.deaf_since is None:
                self.deaf_since = now
                log.warning("%s; nodes keep their replicas meanwhile", self.reason)
            return False
        if self.connection.connect_count != self._connects:
            if self._connects < 0 or not self.connection.session_resumed or self.deaf_since is not None:
                if self._connects >= 0:
                    log.info("heard the actual plane again: every node gets a whole timeout from now")
                self.resume()
            else:  # the session was kept: queued heartbeats were delivered, nothing was missed
                self._connects = self.connection.connect_count
        self.deaf_since = None
        self._listened_at = now
        return True
