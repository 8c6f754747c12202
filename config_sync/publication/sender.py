"""Publishing a commit's desired state: diff against what the broker holds, send the rest.

The sync pass calls :meth:`DesiredPublisher.publish_commit`. What is published is rebuilt from
the retained topics at start-up (and after any failed batch), so a restart republishes
nothing unchanged and a half-published pass is completed by the next one. An invalid
commit publishes only its environments' ``sync`` topics; it never touches desired items.
What goes out, and in which order, is :func:`config_sync.publication.order.publication_order`'s
decision; this module only sends its two steps (items and clears, then manifests and
``sync`` topics) as acknowledged batches and keeps what the broker holds.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from config_sync.errors import PublishError
from config_sync.models import Claim
from config_sync.publication.order import json_object, publication_order
from config_sync.publication.plane import decode
from config_sync.rollouts.gate import Gated
from phrame.mqtt import MqttError, topic_matches
from phrame.runtime.gc_pause import gc_paused
from schemas import Topics

log = logging.getLogger(__name__)
# a push to more nodes than this goes out in overlapping batches of this many nodes each
# (items, then their manifests with the next nodes' items): see PublicationOrder.batches
NODES_PER_BATCH = 500


class Sender(Protocol):
    """The part of ``phrame.mqtt.MqttClient`` that sends (the deploy records need only this)."""

    def publish_batch(
        self,
        items: Iterable[tuple[str, bytes | None]],
        retain: bool = True,
        qos: int = 1,
        timeout: float = 30.0,
    ) -> None: ...


class Broker(Sender, Protocol):
    """The part of ``phrame.mqtt.MqttClient`` publishing needs: sending and reading back."""

    def collect_retained(
        self, topic_filter: str, settle: float = 0.3, timeout: float = 10.0
    ) -> dict[str, bytes]: ...


@dataclass
class SyncOutcome:
    """What one publication did (for /status, metrics, the deploy watch and tests)."""

    ref: str
    commit: str
    ok: bool
    environments: list[str]
    errors: list[dict[str, Any]] = field(default_factory=list)
    messages: list[tuple[str, bytes | None]] = field(default_factory=list)
    changed_nodes: list[str] = field(default_factory=list)
    generations: dict[str, int] = field(default_factory=dict)  # changed node -> its manifest's
    seconds: float = 0.0
    send_seconds: float = 0.0  # of ``seconds``: publishing and waiting for every PUBACK
    tracked: bool = True  # False: the ref is no longer tracked, nothing was done
    rollouts: Gated | None = None  # what the rollout gate decided (None: no gate)


@dataclass(frozen=True)
class Verified:
    """What one anti-entropy pass found: topics compared, those sent again, or that a
    publication overlapped the read-back (nothing judged)."""

    checked: int
    repaired: list[str]
    overlapped: bool


# (rendered, published, published decoded) -> the rendering with held-back replicas put back
Gate = Callable[[Mapping[str, dict[str, Any]], Mapping[str, bytes], dict[str, dict[str, Any]]], Gated]


class DesiredPublisher:
    def __init__(
        self,
        broker: Broker,
        topics: Topics,
        *,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        applied: Callable[[], Mapping[str, int]] | None = None,
        before_manifests: Callable[[], None] | None = None,
    ) -> None:
        self.broker = broker
        # called once a commit's items are acknowledged, before its manifests go out: the
        # point where a crash leaves a partial view (the fault suite stops config-sync there)
        self.before_manifests = before_manifests
        # node -> the highest generation its agent reported applied: a changed manifest goes
        # out above it too, though broker and process both lost it (restarted together)
        self.applied = applied
        self.topics = topics
        self.timeout = timeout
        self.clock = clock
        self.published: dict[str, bytes] | None = None  # None: rebuild from the broker first
        self.messages_total = 0
        self._decoded: dict[str, tuple[bytes, dict[str, Any]]] = {}  # topic -> (payload, its JSON)
        # ``published`` decoded (the owned topics), for the very dict it was made of; the
        # topics ``_send`` changed since are decoded again, not the whole plane on every pass
        self._view: dict[str, dict[str, Any]] | None = None
        self._view_of: dict[str, bytes] | None = None
        self._view_changed: set[str] = set()
        # the highest manifest generation seen per node, kept across rebuilds: a manifest
        # cleared (node left the inventory) or lost (broker without persistence) comes back
        # above it, so generations only grow and the deploy watch can compare them
        self.generations: dict[str, int] = {}
        self._lock = threading.Lock()  # held for a whole publication, PUBACK waits included
        self._stale = threading.Event()  # set by invalidate(): rebuild before the next publication
        # what this publisher itself sent last, per topic (None: cleared): what anti-entropy
        # holds the broker to. A PUBACK is no proof the broker stored a retained message (a
        # clustered broker losing its stream leader acknowledges and drops), so verify()
        # reads the plane back and sends again whatever differs.
        self._sent: dict[str, bytes | None] = {}
        self._sends = 0  # publications so far: a read-back that overlaps one is not judged
        self.repaired_total = 0  # topics anti-entropy sent again

    def rebuild(self) -> None:
        """Read every retained desired-plane topic back from the broker."""
        try:
            self.published = self.broker.collect_retained(self.topics.desired_filter(), settle=0.3)
        except MqttError as e:
            raise PublishError(f"cannot read the published desired state: {e}") from e
        self._note_generations(self.published.items())
        log.info("rebuilt the published state: %d retained desired topics", len(self.published))

    def _decoded_view(self, published: dict[str, bytes]) -> dict[str, dict[str, Any]]:
        """``published`` decoded: the view kept for this very dict, with what ``_send``
        changed in it since decoded again (a rebuilt plane is a new dict: decoded whole)."""
        view = self._view
        if view is None or self._view_of is not published:
            view = decode(published, self.topics, self._decoded)
        elif self._view_changed:
            changed = {t: published[t] for t in self._view_changed if t in published}
            for topic in self._view_changed:
                view.pop(topic, None)
            view.update(decode(changed, self.topics, self._decoded))
        self._view, self._view_of = view, published
        self._view_changed = set()
        return view

    def _note_generations(self, manifests: Iterable[tuple[str, bytes | None]]) -> None:
        for topic, raw in manifests:
            doc = json_object(raw)
            node = self._manifest_node(topic)
            if doc is None or node is None or not isinstance(doc.get("generation"), int):
                continue
            self.generations[node] = max(self.generations.get(node, 0), doc["generation"])

    def _floor(self) -> dict[str, int]:
        """Per node, the generation a changed manifest must go out above."""
        floor = dict(self.generations)
        for node, generation in (self.applied() if self.applied is not None else {}).items():
            floor[node] = max(floor.get(node, 0), generation)
        return floor

    def _manifest_node(self, topic: str) -> str | None:
        try:
            parsed = self.topics.parse(topic)
        except ValueError:
            return None
        return parsed.node if parsed.plane == "desired" and parsed.kind == "manifest" else None

    def is_publishing(self) -> bool:
        """Whether a publication (or a read-back's comparison) holds the publisher now."""
        return self._lock.locked()

    def invalidate(self) -> None:
        """Forget what is published; the next publication re-reads it from the broker.

        Lock-free: paho's network thread calls this on a reconnect, and a publication holding
        the lock waits for PUBACKs that only that thread can deliver. A publication running
        now leaves the flag set, so the one after it rebuilds.
        """
        self._stale.set()

    def publish_commit(
        self,
        *,
        ref: str,
        commit: str,
        claim: Claim,
        rendered: Mapping[str, dict[str, Any]] | None,
        errors: list[dict[str, Any]],
        gate: Gate | None = None,
    ) -> SyncOutcome:
        """Publish ``rendered`` (the topics of ``claim.environments`` at ``commit``) or, with
        ``errors``, only the sync topics that report them, in the order
        :func:`~config_sync.publication.order.publication_order` decides. ``gate`` (staged
        rollouts) sees what the broker holds and may hold replicas back; the rollout topics
        it returns go out after the manifests. Python's cyclic collector is held off while
        it runs (:func:`~phrame.runtime.gc_pause.gc_paused`)."""
        with gc_paused():
            return self._publish_commit(
                ref=ref, commit=commit, claim=claim, rendered=rendered, errors=errors, gate=gate
            )

    def _publish_commit(
        self,
        *,
        ref: str,
        commit: str,
        claim: Claim,
        rendered: Mapping[str, dict[str, Any]] | None,
        errors: list[dict[str, Any]],
        gate: Gate | None,
    ) -> SyncOutcome:
        started = time.monotonic()
        with self._lock:  # one publication at a time: each diffs against the last
            if self._stale.is_set():
                self._stale.clear()  # before rebuilding: a reconnect meanwhile sets it again
                self.published = None
            if self.published is None:
                self.rebuild()
            published = self.published or {}
            fresh = not errors and rendered is not None
            previous = self._decoded_view(published) if fresh else None
            gated = None
            if gate is not None and rendered is not None and previous is not None:
                gated = gate(rendered, published, previous)
                rendered = gated.rendered
            decision = publication_order(
                ref=ref,
                commit=commit,
                claim=claim,
                rendered=rendered,
                errors=errors,
                published=published,
                topics=self.topics,
                now=self.clock(),
                previous=previous,
                floor=self._floor() if fresh else None,
                held=gated.held if gated is not None else None,
                holds=gated.holds if gated is not None else None,
            )
            order = decision.order
            if gated is not None and gated.messages:  # the rollouts' state, once their items are out
                order = replace(order, sync=(*order.sync, *gated.messages))
            messages = order.publication_messages()
            sending = time.monotonic()
            # acknowledged batches: a node's manifest only after its items (PublicationOrder.batches);
            # the second is the first to hold manifests, when any follow items
            for i, batch in enumerate(order.batches(self.topics, NODES_PER_BATCH)):
                if i == 1 and order.manifests and self.before_manifests is not None:
                    self.before_manifests()
                self._send(batch, commit, published)
            self._note_generations(order.manifests)
            changed = order.changed_nodes(self.topics)
            generations = {n: self.generations[n] for n in changed}
            # just published, or published already as these very bytes: the desired object
            # is the decoding from now on (the next pass finds its own payloads by identity)
            for topic, doc in decision.desired.items():
                if topic in published and (previous is None or previous.get(topic) is not doc):
                    self._decoded[topic] = (published[topic], doc)
                    self._view_changed.add(topic)
            sent_s = time.monotonic() - sending
            self.published = published
            self.messages_total += len(messages)
        outcome = SyncOutcome(
            ref=ref,
            commit=commit,
            ok=not errors,
            environments=sorted(claim.environments),
            errors=errors,
            messages=messages,
            changed_nodes=changed,
            generations=generations,
            seconds=time.monotonic() - started,
            send_seconds=sent_s,
            rollouts=gated,
        )
        # a poll that changed nothing is not news: INFO only when something went out
        log.log(
            logging.INFO if messages else logging.DEBUG,
            "published %s at %s: %d messages (%d items, %d cleared, %d manifests), %d error(s)",
            ref,
            commit[:12],
            len(messages),
            len(order.items),
            len(order.clears),
            len(order.manifests),
            len(errors),
        )
        return outcome

    def _send(self, step: list[tuple[str, bytes | None]], commit: str, published: dict[str, bytes]) -> None:
        if not step:
            return
        try:
            self.broker.publish_batch(step, timeout=self.timeout)
        except MqttError as e:
            self.published = None  # unknown what arrived: re-read before the next pass
            raise PublishError(f"publishing {len(step)} messages for {commit[:12]} failed: {e}") from e
        self._sends += 1
        for topic, payload in step:
            self._sent[topic] = payload or None
            self._view_changed.add(topic)
            if payload:
                published[topic] = payload
            else:
                published.pop(topic, None)
                self._decoded.pop(topic, None)

    def verify(self, topic_filters: Iterable[str] | None = None, *, settle: float = 0.3) -> Verified:
        """Anti-entropy: read what the broker holds under ``topic_filters`` (default: the
        whole desired plane) and send again every topic this publisher sent whose retained
        payload differs (a changed or lost message, or a clear that did not take), items and
        clears before manifests, as a publication orders them. A publication that ran while
        the plane was read makes the reading stale: nothing is judged (``overlapped``), the
        caller tries again. Topics others write (deploy records, placement's, the audit list)
        are never touched: only what this publisher sent is compared."""
        filters = list(topic_filters) if topic_filters is not None else [self.topics.desired_filter()]
        with self._lock:
            sends = self._sends
        held: dict[str, bytes] = {}
        try:
            for topic_filter in filters:
                held.update(self.broker.collect_retained(topic_filter, settle=settle))
        except MqttError as e:
            raise PublishError(f"cannot read the desired plane back: {e}") from e
        with self._lock:
            if self._sends != sends:
                return Verified(checked=0, repaired=[], overlapped=True)
            wanted = {t: p for t, p in self._sent.items() if any(topic_matches(f, t) for f in filters)}
            wrong = [(t, p) for t, p in sorted(wanted.items()) if held.get(t) != p]
            if wrong:
                manifests = [m for m in wrong if self._manifest_node(m[0]) is not None]
                first = [m for m in wrong if self._manifest_node(m[0]) is None]
                log.warning(
                    "anti-entropy: the broker holds %d of %d published topics otherwise (first: %s, %s); "
                    "sending them again",
                    len(wrong),
                    len(wanted),
                    wrong[0][0],
                    _versus(held.get(wrong[0][0]), wrong[0][1]),
                )
                published = self.published if self.published is not None else {}
                self._send(first, "anti-entropy", published)
                self._send(manifests, "anti-entropy", published)
                self.repaired_total += len(wrong)
            return Verified(checked=len(wanted), repaired=[t for t, _ in wrong], overlapped=False)

    def sync_state(self, env: str) -> dict[str, Any] | None:
        """The environment's sync topic as last published (for /status)."""
        with self._lock:
            return json_object((self.published or {}).get(self.topics.env_sync(env)))


def _versus(held: bytes | None, sent: bytes | None) -> str:
    """How a held payload differs from the published one, briefly (digests, not payloads)."""

    def brief(payload: bytes | None) -> str:
        return "nothing" if not payload else f"{len(payload)} bytes {hashlib.sha256(payload).hexdigest()[:8]}"

    return f"held {brief(held)}, published {brief(sent)}"
