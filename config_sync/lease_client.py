"""The lease on the broker, run: its own broker connection, its loop, and the fenced client.

:class:`BrokerLease` keeps :class:`config_sync.lease.Lease` fed (the lease topic's messages,
the acknowledgements of its claims and renewals) on a :class:`~phrame.runtime.BackgroundLoop`
and calls ``on_active`` once this instance holds the lease and ``on_lost`` once it lost it.
:class:`FencedMqttClient` is config-sync's publishing connection with the fence in front:
nothing is queued unless the lease says ``may_publish``. The standby's service connection is
never started, so it publishes nothing at all (config-sync's ``start`` runs on ``on_active``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from config_sync.lease import Action, Lease, LeaseRecord, Role
from phrame.mqtt import MqttClient, MqttError
from phrame.mqtt.messages import Message
from phrame.runtime import BackgroundLoop
from schemas import Topics, load_json
from schemas.registry import PayloadError, check_payload

log = logging.getLogger(__name__)
SERVICE = "config-sync"


class NotActive(MqttError):
    """A publication refused by the fence: this config-sync does not hold the lease."""


class FencedMqttClient(MqttClient):
    """An :class:`MqttClient` that queues nothing unless ``fence()`` says it may, but the
    lease itself (``exempt``): one connection per instance (the broker allows one per account)."""

    def __init__(self, *args: Any, fence: Callable[[], bool], exempt: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fence, self.exempt = fence, exempt
        self.refused = 0

    def _publish(self, topic: str, payload: bytes | None, retain: bool, qos: int) -> int:
        if topic != self.exempt and not self.fence():
            self.refused += 1
            raise NotActive(f"not the active config-sync: {topic} is not published")
        return super()._publish(topic, payload, retain, qos)


class BrokerLease:
    """The lease kept on ``client``, config-sync's own connection (started here: a standby
    is connected, for the lease only). ``on_connect`` must be called on each (re)connect."""

    def __init__(
        self,
        topics: Topics,
        *,
        me: str,
        lease_s: float,
        settle_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topic = topics.lease(SERVICE)
        self.me = me
        self.clock = clock
        self.lease = Lease(me, lease_s=lease_s, settle_s=settle_s)
        self.on_active: Callable[[], None] = lambda: None
        self.on_lost: Callable[[str], None] = lambda why: None
        self.client: MqttClient | None = None
        self._lock = threading.Lock()  # around the lease: the loop, the MQTT thread, the fence
        self._loop = BackgroundLoop("config-sync-lease", self._tick, error_wait_s=0.2)
        self._told: Role = Role.STANDBY
        self._telling = threading.Lock()
        self.took_over_at: float | None = None  # wall clock, for /status

    # -- lifecycle
    def run(self, client: MqttClient) -> None:
        """Subscribe on ``client`` (connected) and keep the lease; returns at once."""
        self.client = client
        client.subscribe(self.topic, self._on_message)
        with self._lock:
            self.lease.listening(self.clock())
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    # -- reading
    @property
    def role(self) -> Role:
        with self._lock:
            return self.lease.role

    @property
    def is_active(self) -> bool:
        return self.role is Role.ACTIVE

    def may_publish(self) -> bool:
        with self._lock:
            return self.lease.may_publish(self.clock())

    def view(self) -> dict[str, Any]:
        """The lease as /status shows it."""
        with self._lock:
            lease, seen = self.lease, self.lease.seen
            return {
                "role": "active" if lease.role is Role.ACTIVE else "standby",
                "instance": self.me,
                "term": lease.term if lease.role is Role.ACTIVE else (seen.term if seen else 0),
                "holder": seen.holder if seen else None,
                "lease_s": lease.lease_s,
                "took_over_at": self.took_over_at,
                **({"lost": lease.lost_why} if lease.role is Role.LOST else {}),
            }

    # -- the MQTT network thread
    def on_connect(self) -> None:
        with self._lock:
            if self.lease.listening_since is not None:
                self.lease.listening(self.clock())  # a reconnect: silence counts from now
        self._loop.wake()

    def _on_message(self, message: Message) -> None:
        if message.topic != self.topic:
            return
        record = None
        if message.payload:
            try:
                doc = load_json(message.payload)
                check_payload("desired-lease", doc)
                record = LeaseRecord.parse(doc)
            except (ValueError, PayloadError) as e:
                log.warning("ignoring an unreadable lease on %s: %s", self.topic, e)
                return
        with self._lock:
            self.lease.observe(record, self.clock())
            role, why = self.lease.role, self.lease.lost_why
        if role is Role.LOST:  # told at once: the loop of a paused process may not run for a while
            self._tell(role, why)
        self._loop.wake()

    # -- the loop
    def _tick(self) -> float:
        with self._lock:
            action, record = self.lease.next_action(self.clock())
        client = self.client
        if action is not Action.WAIT and record is not None and client is not None and client.is_connected:
            self._send(client, action, record)
        with self._lock:
            self.lease.next_action(self.clock())  # a claim just settled, or a lease just ran out
            role, wait = self.lease.role, self.lease.wait_s(self.clock())
            why = self.lease.lost_why
        self._tell(role, why)
        return wait

    def _send(self, client: MqttClient, action: Action, record: LeaseRecord) -> None:
        stamped = LeaseRecord(record.holder, record.term, record.lease_s, time.time())
        sent_at = self.clock()
        try:
            client.publish_batch([(self.topic, stamped.payload())], timeout=self.lease.lease_s / 3)
        except MqttError as e:
            log.warning("could not %s the lease (term %d): %s", action.value, record.term, e)
            return
        with self._lock:
            self.lease.sent(record, sent_at)
        if action is Action.CLAIM:
            log.info("claimed the config-sync lease, term %d", record.term)

    def _tell(self, role: Role, why: str) -> None:
        with self._telling:  # the loop and the MQTT thread (a loss it noticed)
            if role is self._told or self._told is Role.LOST:
                return
            before, self._told = self._told, role
        if role is Role.ACTIVE:
            self.took_over_at = time.time()
            log.info("active: holding the config-sync lease")
            # its own thread: starting config-sync takes seconds, the renewals cannot wait
            threading.Thread(target=self.on_active, name="config-sync-takeover", daemon=True).start()
        elif role is Role.LOST:
            log.error("lost the config-sync lease (%s); publishing nothing more", why)
            self._loop.stop(timeout=0)
            self.on_lost(why)
        elif role is Role.STANDBY and before is Role.CLAIMING:
            log.info("standing by: another config-sync holds the lease")
