"""The rollout gate: between a rendering and its publication, hold back what a wave has not reached.

``DesiredPublisher.publish_commit`` calls :func:`gate_rollouts` (through the controller's
closure) with what the broker holds. For every service with an ``update:`` policy it asks
:func:`~config_sync.rollouts.waves.plan_rollout` which replicas are released: those get the
rendered item; the others keep the published item, the very object decoded from the broker,
so it goes out byte for byte unchanged (same digest, same manifest entry: its agent does
nothing); a rolled-back replica gets the spec it ran before, re-rendered from that spec's
commit (``spec_at``). It also returns the ``rollouts/<service>`` topics to publish or clear
and, per environment, the rollouts that keep its commit from being applied yet (the
``sync`` topic's ``rollouts``). The images an active rollout's held-back replicas will get
go out per node and environment on ``prefetch/<env>`` (their nodes pull them ahead of the
wave; the items themselves stay as published), cleared once no wave there waits.
Pure apart from the callables handed in; never touches a service without a policy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from config_sync.models import Message
from config_sync.publication.order import json_object
from config_sync.publication.plane import owned_topic
from config_sync.rollouts.models import Observed, ReplicaView, state_from_doc
from config_sync.rollouts.waves import RolloutPlan, Silent, never_silent, plan_rollout
from phrame.config_repo.update_policy import UpdatePolicy
from schemas import Topics, canonical_json

Key = tuple[str, str]  # (environment, service)
Rendered = Mapping[str, dict[str, Any]]
# node -> its status's ``prefetch`` (image -> {state, error}); None: it does not pull ahead
Prefetched = Callable[[str], Mapping[str, Any] | None]


def no_prefetch(_node: str) -> Mapping[str, Any] | None:
    """``prefetched`` for callers that know no node statuses: no node pulls ahead."""
    return None


@dataclass(frozen=True)
class Gated:
    rendered: dict[str, dict[str, Any]]
    messages: list[Message] = field(default_factory=list)  # rollout topics, after the manifests
    plans: dict[Key, RolloutPlan] = field(default_factory=dict)
    held: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # env -> rollouts not complete
    # env -> why its commit is held whole (config_sync.approvals: waiting-approval, frozen)
    holds: dict[str, dict[str, Any]] = field(default_factory=dict)


def _replica_index(item: str) -> int:
    tail = item.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def gate_rollouts(
    rendered: Rendered,
    published: Mapping[str, bytes],
    previous: Mapping[str, dict[str, Any]],
    *,
    topics: Topics,
    commit: str,
    environments: Collection[str],
    policies: Mapping[Key, UpdatePolicy],
    observed: Callable[[str, str], Observed | None],
    now: float,
    spec_at: Callable[[str], Rendered | None],
    promote: Mapping[Key, str] | None = None,
    remembered: Mapping[Key, dict[str, Any]] | None = None,
    silent: Silent = never_silent,
    prefetched: Prefetched = no_prefetch,
) -> Gated:
    """``rendered`` with every rollout's held-back replicas put back (see the module docstring)."""
    out = dict(rendered)
    remembered = remembered or {}
    promote = promote or {}
    by_service: dict[Key, dict[str, tuple[str, str]]] = defaultdict(dict)  # item -> (topic, node)
    for topic in rendered:
        parsed = owned_topic(topics, topic)
        if parsed is None or parsed.kind != "containers" or parsed.environment not in environments:
            continue
        env = parsed.environment
        assert env is not None and parsed.service and parsed.item_id and parsed.node
        by_service[(env, parsed.service)][parsed.item_id] = (topic, parsed.node)
    # what is published per item id, whichever node: a replica placement moves keeps its spec
    moved_from: dict[str, dict[str, Any]] = {}
    for topic, payload in previous.items():
        parsed = owned_topic(topics, topic)
        if parsed is not None and parsed.kind == "containers" and parsed.item_id:
            moved_from[parsed.item_id] = payload
    docs: dict[Key, str] = {}  # the rollout topics published for these environments
    for topic in published:
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        env = parsed.environment
        if parsed.kind == "rollout" and env is not None and env in environments and parsed.service:
            docs[(env, parsed.service)] = topic
    gated = Gated(out)
    prefetch: dict[tuple[str, str], set[str]] = defaultdict(set)  # (node, env) -> images
    for key in sorted(k for k in policies if k[0] in environments):
        env, service = key
        items = by_service.get(key, {})
        views = []
        for item in sorted(items, key=_replica_index):
            topic, node = items[item]
            old = previous.get(topic) or moved_from.get(item)
            old_digest = str(old["digest"]) if old and "digest" in old else None
            old_commit = str(old["commit"]) if old and "commit" in old else None
            image = rendered[topic].get("image")
            pull, error = _pull_of(prefetched(node), image)
            views.append(
                ReplicaView(
                    item,
                    node,
                    old_digest,
                    str(rendered[topic]["digest"]),
                    observed(node, item),
                    old_commit,
                    image=str(image) if image else None,
                    old_image=str(old["image"]) if old and old.get("image") else None,
                    pull=pull,
                    pull_error=error,
                )
            )
        topic_r = topics.env_rollout(env, service)
        # the retained state, else the one this config-sync last published (a broker that
        # restarted without its retained messages must not turn a rollout into all at once)
        state = state_from_doc(json_object(published.get(topic_r)) or remembered.get(key))
        if state is not None and (state.environment, state.service) != key:
            state = None
        plan = plan_rollout(
            policies[key],
            views,
            state,
            environment=env,
            service=service,
            commit=commit,
            now=now,
            # a promotion counts only for the commit it named (a newer rollout is not promoted)
            promote=state is not None and promote.get(key) == state.commit,
            silent=silent,
        )
        gated.plans[key] = plan
        if plan.state is not None and plan.state.is_active:
            # every wave still to come, on the nodes that pull ahead (an older agent would
            # refuse the topic): pulled by the time it is released
            for view in views:
                asked = view.needs_pull and view.pull is not None
                if asked and view.item in plan.state.target and view.item not in plan.released:
                    prefetch[(view.node, env)].add(str(view.image))
        if plan.state is not None:
            for item in plan.state.items:
                if item not in plan.released and item in items:
                    _hold(out, items[item][0], item, plan, previous, spec_at, moved_from.get(item))
            if plan.current and plan.state.state != "complete":  # the commit is not applied yet
                reasons = [r.to_doc() for r in plan.state.reasons]
                gated.held.setdefault(env, []).append(
                    {"service": service, "state": plan.state.state, "reasons": reasons}
                )
        message = _rollout_message(topic_r, plan, published.get(topic_r))
        if message is not None:
            gated.messages.append(message)
    for key, topic in sorted(docs.items()):
        if key not in policies and published.get(topic):  # no policy any more: no rollout
            gated.messages.append((topic, None))
    gated.messages.extend(_prefetch_messages(topics, published, prefetch, environments))
    return gated


