"""``DeployHistory`` with a recording broker and a fake clock: what is restored, what is
published, and that a bad retained payload or a refused publish never stops it."""

from __future__ import annotations

import json
from collections.abc import Iterable

from config_sync.deploys.history import DeployHistory
from config_sync.publication.sender import SyncOutcome
from phrame.git import GitError
from phrame.mqtt import MqttError
from schemas import Topics, canonical_json, check_payload

T = Topics()
SHA = "a" * 40


class Broker:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None]] = []
        self.refuse = False

    def publish_batch(
        self,
        items: Iterable[tuple[str, bytes | None]],
        retain: bool = True,
        qos: int = 1,
        timeout: float = 30.0,
    ) -> None:
        if self.refuse:
            raise MqttError("not connected")
        self.sent += list(items)

    def last(self, env: str) -> dict | None:
        found = [p for t, p in self.sent if t == T.env_deploys(env)]
        if not found or found[-1] is None:
            return None
        doc = json.loads(found[-1])
        check_payload("desired-deploys", doc)
        return doc


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def history(broker: Broker, clock: Clock, info=lambda sha: ("Ada <ada@x>", "first line")) -> DeployHistory:
    return DeployHistory(broker, T, info, timeout_s=60, wall=clock)


def outcome(commit: str, env: str = "prod", node: str = "n1", generation: int = 2) -> SyncOutcome:
    item = T.desired_item(node, "containers", f"{env}.web.0")
    return SyncOutcome("main", commit, True, [env], messages=[(item, b"{}")], generations={node: generation})


def test_nothing_is_recorded_or_published_before_the_history_is_read_back() -> None:
    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.record(outcome(SHA))
    h.check({}, {}, lambda nodes: {})
    assert broker.sent == []


def test_a_bad_retained_payload_is_ignored_and_the_history_starts_again() -> None:
    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.restore({T.env_deploys("prod"): b'{"environment": "prod", "deploys": [{"state": "?"}]}'})
    h.record(outcome(SHA))
    assert [d["commit"] for d in broker.last("prod")["deploys"]] == [SHA]


def test_a_restored_pending_record_gets_a_new_deadline_then_fails_honestly() -> None:
    broker, clock = Broker(), Clock()
    old = {"commit": SHA, "ref": "main", "author": "", "message": "m", "published_at": 10.0, "state": "pending",
           "finished_at": None, "duration_s": None, "nodes": {"n1": 2}, "failed": None}  # fmt: skip
    h = history(broker, clock)
    h.restore({T.env_deploys("prod"): canonical_json({"environment": "prod", "deploys": [old]})})
    h.check({}, {}, lambda nodes: {})
    assert broker.sent == []  # not judged at once: statuses come in within a tick
    clock.now += 60
    h.check({}, {}, lambda nodes: {"n1": "no heartbeat for 70 s"})
    (failed,) = broker.last("prod")["deploys"]
    assert failed["failed"] == {"node": "n1", "reason": "offline (no heartbeat for 70 s)"}
    assert failed["duration_s"] == clock.now - 10.0


def test_a_refused_publish_is_sent_again_at_the_next_tick() -> None:
    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.restore({})
    broker.refuse = True
    h.record(outcome(SHA))
    assert broker.sent == []
    broker.refuse = False
    h.check({}, {}, lambda nodes: {})
    assert broker.last("prod")["deploys"][0]["state"] == "pending"
    h.check({"n1": {"converged": True, "generation": 2}}, {}, lambda nodes: {})
    assert broker.last("prod")["deploys"][0]["state"] == "converged"


def test_an_unreadable_commit_is_still_recorded_and_a_removed_environment_cleared() -> None:
    def broken(sha: str) -> tuple[str, str]:
        raise GitError("cannot read commit")

    broker, clock = Broker(), Clock()
    h = history(broker, clock, broken)
    h.restore({})
    h.record(outcome(SHA))
    assert (broker.last("prod")["deploys"][0]["author"], broker.last("prod")["deploys"][0]["message"]) == (
        "",
        "",
    )
    gone = SyncOutcome("main", "b" * 40, True, [], messages=[(T.env_sync("prod"), None)])
    h.record(gone)
    assert broker.sent[-1] == (T.env_deploys("prod"), None)


