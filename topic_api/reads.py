"""The read routes: nodes, environments, topics, kv values. Each answers from the state the
watcher keeps (the mirrors' snapshots), never from the broker, except kv values under the
writable prefixes, which the API's one connection holds. Wired by :mod:`topic_api.app`."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from topic_api import models
from topic_api.context import ApiContext
from topic_api.environments import environment_view
from topic_api.nodes import Receipts, disconnect_grace, items_of, node_summary
from topic_api.openapi.operations import Json, Query, operation
from topic_api.planes import EnvTopics
from topic_api.responses import ApiJSON, error
from topic_api.topic_filter import FilterError, select
from topic_api.writes import is_under


def _summary(ctx: ApiContext, name: str, now: float) -> tuple[models.NodeSummary, list[dict[str, Any]]]:
    """The node's summary and its items (the summary counts their drift)."""
    state = ctx.state
    desired = state.planes["desired"].index.nodes.get(name)
    actual = state.planes["actual"].index.nodes.get(name)
    receipts = Receipts(verdict=state.view.verdict(name, now), history=state.history.of(name, now))
    items = items_of(desired, actual, now=now, recent_exit_s=ctx.settings.recent_exit_s)
    envs = state.planes["desired"].index.environments
    grace = disconnect_grace(items, {e: envs[e].placement for e in envs})
    view = node_summary(
        name,
        desired,
        actual,
        receipts,
        now=now,
        timeout_s=ctx.settings.node_timeout_s,
        items=items,
        disconnect_grace_s=grace,
    )
    return view, items


def routes(ctx: ApiContext) -> dict[str, Any]:
    @operation("every node: health, host stats, drift", Json("nodes", models.Nodes))
    async def nodes(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        now = time.time()
        views = [_summary(ctx, n, now)[0] for n in ctx.state.node_names()]
        return ApiJSON({"generated_at": ctx.state.generated_at(), "nodes": views})

    @operation(
        "one node with desired against actual per item", Json("node", models.NodeDetail), errors=(404,)
    )
    async def node(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        name = request.path_params["node"]
        if name not in ctx.state.node_names():
            return error(404, f"node {name!r} is in neither the desired nor the actual snapshot")
        view, items = _summary(ctx, name, time.time())
        return ApiJSON({**view, "items": items})

    @operation("every environment: sync, placement, deploys", Json("environments", models.Environments))
    async def environments(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        envs = ctx.state.planes["desired"].index.environments
        return ApiJSON({"environments": [environment_view(n, envs[n]) for n in sorted(envs)]})

    @operation(
        "one environment with its declared services",
        Json("environment", models.EnvironmentDetail),
        errors=(404,),
    )
    async def environment(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        name = request.path_params["env"]
        env: EnvTopics | None = ctx.state.planes["desired"].index.environments.get(name)
        if env is None:
            return error(404, f"environment {name!r} is not in the desired snapshot")
        return ApiJSON(environment_view(name, env, with_services=True))

    @operation(
        "retained topics of both planes matching an MQTT filter",
        Json("topics", models.Topics),
        errors=(400,),
        query=(Query("filter", "MQTT topic filter (+ one level, # the rest); default #", default="#"),),
    )
    async def topics(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        text = request.query_params.get("filter", "#")
        every = ctx.state.all_topics()
        try:
            chosen = select(text, every)
        except FilterError as e:
            return error(400, f"query parameter filter: {e}")
        return ApiJSON(models.Topics(filter=text, count=len(chosen), topics={t: every[t] for t in chosen}))

    @operation("one retained value", Json("value", models.KvValue), errors=(404,))
    async def kv_get(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        topic = request.path_params["topic"]
        for plane in ("desired", "actual"):
            topics = ctx.state.planes[plane].topics
            if topic in topics:
                return ApiJSON(models.KvValue(topic=topic, payload=topics[topic], source=f"mirror:{plane}"))
        if ctx.broker is not None and is_under(topic, ctx.settings.allowed_prefixes):
            raw = ctx.broker.value(topic)
            if raw is not None:
                return ApiJSON(models.KvValue(topic=topic, payload=ctx.payload_of(raw), source="broker"))
        return error(404, f"no retained value at {topic!r} (mirrored planes and writable prefixes)")

    return {
        "nodes": nodes,
        "node": node,
        "environments": environments,
        "environment": environment,
        "topics": topics,
        "kv_get": kv_get,
    }