def _pull_of(report: Mapping[str, Any] | None, image: Any) -> tuple[str | None, str | None]:
    """How far a node is pulling ``image`` ahead (see ``ReplicaView.pull``)."""
    if report is None or not image:
        return None, None
    entry = report.get(str(image))
    if not isinstance(entry, Mapping):
        return "asked", None
    error = entry.get("error")
    return str(entry.get("state") or "asked"), str(error) if error else None


def _prefetch_messages(
    topics: Topics,
    published: Mapping[str, bytes],
    wanted: Mapping[tuple[str, str], set[str]],
    environments: Collection[str],
) -> list[Message]:
    """The ``prefetch/<env>`` topics of ``environments`` to publish (changed) or clear (no
    wave there waits any more)."""
    out: list[Message] = []
    held: dict[str, bytes] = {}
    for topic, raw in published.items():
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        if parsed.kind == "prefetch" and parsed.environment in environments and raw:
            held[topic] = raw
    want = {
        topics.prefetch(node, env): canonical_json({"images": sorted(images)})
        for (node, env), images in wanted.items()
    }
    for topic in sorted(set(held) | set(want)):
        payload = want.get(topic)
        if payload != held.get(topic):
            out.append((topic, payload))
    return out


def _hold(
    out: dict[str, dict[str, Any]],
    topic: str,
    item: str,
    plan: RolloutPlan,
    previous: Mapping[str, dict[str, Any]],
    spec_at: Callable[[str], Rendered | None],
    elsewhere: dict[str, Any] | None = None,
) -> None:
    """Put back what ``item`` gets while its wave has not come (or after a rollback);
    ``elsewhere``: its item as published on another node (placement moved it: the spec
    its wave has goes with it)."""
    assert plan.state is not None
    before = plan.state.previous.get(item)
    if item in plan.restore:
        if before is None:  # it had no spec before this rollout: rolled back to nothing
            out.pop(topic, None)
            return
        current = previous.get(topic)
        if current is not None and current.get("digest") == before["digest"]:
            out[topic] = current  # already back: byte for byte
            return
        spec = _spec_of(spec_at(before["commit"]), item, before["digest"], topic)
        if spec is not None:
            out[topic] = spec
            return
    if topic in previous:
        out[topic] = previous[topic]  # the very object decoded: republishes nothing
    elif elsewhere is not None:
        out[topic] = elsewhere
    elif before is not None and (spec := _spec_of(spec_at(before["commit"]), item, before["digest"], topic)):
        out[topic] = spec  # the broker lost it: the spec it had, from the commit it came from
    else:
        out.pop(topic, None)


def _spec_of(rendering: Rendered | None, item: str, digest: str, topic: str) -> dict[str, Any] | None:
    """``item``'s payload with ``digest`` in an earlier commit's rendering (same topic first)."""
    if not rendering:
        return None
    same = rendering.get(topic)
    if same is not None and same.get("digest") == digest:
        return same
    suffix = f"/containers/{item}"
    for candidate, payload in rendering.items():
        if candidate.endswith(suffix) and payload.get("digest") == digest:
            return payload
    return None


def _rollout_message(topic: str, plan: RolloutPlan, raw: bytes | None) -> Message | None:
    if plan.state is None:
        return (topic, None) if raw else None
    doc = plan.state.to_doc()
    before = json_object(raw)
    if before is not None and {**before, "updated_at": 0} == {**doc, "updated_at": 0}:
        return None  # nothing new: an idle re-evaluation publishes nothing
    return (topic, canonical_json(doc))
