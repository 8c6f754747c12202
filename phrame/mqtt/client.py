"""The one MQTT client every Phrame service uses: connect, subscribe, publish, stay connected.

Services build one :class:`MqttClient` per plane. paho's network thread runs the
connection and reconnects with backoff; every subscription is remembered and renewed on
each (re)connect. With OAuth2 the token is the password and a fresh one triggers a
graceful reconnect (session, subscriptions and unacknowledged QoS 1 messages survive).
Callbacks run on the network thread; one that raises is logged, never fatal.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import paho.mqtt.client as paho

from phrame.mqtt import paho_setup
from phrame.mqtt.acks import AckTracker
from phrame.mqtt.disconnects import ShortConnections, describe_disconnect
from phrame.mqtt.errors import MqttError, PublishTimeout
from phrame.mqtt.messages import Callback, Message, Will, check_filter, check_topic
from phrame.mqtt.oauth import TokenProvider
from phrame.mqtt.reading import RetainedCollector
from phrame.mqtt.settings import MqttSettings
from phrame.mqtt.subscribe_retries import SubscribeRetries
from phrame.mqtt.subscriptions import Subscriptions
from phrame.mqtt.tls import diagnose

log = logging.getLogger(__name__)


class MqttClient:
    """One broker connection. See docs/operations/settings.md for the settings it reads."""

    def __init__(
        self,
        settings: MqttSettings,
        client_id: str,
        *,
        will: Will | None = None,
        on_connect: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.client_id = settings.client_id(client_id)  # ``client_id`` only without a user name
        # the nodes of the broker, tried in turn: the client stays on one while it answers and
        # moves to the next after a failed attempt or a lost connection
        self._brokers = settings.brokers
        self._at = 0  # index of the broker the next (or current) connection goes to
        self._move_on = False  # the last attempt failed or the connection ended: try the next
        # the protocol spoken: ``auto`` starts with MQTT 5 and falls back to 3.1.1 for good
        # when a broker answers "unsupported protocol version" (NATS's MQTT listener)
        self._speaks = replace(settings, protocol="5") if settings.negotiates else settings
        self._refused_v5 = False
        self._will = will
        self._user_on_connect = on_connect
        self._paho = self._build_paho()
        self._subs = Subscriptions()
        self._subscribing = threading.Lock()  # a SUBSCRIBE's mid is recorded before its SUBACK is read
        self._sent_filters: dict[int, list[str]] = {}  # mid -> the filters of that SUBSCRIBE
        self._retries = SubscribeRetries(self._resubscribe)
        self._lifecycle = threading.Lock()
        self._state = threading.Condition()  # guards the fields below
        self._connected_once = False
        self._refused: str | None = None
        self._last_error = "no answer"
        self._loss_reported = False  # this connection attempt's end was reported (network thread only)
        self._acks = AckTracker()
        self._running = False
        self._cycling = False
        self._tokens: TokenProvider | None = None
        self._network_thread: threading.Thread | None = None
        self.connect_count = 0
        self._connected_at: float | None = None
        self._short = ShortConnections()
        self.session_resumed = False  # the last connect found our session (see _on_connect)
        self.send_window = paho_setup.MAX_INFLIGHT  # set from each CONNACK (see _on_connect)

    def _build_paho(self) -> paho.Client:
        client = paho_setup.build_paho(self._speaks, self.client_id, self._will)
        client.on_pre_connect = self._on_pre_connect
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        client.on_subscribe = self._on_subscribe
        client.on_connect_fail = self._on_connect_fail
        return client

    @property
    def _where(self) -> str:
        return f"{self._brokers[self._at].redacted()} as {self.client_id}"

    @property
    def protocol(self) -> str:
        """The MQTT version this client speaks now: ``5`` or ``3.1.1`` (``auto`` resolved)."""
        return self._speaks.protocol

    @property
    def broker_url(self) -> str:
        """The broker (of the list) the client is connected to, or tries next; no credentials."""
        return self._brokers[self._at].redacted()

    # -- lifecycle
    def start(self, timeout: float | None = 10.0) -> None:
        """Connect within ``timeout`` seconds or raise :class:`MqttError`; then stay connected.

        ``timeout=None`` waits as long as it takes (a host that boots before its broker),
        retrying with backoff; only a refused login or :meth:`stop` ends the wait with an error.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lifecycle:
            if self._running:
                raise MqttError(f"client {self.client_id} already started")
            self._running = True
            with self._state:
                self._connected_once, self._refused = False, None
            if self.settings.uses_oauth2:
                self._tokens = TokenProvider(self.settings, on_token=self._on_new_token)
                self._tokens.start()
        tokens = self._tokens
        if tokens is not None and not self._await(tokens.has_token, deadline):
            self.stop()
            raise MqttError(
                f"no OAuth2 token from {self.settings.oauth2_token_url} "
                f"within {timeout or 0:.0f}s (see the warnings above)"
            )
        with self._lifecycle:
            if not self._running:
                raise MqttError(f"client {self.client_id} stopped before it connected")
            paho_setup.connect_async(self._paho, self._speaks)
            self._paho.loop_start()
        answered = lambda: self._connected_once or self._refused is not None or self._refused_v5  # noqa: E731
        self._await(answered, deadline)
        if self._refused_v5 and not self._connected_once and self._fall_back_to_311():
            self._await(answered, deadline)
        with self._state:
            ok, refused, last = self._connected_once, self._refused, self._last_error
        if ok:
            return
        self.stop()
        if refused:
            raise MqttError(
                f"broker {self._where} refused the connection: {refused}; check PHRAME_MQTT_USERNAME/PASSWORD"
            )
        if timeout is None:
            raise MqttError(f"client {self.client_id} stopped before it connected")
        reason = diagnose(self.settings)
        if reason is None and self._speaks.protocol == "5":
            reason = f"{last}; the broker may speak only MQTT 3.1.1 (PHRAME_MQTT_PROTOCOL=3.1.1 or auto)"
        raise MqttError(f"could not connect to {self._where} within {timeout:.0f}s: {reason or last}")

    def _fall_back_to_311(self) -> bool:
        """``auto``: a broker said it does not speak MQTT 5; speak 3.1.1 from now on.

        The paho client is rebuilt (its protocol is fixed at construction), with every
        subscription renewed on its first connect as on any reconnect. What 3.1.1 lacks:
        the will delay (the will fires as soon as the broker notices) and the session
        expiry (the session lives until a clean start)."""
        with self._lifecycle:
            if not self._running or self._speaks.protocol != "5":
                return False
            log.warning(
                "broker %s does not speak MQTT 5; speaking 3.1.1 (no will delay, no session expiry)",
                self._where,
            )
            self._drop_quietly()  # the old client's disconnect is no loss to report
            self._speaks = replace(self.settings, protocol="3.1.1")
            self._paho = self._build_paho()
            with self._state:
                self._refused_v5 = False
            paho_setup.connect_async(self._paho, self._speaks, self._brokers[self._at])
            self._paho.loop_start()
            return True

    def _await(self, done: Callable[[], bool], deadline: float | None) -> bool:
        """Wait until ``done()``, the deadline (None: none) or :meth:`stop`; whether done.

        Without a deadline it says once, after ``settings.no_connection_warn_s`` (10 s by
        default), why the broker does not answer."""
        said = time.monotonic() + self.settings.no_connection_warn_s
        while True:
            now = time.monotonic()
            step = 0.25 if deadline is None else max(0.0, min(0.25, deadline - now))
            with self._state:
                if self._state.wait_for(done, step):
                    return True
            if not self._running or (deadline is not None and time.monotonic() >= deadline):
                return False
            if deadline is None and time.monotonic() >= said:
                said = float("inf")
                with self._state:
                    last = self._last_error
                log.warning(
                    "still no connection to %s (%s); waiting, retrying with backoff",
                    self._where,
                    diagnose(self.settings) or last,
                )

    def stop(self) -> None:
        """Disconnect cleanly and end the network thread.

        The broker discards the will and, under MQTT 5, the session: a stopped client is
        gone, not away. (A token switch keeps the session; see :meth:`_on_new_token`.)
        """
        with self._lifecycle:
            if not self._running:
                return
            self._running = False
        self._retries.stop()
        if self._tokens:  # outside the lock: a token callback may be waiting for it
            self._tokens.stop()
        with self._lifecycle:
            self._paho.disconnect(properties=paho_setup.end_session(self._speaks))
            paho_setup.stop_loop(self._paho)
            paho_setup.release_wakeup_sockets(self._paho)

    @property
    def is_connected(self) -> bool:
        return self._paho.is_connected()

    @property
    def last_error(self) -> str:
        """Why the last connection attempt failed or the last connection ended."""
        with self._state:
            return self._last_error

    # -- subscribing and reading
    def subscribe(self, topic_filter: str, callback: Callback, timeout: float = 5.0, *, qos: int = 1) -> bool:
        """Deliver every message matching ``topic_filter`` to ``callback``, across reconnects.

        ``qos`` 0 asks the broker to deliver without acknowledgements (at most once, and
        nothing queued while disconnected): for reports where a lost one is as good as a
        late one, such as heartbeats.

        When connected (and not called from an MQTT callback) it returns once the broker
        acknowledged the subscription, so a message published afterwards is delivered:
        ``True`` when granted, ``False`` when refused or unacknowledged within ``timeout``
        (the subscription is still renewed on every reconnect). Offline it returns ``False``
        at once; the subscription is sent on connect.
        """
        if qos not in (0, 1):
            raise ValueError(f"subscription QoS {qos} for {topic_filter!r}: 0 or 1")
        self._subs.add(check_filter(topic_filter), callback, qos)
        if not self.is_connected:
            return False
        mid = self._send_subscribe([topic_filter], qos=self._subs.qos_of(topic_filter) or 0)
        if threading.current_thread() is self._network_thread:
            return False  # only this thread reads the SUBACK; do not wait for it
        refused = self._acks.wait_suback(mid, timeout)
        if refused:
            log.warning("broker %s refused a subscription to %s (ACL?)", self._where, topic_filter)
        return refused is False

    def collect_retained(
        self, topic_filter: str, settle: float = 0.3, timeout: float = 10.0
    ) -> dict[str, bytes]:
        """Every retained, non-empty message under ``topic_filter`` (topic -> payload)."""
        self._refuse_network_thread("collect_retained")
        collector = RetainedCollector(check_filter(topic_filter), settle=settle, timeout=timeout)
        key = id(collector)
        self._subs.add_temporary(key, topic_filter, collector.add)
        try:
            if not self._wait_connected(collector.remaining()):
                raise MqttError(f"not connected to {self._where}; cannot read {topic_filter}")
            # retain-as-published off: only the replay carries the retain flag (see RetainedCollector).
            # QoS 0, or a permanent subscription's own on this very filter (a SUBSCRIBE replaces
            # its QoS): a read needs no delivery guarantee beyond its connection, and a QoS 1
            # subscription costs a clustered broker a replicated consumer (NATS: a JetStream
            # durable, whose creation times out into SUBACK 0x80 while a node is down)
            mid = self._send_subscribe([topic_filter], qos=self._subs.qos_of(topic_filter) or 0)
            refused = self._acks.wait_suback(mid, collector.remaining())
            if refused is None:
                raise MqttError(f"no SUBACK for {topic_filter} from {self._where}")
            if refused:
                raise MqttError(f"broker {self._where} refused a subscription to {topic_filter} (ACL?)")
            return collector.wait()
        finally:
            permanent = self._subs.remove_temporary(key)
            if self.is_connected and not permanent:
                self._paho.unsubscribe(topic_filter)
            elif self.is_connected and self._speaks.protocol == "5":
                # restore the permanent subscription's options, without a retained replay
                self._send_subscribe(
                    [topic_filter], retain_handling=1, qos=self._subs.qos_of(topic_filter) or 0
                )

    # -- publishing
    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        """Queue one message and return at once; ``None``/``b""`` clears a retained topic."""
        self._publish(topic, payload, retain, qos)

    def publish_batch(
        self,
        items: Iterable[tuple[str, bytes | None]],
        retain: bool = True,
        qos: int = 1,
        timeout: float = 30.0,
        *,
        keep_unacked: bool = True,
    ) -> None:
        """Publish every item and wait until the broker acknowledged each (QoS 1 PUBACK).

        On a timeout the messages not acknowledged stay queued and are sent again on
        reconnect, unless ``keep_unacked`` is False: then they are dropped (the caller
        answers "failed"; a message the broker refused by dropping the connection would
        otherwise be sent again on every reconnect, and dropped again)."""
        self._refuse_network_thread("publish_batch")
        mark = self._acks.mark()
        sent = {self._publish(topic, payload, retain, qos): topic for topic, payload in items}
        if qos > 0 and sent:
            try:
                self._acks.wait_batch(sent, mark, timeout, self._where)
            except PublishTimeout as e:
                if keep_unacked:
                    raise
                paho_setup.drop_outgoing(self._paho, sent)
                said = str(e).replace("they stay queued", "dropped, never sent again")
                raise PublishTimeout(said, pending=e.pending) from None

    # -- internals
    def _publish(self, topic: str, payload: bytes | None, retain: bool, qos: int) -> int:
        try:
            check_topic(topic)  # before it is queued: the broker would drop the connection
            info = self._paho.publish(topic, payload or b"", qos=qos, retain=retain)
        except ValueError as e:
            raise MqttError(f"cannot publish to {topic!r}: {e}") from e
        if info.rc == paho.MQTT_ERR_QUEUE_SIZE:
            raise MqttError(f"outgoing queue full; cannot publish to {topic}")
        return int(info.mid)

    def _send_subscribe(self, filters: list[str], **options: Any) -> int:
        topics = paho_setup.subscribe_topics(self._speaks, filters, **options)
        with self._subscribing:
            _rc, mid = self._paho.subscribe(topics)
            if mid:
                self._sent_filters[int(mid)] = list(filters)
        return int(mid or 0)

    def _refuse_network_thread(self, what: str) -> None:
        if threading.current_thread() is self._network_thread:
            # It would wait for acknowledgements that only this very thread can read.
            raise MqttError(f"{what} called from an MQTT callback; call it from another thread")

    def _wait_connected(self, timeout: float) -> bool:
        with self._state:
            return self._state.wait_for(lambda: self._paho.is_connected(), timeout)

    def _on_pre_connect(self, client: paho.Client, _userdata: Any) -> None:
        self._network_thread = threading.current_thread()
        self._loss_reported = False
        if self._move_on and len(self._brokers) > 1:  # fail over: the next node of the broker
            self._at = (self._at + 1) % len(self._brokers)
            paho_setup.point_at(client, self._brokers[self._at])
            log.info("trying broker %s", self._where)
        self._move_on = False
        password = self._tokens.current if self._tokens else self.settings.static_password
        client.username_pw_set(self.settings.mqtt_username, password)

    def _on_connect(self, client: paho.Client, _u: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self._move_on = True
            if reason.value == paho_setup.UNSUPPORTED_PROTOCOL and self.settings.negotiates:
                with self._state:  # start() falls back to 3.1.1 (it owns the paho client)
                    self._refused_v5 = True
                    self._state.notify_all()
                return
            log.warning("broker refused %s: %s", self._where, reason)
            auth = reason.value in paho_setup.AUTH_REFUSED
            if auth and self._tokens:
                self._tokens.refresh_now()
            with self._state:
                self._last_error = str(reason)
                if auth and not self._tokens and not self._connected_once:
                    self._refused = str(reason)
                self._state.notify_all()
            return
        # QoS 1 messages this connection keeps unacknowledged at once (a batch's pace)
        self.send_window = paho_setup.apply_receive_maximum(client, props)
        groups = self._subs.by_qos()
        filters = [f for group in groups.values() for f in group]
        for qos, group in sorted(groups.items()):
            # A resumed session still holds our subscriptions: renew them without
            # replaying every retained message (v5 retain handling 1).
            self._send_subscribe(group, retain_handling=1 if flags.session_present else 0, qos=qos)
        # Whether the broker kept our session: then QoS 1 messages sent while we were away
        # were queued for us and nothing was missed (3.1.1 with a clean session: never).
        self.session_resumed = bool(flags.session_present)
        self.connect_count += 1
        self._connected_at = time.monotonic()
        log.info(
            "connected to %s (session present: %s, %d subscriptions renewed)",
            self._where,
            flags.session_present,
            len(filters),
        )
        with self._state:
            self._connected_once = True
            self._state.notify_all()
        if self._user_on_connect:
            try:
                self._user_on_connect()
            except Exception:
                log.exception("on_connect callback failed for %s", self._where)

    def _on_disconnect(self, _c: paho.Client, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if self._loss_reported:  # paho reports a keepalive timeout twice (paho.mqtt.python#870)
            return
        self._loss_reported = True
        self._move_on = not self._cycling  # a lost node: the next attempt goes to another
        why = describe_disconnect(
            int(reason.value), str(reason), from_broker=bool(flags.is_disconnect_packet_from_server)
        )
        with self._state:
            self._last_error = why
            self._state.notify_all()
        if self._cycling:
            log.info("disconnected from %s to reconnect (a fresh token, or MQTT 3.1.1)", self._where)
        elif self._running:
            log.warning("disconnected from %s: %s; reconnecting", self._where, why)
            at = self._connected_at
            if at is not None and self._short.ended(time.monotonic() - at) and self.settings.mqtt_username:
                log.warning(
                    "the broker keeps ending our connection soon after login (%s): is another process "
                    "logged in as %s? The broker makes the user name the client id, so it allows "
                    "one connection per account: give each process its own account",
                    self._where,
                    self.settings.mqtt_username,
                )

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        try:
            message = Message(
                topic=msg.topic, payload=bytes(msg.payload), retain=bool(msg.retain), qos=msg.qos
            )
        except UnicodeDecodeError:
            log.warning("ignoring a message with a non-UTF-8 topic from %s", self._where)
            return
        self._subs.dispatch(message)

    def _on_publish(self, _c: paho.Client, _u: Any, mid: int, reason: Any, _p: Any) -> None:
        self._acks.acked(mid, refused=bool(reason.is_failure))

    def _on_subscribe(self, _c: paho.Client, _u: Any, mid: int, reasons: Any, _p: Any) -> None:
        with self._subscribing:
            filters = self._sent_filters.pop(mid, [])
        kept = set(self._subs.filters())
        for topic_filter, code in zip(filters, reasons, strict=False):
            if topic_filter not in kept:
                continue  # a read's temporary subscription: its caller hears the refusal
            if code.is_failure:  # a broker still electing (NATS) or an ACL: ask again later
                delay = self._retries.refused(topic_filter)
                log.warning(
                    "broker %s refused a subscription to %s (%s); asking again in %.0f s",
                    self._where,
                    topic_filter,
                    code,
                    delay,
                )
            else:
                self._retries.granted(topic_filter)
        self._acks.subacked(mid, refused=any(r.is_failure for r in reasons))

    def _resubscribe(self, topic_filter: str) -> None:
        """A refused subscription's retry (on the retry timer's thread)."""
        qos = self._subs.qos_of(topic_filter)
        if self._running and self.is_connected and qos is not None:
            self._send_subscribe([topic_filter], qos=qos)

    def _on_connect_fail(self, _c: paho.Client, _u: Any) -> None:
        self._move_on = True
        others = " (then the next broker of the list)" if len(self._brokers) > 1 else ""
        log.warning("cannot connect to %s; retrying with backoff%s", self._where, others)

    def _drop_quietly(self) -> None:
        """Disconnect the current paho client and stop its loop, reporting no loss (the caller
        connects again at once: a protocol fallback, a fail-over)."""
        self._cycling = True
        try:
            self._paho.disconnect()
            paho_setup.stop_loop(self._paho)
            paho_setup.release_wakeup_sockets(self._paho)
        finally:
            self._cycling = False

    def fail_over(self, why: str) -> bool:
        """Leave the broker node now served for the next of the list (one that answers but
        serves an older retained set, which no reconnect to it would mend); ``why`` is
        logged. Subscriptions are renewed and unacknowledged messages sent again there, as on
        any reconnect. False (nothing done) with a single URL or when stopped."""
        with self._lifecycle:
            if not self._running or len(self._brokers) < 2:
                return False
            left = self._where
            self._drop_quietly()
            self._at = (self._at + 1) % len(self._brokers)
            log.warning("leaving broker %s for %s: %s", left, self._brokers[self._at].redacted(), why)
            paho_setup.connect_async(self._paho, self._speaks, self._brokers[self._at])
            self._paho.loop_start()
            return True

    def _on_new_token(self, _token: str) -> None:
        """A fresh token: reconnect with it now, before the old one expires."""
        with self._lifecycle:
            if not self._running or not self._paho.is_connected():
                return  # the next connection attempt picks the new token up
            log.info("reconnecting to %s with a fresh OAuth2 token", self._where)
            self._cycling = True
            try:
                self._paho.disconnect()  # a clean DISCONNECT: the will is not published
                paho_setup.stop_loop(self._paho)
                paho_setup.release_wakeup_sockets(self._paho)
            finally:
                self._cycling = False
            paho_setup.connect_async(self._paho, self._speaks)
            self._paho.loop_start()
