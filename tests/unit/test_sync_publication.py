"""config_sync.publication.plane and config_sync.publication.order: what is published, cleared and in which
order, from the sample repo's rendering (the very function the publisher calls)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from config_sync.models import Claim
from config_sync.publication.order import Decision, publication_order
from config_sync.publication.plane import desired_diff, desired_state, sync_payload
from phrame.config_repo import load_directory, render, validate
from schemas import Topics, canonical_json, check_payload

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "phrame-config"
T = Topics()
SHA1, SHA2 = "1" * 40, "2" * 40


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    repo, problems = load_directory(SAMPLE)
    assert validate(repo, problems) == []
    return render(repo, commit=SHA1).topics(T)


def published_of(desired: dict[str, dict[str, Any]]) -> dict[str, bytes]:
    return {t: canonical_json(p) for t, p in desired.items()}


def test_first_sync_publishes_exactly_the_rendering_with_manifests_last(rendered: dict[str, Any]) -> None:
    desired = desired_state(rendered, {}, topics=T, commit=SHA1)
    assert desired == rendered
    plan = desired_diff(desired, {}, T)
    messages = plan.publication_messages()
    assert dict(messages) == published_of(rendered)
    kinds = [T.parse(t).kind for t, _ in messages]
    first_manifest = kinds.index("manifest")
    assert all(k == "manifest" for k in kinds[first_manifest:])
    assert plan.clears == ()


def test_second_identical_sync_publishes_nothing(rendered: dict[str, Any]) -> None:
    published = published_of(rendered)
    desired = desired_state(rendered, published, topics=T, commit=SHA2)
    assert desired_diff(desired, published, T).is_empty


def test_changed_item_keeps_others_byte_for_byte_and_bumps_one_manifest(rendered: dict[str, Any]) -> None:
    published = published_of(rendered)
    new = render_changed(rendered, SHA2)
    topic = next(t for t in new if "/containers/" in t)
    new[topic]["image"] = "registry.example.test/changed:2"
    new[topic]["digest"] = "sha256:" + "f" * 64
    plan = desired_diff(desired_state(new, published, topics=T, commit=SHA2), published, T)
    assert [t for t, _ in plan.items] == [topic]
    node = T.parse(topic).node
    assert [t for t, _ in plan.manifests] == [T.manifest(str(node))]
    manifest = check_manifest(plan.manifests[0][1])
    assert manifest["generation"] == 2 and manifest["commit"] == SHA2


def render_changed(rendered: dict[str, Any], sha: str) -> dict[str, dict[str, Any]]:
    new = copy.deepcopy(rendered)
    for payload in new.values():
        if "commit" in payload:
            payload["commit"] = sha
    return new


def check_manifest(raw: bytes) -> dict[str, Any]:
    import json

    doc: dict[str, Any] = json.loads(raw)
    check_payload("desired-manifest", doc)
    return doc


def test_removed_service_clears_its_topics_and_updates_manifests(rendered: dict[str, Any]) -> None:
    published = published_of(rendered)
    victim = next(T.parse(t).service for t in rendered if "/containers/" in t)
    new = {t: p for t, p in rendered.items() if T.parse(t).service != victim}
    plan = desired_diff(desired_state(new, published, topics=T, commit=SHA2), published, T)
    assert plan.items == ()
    assert plan.clears and all(T.parse(t).service == victim for t in plan.clears)
    assert T.env_service("studio-a", str(victim)) in plan.clears
    nodes = {T.parse(t).node for t in plan.clears if T.parse(t).node}
    assert {T.parse(t).node for t, _ in plan.manifests} == nodes
    assert plan.publication_messages()[-1][0].endswith("/manifest")


def test_scope_keeps_other_environments_items(rendered: dict[str, Any]) -> None:
    published = published_of(rendered)
    desired = desired_state({}, published, topics=T, commit=SHA2, environments={"other-env"})
    assert desired_diff(desired, published, T).is_empty


def test_unowned_topics_are_never_cleared(rendered: dict[str, Any]) -> None:
    published = {**published_of(rendered), T.env_sync("studio-a"): b"{}", T.env_placement("studio-a"): b"{}"}
    plan = desired_diff(desired_state(rendered, published, topics=T, commit=SHA1), published, T)
    assert plan.is_empty


def test_sync_payload_keeps_last_applied_across_an_invalid_commit() -> None:
    ok = sync_payload(environment="studio-a", ref="main", commit=SHA1, errors=[], previous=None, now=10.0)
    check_payload("desired-sync", ok)
    assert ok["last_applied"]["commit"] == SHA1
    same = sync_payload(environment="studio-a", ref="main", commit=SHA1, errors=[], previous=ok, now=20.0)
    assert same is not ok and same == ok  # unchanged: nothing to publish
    errors = [{"file": "a.yaml", "line": 1, "column": 1, "rule": "schema", "message": "bad"}]
    bad = sync_payload(environment="studio-a", ref="main", commit=SHA2, errors=errors, previous=ok, now=30.0)
    check_payload("desired-sync", bad)
    assert bad["ok"] is False and bad["last_attempted"]["commit"] == SHA2
    assert bad["last_applied"] == ok["last_applied"]


def test_the_fleet_decides_which_nodes_get_a_manifest(rendered: dict[str, Any]) -> None:
    """Every ref builds manifests for the default ref's inventory: a ref whose own nodes/
    lacks a node neither clears that node's manifest nor invents one for a node it alone has."""
    nodes = {str(T.parse(t).node) for t in rendered if T.parse(t).kind == "manifest"}
    fleet = {*nodes, "edge-09"} - {"edge-03"}
    published = published_of(desired_state(rendered, {}, topics=T, commit=SHA1, nodes=fleet))
    assert T.manifest("edge-09") in published
    assert json_of(published[T.manifest("edge-09")])["items"] == {}
    # edge-03 holds items (the mixer), so it keeps a manifest though outside the fleet
    assert T.manifest("edge-03") in published
    again = desired_state(rendered, published, topics=T, commit=SHA2, nodes=fleet)
    assert desired_diff(again, published, T).is_empty


