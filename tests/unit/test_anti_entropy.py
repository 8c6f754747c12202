"""Anti-entropy's decisions on a broker that acknowledges and drops (a fake broker: the
decision is pure; the real broker case is in tests/integration/test_sync_publishing.py)."""

from __future__ import annotations

from collections.abc import Iterable

from config_sync.models import Claim
from config_sync.publication.anti_entropy import STALE_PASSES, AntiEntropy
from config_sync.publication.sender import DesiredPublisher, SyncOutcome
from phrame.mqtt import topic_matches
from schemas import Topics

TOPICS = Topics("phrame")


class DroppingBroker:
    """Acknowledges every message, stores only those not named in ``drop``."""

    def __init__(self) -> None:
        self.retained: dict[str, bytes] = {}
        self.drop: set[str] = set()
        self.sent: list[list[str]] = []
        self.on_read = lambda: None

    def publish_batch(
        self,
        items: Iterable[tuple[str, bytes | None]],
        retain: bool = True,
        qos: int = 1,
        timeout: float = 30.0,
    ) -> None:
        batch = list(items)
        self.sent.append([t for t, _ in batch])
        for topic, payload in batch:
            if topic in self.drop:
                continue
            if payload:
                self.retained[topic] = payload
            else:
                self.retained.pop(topic, None)

    def collect_retained(
        self, topic_filter: str, settle: float = 0.3, timeout: float = 10.0
    ) -> dict[str, bytes]:
        self.on_read()
        return {t: p for t, p in self.retained.items() if topic_matches(topic_filter, t)}


def publish(publisher: DesiredPublisher, sha: str, rendered: dict) -> SyncOutcome:
    return publisher.publish_commit(
        ref="main",
        commit=sha,
        claim=Claim(frozenset({"env"}), nodes=frozenset({"n1"})),
        rendered=rendered,
        errors=[],
    )


def item(image: str) -> dict:
    return {TOPICS.desired_item("n1", "containers", "env.web.0"): {"id": "env.web.0", "image": image}}


def test_a_dropped_message_is_sent_again_and_foreign_topics_are_left_alone() -> None:
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    topic = TOPICS.desired_item("n1", "containers", "env.web.0")
    broker.drop = {topic}
    publish(publisher, "a" * 40, item("web:1"))
    assert topic not in broker.retained  # acknowledged, never stored
    broker.retained["phrame/desired/environments/env/deploys"] = b"{}"  # the deploy records' own
    broker.drop = set()
    result = publisher.verify()
    assert result.repaired == [topic] and not result.overlapped
    assert topic in broker.retained
    assert publisher.verify().repaired == []  # settled: nothing more to send


def test_an_older_or_lost_topic_is_sent_again_manifests_after_items() -> None:
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    publish(publisher, "a" * 40, item("web:1"))
    topic = TOPICS.desired_item("n1", "containers", "env.web.0")
    old_item = broker.retained[topic]
    publish(publisher, "b" * 40, item("web:2"))
    assert broker.retained[topic] != old_item
    # the broker serves an old item again and lost the manifest (a node that came back with
    # a partial stream)
    broker.retained[topic] = old_item
    del broker.retained[TOPICS.manifest("n1")]
    broker.sent.clear()
    result = publisher.verify()
    assert sorted(result.repaired) == sorted([topic, TOPICS.manifest("n1")])
    assert broker.sent == [[topic], [TOPICS.manifest("n1")]]  # items first, then the manifest


def test_a_read_back_that_a_publication_overlapped_judges_nothing() -> None:
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    publish(publisher, "a" * 40, item("web:1"))
    broker.on_read = lambda: (
        setattr(broker, "on_read", lambda: None),
        publish(publisher, "b" * 40, item("web:2")),
    )
    result = publisher.verify()
    assert result.overlapped and result.repaired == []


def test_the_loop_verifies_what_a_publication_changed_and_the_whole_plane_on_its_timer() -> None:
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    now = [0.0]
    seen: list[int] = []
    entropy = AntiEntropy(
        publisher, TOPICS, interval_s=60, clock=lambda: now[0], on_verified=lambda r: seen.append(r.checked)
    )
    reads: list[str] = []
    broker.on_read = lambda: None
    original = broker.collect_retained

    def recording(topic_filter: str, settle: float = 0.3, timeout: float = 10.0) -> dict[str, bytes]:
        reads.append(topic_filter)
        return original(topic_filter, settle, timeout)

    broker.collect_retained = recording  # type: ignore[method-assign]
    outcome = publish(publisher, "a" * 40, item("web:1"))
    reads.clear()
    entropy.after(outcome)
    assert entropy.tick() == 60  # the changed subtrees read, then wait for the timer
    assert reads == ["phrame/desired/environments/env/#", "phrame/desired/nodes/n1/#"]
    reads.clear()
    now[0] = 61
    entropy.tick()
    assert reads == ["phrame/desired/#"]  # the whole plane, on the timer
    entropy.full_soon(2)
    assert entropy.tick() == 2  # soon after a reconnect


def test_a_clear_that_did_not_take_is_sent_again() -> None:
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    publish(publisher, "a" * 40, item("web:1"))
    topic = TOPICS.desired_item("n1", "containers", "env.web.0")
    kept = broker.retained[topic]
    broker.drop = {topic}
    publish(publisher, "b" * 40, {})  # the service removed: its topic cleared, the clear dropped
    assert broker.retained[topic] == kept
    broker.drop = set()
    assert topic in publisher.verify().repaired
    assert topic not in broker.retained


def test_a_node_that_keeps_serving_an_older_set_after_each_resend_is_left() -> None:
    """A broker node whose retained index stopped (NATS: its consumer lost with a dead
    node) stores nothing that is sent again: after STALE_PASSES re-sends of the same
    topics, anti-entropy says so once (the service moves to the next broker URL)."""
    broker = DroppingBroker()
    publisher = DesiredPublisher(broker, TOPICS)
    now = [0.0]
    stale: list[list[str]] = []
    entropy = AntiEntropy(publisher, TOPICS, interval_s=5, clock=lambda: now[0], on_stale=stale.append)
    topic = TOPICS.desired_item("n1", "containers", "env.web.0")
    publish(publisher, "a" * 40, item("web:1"))
    broker.drop = {topic}
    publish(publisher, "b" * 40, item("web:2"))  # acknowledged, never stored from now on
    for n in range(1, STALE_PASSES + 2):
        now[0] = 5.0 * n
        entropy.tick()
        assert stale == ([] if n < STALE_PASSES else [[topic]]), n
    broker.drop = set()  # another node, or the index back: repaired, the count starts over
    now[0] += 5
    entropy.tick()
    now[0] += 5
    entropy.tick()
    assert stale == [[topic]] and broker.retained[topic]
