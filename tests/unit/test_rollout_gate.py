"""The rollout gate, purely: held-back replicas keep the very published object, a rollback
re-renders the earlier spec, the rollout topic goes out only when it changes and is
cleared when the policy goes, and services without ``update:`` pass through untouched."""

from __future__ import annotations

import json
from typing import Any

from config_sync.rollouts.gate import gate_rollouts
from config_sync.rollouts.models import Observed
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics, canonical_json, digest

T = Topics()
NODES = ["n1", "n2", "n1"]


def _item(i: int, image: str, commit: str, service: str = "web") -> dict[str, Any]:
    spec = {"kind": "container", "name": f"lab.{service}.{i}", "image": image}
    return {**spec, "digest": digest(spec), "commit": commit}


def _plane(image: str, commit: str, service: str = "web") -> dict[str, dict[str, Any]]:
    return {
        T.desired_item(NODES[i], "containers", f"lab.{service}.{i}"): _item(i, image, commit, service)
        for i in range(3)
    }


def _gate(rendered: dict[str, dict[str, Any]], published: dict[str, bytes], **kw: Any) -> Any:
    previous = {t: json.loads(raw) for t, raw in published.items() if "/nodes/" in t}
    defaults: dict[str, Any] = {
        "topics": T,
        "commit": "c2",
        "environments": {"lab"},
        "policies": {("lab", "web"): UpdatePolicy(max_parallel=1, min_healthy_s=0, on_failure="rollback")},
        "observed": lambda node, item: None,
        "now": 100.0,
        "spec_at": lambda sha: None,
    }
    return gate_rollouts(rendered, published, previous, **{**defaults, **kw}), previous


def _bytes(plane: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    return {t: canonical_json(p) for t, p in plane.items()}


def test_only_the_first_wave_gets_the_new_item() -> None:
    old, new = _plane("web:1", "c1"), _plane("web:2", "c2")
    published = _bytes(old)
    gated, previous = _gate(new, published)
    topics = sorted(new, key=lambda t: t.rsplit(".", 1)[-1])
    assert gated.rendered[topics[0]] is new[topics[0]]
    for t in topics[1:]:
        assert gated.rendered[t] is previous[t]  # the decoded object itself: nothing republished
    ((topic, raw),) = gated.messages
    assert topic == T.env_rollout("lab", "web") and raw is not None
    doc = json.loads(raw)
    assert (doc["state"], doc["wave"], doc["waves"], doc["total"]) == ("progressing", 1, 3, 3)
    assert gated.held == {"lab": [{"service": "web", "state": "progressing", "reasons": []}]}
    # the same pass again, with the state published: no new message
    published[topic] = raw
    published[topics[0]] = canonical_json(new[topics[0]])
    again, _ = _gate(new, published, now=101.0)
    assert again.messages == []


def test_rollback_takes_the_earlier_spec_from_its_commit() -> None:
    old, new = _plane("web:1", "c1"), _plane("web:2", "c2")
    published = _bytes(old)
    first, _ = _gate(new, published)
    ((topic, raw),) = first.messages
    t0 = T.desired_item("n1", "containers", "lab.web.0")
    published[t0], published[topic] = canonical_json(new[t0]), raw
    crashed = lambda node, item: Observed(new[t0]["digest"], "restarting", None, 5, None)  # noqa: E731
    asked: list[str] = []

    def spec_at(sha: str) -> dict[str, dict[str, Any]]:
        asked.append(sha)
        return old

    back, _ = _gate(new, published, observed=crashed, spec_at=spec_at, now=101.0)
    assert asked == ["c1"]
    assert canonical_json(back.rendered[t0]) == canonical_json(old[t0])  # byte for byte what ran
    doc = json.loads(back.messages[0][1])
    assert doc["state"] == "rolled-back" and doc["reasons"][0]["replica"] == "lab.web.0"


def test_services_without_policy_pass_and_their_stale_rollout_is_cleared() -> None:
    old, new = _plane("api:1", "c1", "api"), _plane("api:2", "c2", "api")
    published = _bytes(old)
    published[T.env_rollout("lab", "api")] = b'{"state": "complete"}'
    gated, _ = _gate(new, published)
    assert all(gated.rendered[t] is new[t] for t in new)
    assert gated.messages == [(T.env_rollout("lab", "api"), None)]
    other, _ = _gate(new, _bytes(old), environments={"prod"})  # not this ref's environment
    assert other.messages == [] and all(other.rendered[t] is new[t] for t in new)


def test_a_replica_placement_moves_keeps_the_spec_its_wave_has() -> None:
    old, new = _plane("web:1", "c1"), _plane("web:2", "c2")
    t2_old = T.desired_item("n1", "containers", "lab.web.2")
    t2_new = T.desired_item("n2", "containers", "lab.web.2")
    new[t2_new] = new.pop(t2_old)  # placement moved web.2 from n1 to n2 in the same commit
    gated, previous = _gate(new, _bytes(old))
    assert gated.rendered[t2_new] is previous[t2_old]  # the old spec, on its new node
    assert t2_old not in gated.rendered  # and gone from the old one
    doc = json.loads(gated.messages[0][1])
    assert doc["total"] == 3 and {r["replica"]: r["node"] for r in doc["replicas"]}["lab.web.2"] == "n2"


def test_a_promotion_counts_only_for_the_commit_it_named() -> None:
    old, new = _plane("web:1", "c1"), _plane("web:2", "c2")
    policy = {("lab", "web"): UpdatePolicy(max_parallel=1, canary=1, min_healthy_s=0)}
    first, _ = _gate(new, _bytes(old), policies=policy)
    published = {**_bytes({t: first.rendered[t] for t in new}), **dict(first.messages)}
    canary = sorted(new, key=lambda t: t.rsplit(".", 1)[-1])[0]
    target = new[canary]["digest"]

    def healthy(node: str, item: str) -> Observed | None:
        return Observed(target, "running", "healthy", 0, 50.0) if item == "lab.web.0" else None

    waits, _ = _gate(new, published, policies=policy, observed=healthy, now=101.0)
    assert waits.plans[("lab", "web")].state.state == "waiting-promotion"
    published = {**published, **dict(waits.messages)}
    other, _ = _gate(
        new, published, policies=policy, observed=healthy, now=102.0, promote={("lab", "web"): "c9"}
    )
    assert other.plans[("lab", "web")].state.state == "waiting-promotion"  # another commit's promotion
    mine, _ = _gate(
        new, published, policies=policy, observed=healthy, now=102.0, promote={("lab", "web"): "c2"}
    )
    state = mine.plans[("lab", "web")].state
    assert state.promoted and state.wave == 2