def test_the_newest_finished_record_is_followed_and_each_new_word_told_once() -> None:
    """After its deployment converged the environment's health is still judged each tick:
    a new verdict word is published in the record and told once (with the word before);
    a passing word or the same word again is not."""
    from phrame.actual.health import Health, Reason

    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.restore({})
    told: list[tuple[str, str, str, str]] = []
    h.on_health = lambda env, r, before: told.append((env, r.state, before, r.health))
    h.record(outcome(SHA))
    crash = Health("degraded", (Reason("n1", "prod.web.0", "crash-looping: restarted 5 times"),))
    words = [Health("healthy"), Health("healthy"), crash, crash, Health("unknown"), crash, Health("healthy")]
    for word in words:
        h.check({}, {}, lambda nodes: {}, lambda env, r, held, w=word: w)
    assert told == [
        ("prod", "converged", "healthy", "degraded"),
        ("prod", "converged", "degraded", "healthy"),
    ]
    published = [
        json.loads(p)["deploys"][0]["health"] for t, p in broker.sent if p and t == T.env_deploys("prod")
    ]
    assert published == ["progressing", "healthy", "degraded", "healthy"]


def test_the_deployment_of_a_commit_is_found_again_unless_its_verdict_was_a_failure() -> None:
    """After a restart, the head's deployment is followed again from its records (every
    environment of the ref: their nodes and replicas, the earliest publication); a commit
    recorded failed or degraded keeps that verdict, another ref's or commit's is not it."""

    def rec(env: str, node: str, generation: int, state: str, at: float, ref: str = "main") -> dict:
        return {"commit": SHA, "ref": ref, "author": "", "message": "m", "published_at": at, "state": state,
                "finished_at": None, "duration_s": None, "nodes": {node: generation}, "failed": None,
                "replicas": {f"{env}.web.0": node}}  # fmt: skip

    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.restore(
        {
            T.env_deploys("prod"): canonical_json({"environment": "prod", "deploys": [rec("prod", "n1", 3, "pending", 20.0)]}),
            T.env_deploys("lab"): canonical_json({"environment": "lab", "deploys": [rec("lab", "n2", 5, "converged", 10.0)]}),
            T.env_deploys("qa"): canonical_json({"environment": "qa", "deploys": [rec("qa", "n3", 1, "failed", 5.0)]}),
            T.env_deploys("dev"): canonical_json({"environment": "dev", "deploys": [rec("dev", "n4", 1, "pending", 1.0, "dev")]}),
        }
    )  # fmt: skip
    found = h.deployment_of("main", SHA, ["prod", "lab", "dev"])
    assert found is not None
    assert dict(found.nodes) == {"n1": 3, "n2": 5}  # dev is another ref's
    assert dict(found.replicas) == {"prod.web.0": "n1", "lab.web.0": "n2"}
    assert found.published_at == 10.0
    assert h.deployment_of("main", SHA, ["prod", "qa"]) is None  # qa's failure was reported
    assert h.deployment_of("main", "b" * 40, ["prod"]) is None
    assert h.deployment_of("main", SHA, []) is None


def test_the_newest_finished_record_is_not_followed_while_a_publication_runs() -> None:
    """A publication supersedes the newest finished deployment: it is not judged again while
    one runs (at 10,000 nodes each judgement took seconds beside the publication), and is
    judged at the first tick after it."""
    from phrame.actual.health import Health, Reason

    broker, clock = Broker(), Clock()
    h = history(broker, clock)
    h.restore({})
    publishing = [False]
    h.busy = lambda: publishing[0]
    judged: list[str] = []

    def judge(env: str, r: object, held: object) -> Health:
        judged.append(env)
        return Health("degraded", (Reason("n1", "prod.web.0", "crash-looping: restarted 5 times"),))

    h.record(outcome(SHA))
    h.check({}, {}, lambda nodes: {}, lambda env, r, held: Health("healthy"))  # converged
    publishing[0] = True
    h.check({}, {}, lambda nodes: {}, judge)
    assert judged == [] and h.by_env["prod"][0].health == "healthy"
    publishing[0] = False
    h.check({}, {}, lambda nodes: {}, judge)
    assert judged == ["prod"] and h.by_env["prod"][0].health == "degraded"