def test_a_manifest_published_again_continues_above_the_highest_generation(
    rendered: dict[str, Any],
) -> None:
    """A node's manifest cleared or lost (broker without persistence) comes back above
    every generation published before, so the deploy watch can compare generations."""
    published = published_of(rendered)
    lost = {t: p for t, p in published.items() if t != T.manifest("edge-01")}
    desired = desired_state(rendered, lost, topics=T, commit=SHA2, floor={"edge-01": 7, "core-01": 9})
    assert desired[T.manifest("edge-01")]["generation"] == 8
    # unchanged manifests are carried forward byte for byte, whatever the floor
    assert canonical_json(desired[T.manifest("core-01")]) == published[T.manifest("core-01")]


def json_of(raw: bytes) -> dict[str, Any]:
    doc = json.loads(raw)
    assert isinstance(doc, dict)
    return doc


def sync_of(env: str, ref: str, commit: str = SHA1) -> bytes:
    doc = sync_payload(environment=env, ref=ref, commit=commit, errors=[], previous=None, now=1.0)
    return canonical_json(doc)


def order_for(
    rendered: dict[str, Any],
    published: dict[str, bytes],
    claim: Claim,
    errors: list[dict[str, Any]] | None = None,
) -> Decision:
    return publication_order(
        ref="main",
        commit=SHA2,
        claim=claim,
        rendered=None if errors else rendered,
        errors=errors or [],
        published=published,
        topics=T,
        now=2.0,
    )


STUDIO_A = Claim(frozenset({"studio-a"}))


def test_publication_order_is_items_clears_manifests_then_the_sync_topic(rendered: dict[str, Any]) -> None:
    """The order the publisher sends, decided here: a changed item, a removed service."""
    published = {**published_of(rendered), T.env_sync("studio-a"): sync_of("studio-a", "main")}
    new = render_changed(rendered, SHA2)
    victim = next(T.parse(t).service for t in rendered if "/containers/" in t)
    new = {t: p for t, p in new.items() if T.parse(t).service != victim}
    changed = next(t for t in new if "/containers/" in t)
    new[changed] = {**new[changed], "image": "x:2", "digest": "sha256:" + "e" * 64}
    order = order_for(new, published, STUDIO_A).order
    messages = order.publication_messages()
    phases = [
        "sync"
        if T.parse(t).kind == "sync"
        else "manifest"
        if t.endswith("/manifest")
        else "clear"
        if p is None
        else "item"
        for t, p in messages
    ]
    assert phases == sorted(phases, key=["item", "clear", "manifest", "sync"].index)
    assert {"item", "clear", "manifest", "sync"} == set(phases) and phases[-1] == "sync"
    first, second = order.steps()
    assert first == messages[: len(first)] and not any(t.endswith("/manifest") for t, _ in first)
    assert second[0][0].endswith("/manifest") and second[-1][0] == T.env_sync("studio-a")


