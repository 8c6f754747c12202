"""Hostile desired-plane messages and restart commands through the node agent's real
intake (``DesiredStore.apply``, ``RestartCommands.accept``/``run``), its pure plan and its
status report. Nothing may escape; an invalid payload is reported (an error the status can
carry) and ignored: the desired state, and so the plan, stay what they were."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from node_agent.commands import RestartCommands
from node_agent.desired import DesiredStore
from node_agent.errors import MAX_ERROR_CHARS
from node_agent.models import ENVIRONMENT, MANAGED, NODE, REPLICA, SERVICE, ActualState, ObservedContainer
from node_agent.plan import compute_plan
from node_agent.reporting import ActualReporter
from phrame.mqtt import Message
from schemas import Topics, check_payload, load_json
from tests.fuzz.payloads import encode, hostile_message, mutate, valid_items
from tests.fuzz.profile import fuzz
from tests.support import agent_support as spec

T = Topics()
ME = "node-me"
seeds = st.integers(0, 2**32 - 1)  # a seed prints well and replays: random.Random(seed)


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None]] = []

    def publish(self, topic: str, payload: bytes | None, retain: bool = True, qos: int = 1) -> None:
        self.sent.append((topic, payload))


def seeded_store() -> DesiredStore:
    store = DesiredStore(T, ME)
    store.apply_all(spec.topic_messages(spec.topics_doc(ME, valid_items())))
    assert not store.errors() and store.snapshot().is_complete
    return store


def plan_of(store: DesiredStore) -> Any:
    return compute_plan(store.snapshot(), ActualState(), node=ME)


def report(store: DesiredStore) -> bytes | None:
    """The status the agent publishes with the store's errors (must encode and validate)."""
    out = Recorder()
    ActualReporter(out, T, ME, inspect=lambda _ref: {}).report_status(
        "online", errors=sorted(store.errors().values())
    )
    ((topic, payload),) = out.sent
    assert topic == T.status(ME)
    return payload


def check_one(store: DesiredStore, topic: str, payload: bytes) -> None:
    before, plan_before = store.snapshot(), plan_of(store)
    store.apply(topic, payload)
    errors = store.errors()
    assert all(len(e) <= MAX_ERROR_CHARS for e in errors.values())  # the status stays small
    report(store)
    if topic in errors:  # refused: nothing of it is planned, the last valid payload stays
        assert store.snapshot() == before, errors[topic]
        assert plan_of(store) == plan_before
        return
    assert store.snapshot() is not None
    parsed = T.parse(topic)
    assert parsed.node == ME and parsed.plane == "desired"
    if payload:  # accepted: it is what the schema allows
        doc = load_json(payload)
        check_payload(parsed.schema_name, doc)
    plan = plan_of(store)  # never raises on what was accepted
    desired = store.snapshot()
    known = {*desired.containers, *desired.networks, *desired.processes}
    for action in plan.actions:
        assert action.spec is None or action.target in known, action


@fuzz()
@given(seed=seeds, count=st.integers(1, 4))
def test_hostile_desired_messages_are_refused_and_change_nothing(seed: int, count: int) -> None:
    rng = random.Random(seed)
    store = seeded_store()
    for _ in range(count):
        topic, payload = hostile_message(rng, ME)
        check_one(store, topic, payload)


@fuzz()
@given(
    topic=st.one_of(
        st.sampled_from([T.manifest(ME), T.desired_item(ME, "containers", "e.web.0"), T.status(ME)]),
        st.text(max_size=80).map(lambda s: f"phrame/desired/nodes/{ME}/" + s),
        st.text(max_size=80),
    ),
    payload=st.one_of(
        st.binary(max_size=256), st.text(max_size=64).map(lambda s: s.encode("utf-8", "surrogatepass"))
    ),
)
def test_any_bytes_on_any_topic(topic: str, payload: bytes) -> None:
    check_one(seeded_store(), topic, payload)


def observed(item_id: str, node: str, cid: str) -> ObservedContainer:
    env, service, replica = item_id.split(".")
    labels = {MANAGED: "true", NODE: node, ENVIRONMENT: env, SERVICE: service, REPLICA: replica}
    return ObservedContainer(id=cid, name=f"{item_id}-{cid}", state="running", labels=labels)


class Docker:
    def __init__(self) -> None:
        self.containers = [
            observed("e.web.0", ME, "mine"),
            observed("e.web.0", "node-other", "theirs"),
            observed("e.agent.0", ME, "own"),
        ]
        self.restarted: list[str] = []

    def list_containers(self) -> list[ObservedContainer]:
        return list(self.containers)

    def restart(self, name: str) -> None:
        self.restarted.append(name)


@fuzz()
@given(
    seed=seeds,
    topic=st.one_of(
        st.sampled_from(["e.web.0", "e.agent.0", "e.gone.0", "E.web.0", "e.web", "e.web.0/x"]).map(
            lambda i: f"phrame/cmd/nodes/{ME}/containers/{i}/restart"
        ),
        st.just("phrame/cmd/nodes/node-other/containers/e.web.0/restart"),
        st.text(max_size=60).map(lambda s: f"phrame/cmd/nodes/{ME}/containers/{s}/restart"),
    ),
    raw=st.one_of(st.none(), st.binary(max_size=64)),
)
def test_hostile_restart_commands_restart_only_this_nodes_containers(
    seed: int, topic: str, raw: bytes | None
) -> None:
    rng = random.Random(seed)
    docker = Docker()
    commands = RestartCommands(T, ME, docker, own_container_id="own")
    payload = raw if raw is not None else encode(mutate({"reason": "fuzz"}, rng), rng)
    accepted = commands.accept(Message(topic, payload, False))
    errors = commands.run()
    assert errors == []
    assert set(docker.restarted) <= {"mine"}, docker.restarted
    if docker.restarted:
        assert accepted and topic == f"phrame/cmd/nodes/{ME}/containers/e.web.0/restart"
