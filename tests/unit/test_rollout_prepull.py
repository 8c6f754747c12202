"""Pulling ahead of a wave, purely: a wave that changes an image waits until its replicas'
nodes report the image pulled; a failed pull fails the rollout before anything is stopped;
the gate asks the nodes for the images of every wave still to come (``prefetch/<env>``)."""

from __future__ import annotations

import json
from typing import Any

from config_sync.rollouts.gate import gate_rollouts
from config_sync.rollouts.models import Observed, ReplicaView, RolloutState, state_from_doc
from config_sync.rollouts.waves import RolloutPlan, plan_rollout
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics, canonical_json, check_payload, digest

OLD, NEW = "sha256:" + "0" * 64, "sha256:" + "1" * 64
POLICY = UpdatePolicy(max_parallel=1, min_healthy_s=0, healthy_deadline_s=60)
T = Topics()


def _views(
    pulls: list[str | None], *, image: str = "web:2", errors: list[str | None] | None = None
) -> list[ReplicaView]:
    errors = errors or [None] * len(pulls)
    return [
        ReplicaView(
            f"lab.web.{i}",
            f"n{i}",
            OLD,
            NEW,
            Observed(OLD, "running", None, 0, 0.0),
            old_commit="c0",
            image=image,
            old_image="web:1",
            pull=pull,
            pull_error=errors[i],
        )
        for i, pull in enumerate(pulls)
    ]


def _plan(views: list[ReplicaView], state: RolloutState | None, now: float = 100.0, **kw: Any) -> RolloutPlan:
    return plan_rollout(
        kw.pop("policy", POLICY), views, state, environment="lab", service="web", commit="c1", now=now
    )


def test_the_first_wave_waits_until_its_node_has_pulled_the_image() -> None:
    plan = _plan(_views(["pulling", "asked"]), None)
    assert plan.released == frozenset() and plan.state is not None
    assert plan.state.state == "progressing" and plan.state.wave == 0
    assert [(r.node, r.replica, r.reason) for r in plan.state.pulling] == [
        ("n0", "lab.web.0", "web:2 pulling")
    ]
    assert "wave 1 waits for 1 image pull(s) (n0 lab.web.0: web:2 pulling)" in plan.state.description()
    doc = plan.state.to_doc()
    check_payload("desired-rollout", doc)
    assert state_from_doc(doc) == plan.state
    pulled = _plan(_views(["pulled", "asked"]), plan.state, 101.0)
    assert pulled.released == {"lab.web.0"} and pulled.state is not None and not pulled.state.pulling
    assert pulled.state.wave == 1


def test_a_later_wave_waits_for_its_own_node_only() -> None:
    first = _plan(_views(["pulled", "pulling"]), None)
    assert first.released == {"lab.web.0"} and first.state is not None
    views = _views(["pulled", "pulling"])
    views[0] = ReplicaView(
        **{**views[0].__dict__, "old": NEW, "actual": Observed(NEW, "running", None, 0, 100.0)}
    )
    held = _plan(views, first.state, 102.0)
    assert held.released == {"lab.web.0"} and held.state is not None
    assert held.state.done == 1 and [r.node for r in held.state.pulling] == ["n1"]
    views[1] = ReplicaView(**{**views[1].__dict__, "pull": "pulled"})
    nxt = _plan(views, held.state, 103.0)
    assert nxt.released == {"lab.web.0", "lab.web.1"}


def test_a_failed_pull_pauses_before_anything_is_stopped_naming_node_and_image() -> None:
    plan = _plan(_views(["failed", "pulled"], errors=["manifest unknown", None]), None)
    assert plan.released == frozenset() and plan.restore == frozenset() and plan.state is not None
    assert plan.state.state == "paused"
    assert plan.state.description() == (
        "web: paused at wave 0/2: n0 lab.web.0: pull of web:2 failed: manifest unknown"
    )


def test_nodes_that_do_not_pull_ahead_and_unchanged_images_wait_for_nothing() -> None:
    old_agents = _plan(_views([None, None]), None)  # no ``prefetch`` in their status
    assert old_agents.released == {"lab.web.0"}
    same_image = _plan(_views(["asked", "asked"], image="web:1"), None)  # a new env var, say
    assert same_image.released == {"lab.web.0"}


# -- the gate: what it asks the nodes to pull


def _item(i: int, image: str, commit: str) -> dict[str, Any]:
    spec = {"kind": "container", "name": f"lab.web.{i}", "image": image}
    return {**spec, "digest": digest(spec), "commit": commit}


def _plane(image: str, commit: str) -> dict[str, dict[str, Any]]:
    return {T.desired_item(f"n{i}", "containers", f"lab.web.{i}"): _item(i, image, commit) for i in range(3)}


def _gate(rendered: dict[str, Any], published: dict[str, bytes], prefetched: Any) -> Any:
    previous = {t: json.loads(raw) for t, raw in published.items() if "/containers/" in t}
    return gate_rollouts(
        rendered,
        published,
        previous,
        topics=T,
        commit="c2",
        environments={"lab"},
        policies={("lab", "web"): POLICY},
        observed=lambda node, item: None,
        now=100.0,
        spec_at=lambda sha: None,
        prefetched=prefetched,
    )


def test_the_gate_asks_each_node_for_the_images_of_the_waves_to_come_and_clears_them() -> None:
    old, new = _plane("web:1", "c1"), _plane("web:2", "c2")
    published = {t: canonical_json(p) for t, p in old.items()}
    reports: dict[str, Any] = {"n0": {}, "n1": {"web:2": {"state": "pulling"}}, "n2": None}
    gated = _gate(new, published, reports.get)
    for topic in old:  # nothing released: every item stays as published
        assert gated.rendered[topic]["image"] == "web:1"
    sent = dict(gated.messages)
    # n2's agent does not pull ahead: it is not asked (it would refuse the topic)
    assert {t: json.loads(p) for t, p in sent.items() if "/prefetch/" in t} == {
        T.prefetch("n0", "lab"): {"images": ["web:2"]},
        T.prefetch("n1", "lab"): {"images": ["web:2"]},
    }
    for topic, payload in sent.items():
        if payload is not None:
            check_payload(T.parse(topic).schema_name, json.loads(payload))
        published[topic] = payload
    # n0 has it: its wave goes; n0's hint stays only for waves still to come (none): cleared
    reports["n0"] = {"web:2": {"state": "pulled", "seconds": 3.0}}
    again = dict(_gate(new, published, reports.get).messages)
    assert again[T.prefetch("n0", "lab")] is None
    assert T.prefetch("n1", "lab") not in again  # unchanged: nothing republished