def test_an_environment_the_ref_no_longer_publishes_is_cleared_with_its_sync_topic_last(
    rendered: dict[str, Any],
) -> None:
    gone_item = T.desired_item("edge-01", "containers", "old-env.cache.0")
    published = {
        **published_of(rendered),
        gone_item: canonical_json({"digest": "sha256:" + "a" * 64}),
        T.env_sync("old-env"): sync_of("old-env", "main"),
    }
    decision = order_for(rendered, published, STUDIO_A)
    assert decision.gone == ("old-env",)
    assert gone_item in decision.order.clears
    assert decision.order.publication_messages()[-1] == (T.env_sync("old-env"), None)
    # handed over to another ref: that ref's to clear, never cleared on the way
    handed = order_for(rendered, published, Claim(frozenset({"studio-a"}), frozenset({"old-env"})))
    assert handed.gone == () and gone_item not in handed.order.clears


def test_the_default_ref_clears_an_environment_no_ref_declares_any_more(rendered: dict[str, Any]) -> None:
    published = {**published_of(rendered), T.env_sync("retired"): sync_of("retired", "release/x")}
    assert order_for(rendered, published, STUDIO_A).gone == ()  # not main's to clear
    default = Claim(frozenset({"studio-a"}), declared=frozenset({"studio-a"}))
    assert order_for(rendered, published, default).gone == ("retired",)


def test_an_invalid_commit_orders_only_its_sync_topics(rendered: dict[str, Any]) -> None:
    published = published_of(rendered)
    errors = [{"file": "a.yaml", "line": 1, "column": 1, "rule": "schema", "message": "bad"}]
    order = order_for(rendered, published, STUDIO_A, errors).order
    assert order.items == () and order.clears == () and order.manifests == ()
    [(topic, raw)] = order.publication_messages()
    assert topic == T.env_sync("studio-a") and raw is not None and json_of(raw)["ok"] is False


def test_a_preview_and_the_default_ref_never_clear_each_others_items(rendered: dict[str, Any]) -> None:
    """The invariant previews rely on: no ``sync`` topic for a preview (``reports_sync``
    False), so the default ref never counts it as an environment to clear; and a preview's
    publication, scoped to its own environment, keeps the environment's items."""
    own = {**published_of(rendered), T.env_sync("studio-a"): sync_of("studio-a", "main")}
    item = T.desired_item("core-01", "containers", "studio-a-mr-7.mixer.0")
    spec = {
        "kind": "container",
        "name": "studio-a-mr-7.mixer.0",
        "image": "x:1",
        "digest": "sha256:" + "c" * 64,
    }
    preview = Claim(frozenset({"studio-a-mr-7"}), reports_sync=False)
    made = publication_order(
        ref="merge-requests/7", commit=SHA2, claim=preview, rendered={item: spec}, errors=[],
        published=own, topics=T, now=2.0,
    )  # fmt: skip
    assert made.order.clears == () and not any(T.parse(t).kind == "sync" for t, _ in made.order.sync)
    assert [t for t, _ in made.order.items] == [item]
    with_preview = {**own, **dict(made.order.items), **dict(made.order.manifests)}
    manifest = json_of(with_preview[T.manifest("core-01")])
    assert "containers/studio-a-mr-7.mixer.0" in manifest["items"]
    assert all(manifest["items"][k] == v for k, v in json_of(own[T.manifest("core-01")])["items"].items())
    # the default ref, declaring studio-a only, keeps the preview and its manifest entry
    default = Claim(frozenset({"studio-a"}), declared=frozenset({"studio-a"}))
    kept = order_for(render_changed(rendered, SHA2), with_preview, default)
    assert kept.gone == () and item not in kept.order.clears
    assert all("studio-a-mr-7" not in t for t, _ in kept.order.items)
    # stopping the preview clears its item alone
    stopped = publication_order(
        ref="merge-requests/7", commit=SHA2, claim=preview, rendered={}, errors=[],
        published=with_preview, topics=T, now=3.0,
    )  # fmt: skip
    assert stopped.order.clears == (item,) and stopped.order.sync == ()
    assert [t for t, _ in stopped.order.manifests] == [T.manifest("core-01")]
