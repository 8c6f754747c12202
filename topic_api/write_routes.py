"""The write routes: ``PUT``/``DELETE /api/kv/{topic}`` and the restart command.

Each checks the token and its scope first (``admin`` for kv, ``deploy`` for a restart), then
the body (size and time limits of ``http_body``), then the rules of :mod:`topic_api.writes`,
and only then publishes over the API's one broker connection, in a worker thread (the PUBACK
wait never blocks the event loop). Wired by :mod:`topic_api.app`. A refused write publishes
nothing. Every write a known holder asks for is audited with its result
(``ApiContext.record``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from phrame.settings.http_body import BodyTimeout, BodyTooLarge, ClientGone, read_body
from topic_api import models
from topic_api.broker import BrokerUnavailable
from topic_api.context import ApiContext
from topic_api.errors import WriteRefused
from topic_api.openapi.operations import Body, Json, operation
from topic_api.responses import ApiJSON, error
from topic_api.writes import kv_delete, kv_payload, restart_command


async def _publish(ctx: ApiContext, topic: str, payload: bytes | None, *, retain: bool) -> Response | None:
    """Publish; a 503 answer when the broker is away, else None."""
    broker = ctx.broker
    if broker is None:
        ctx.metrics.writes.labels("unavailable").inc()
        return error(503, "this API has no broker connection; writes are unavailable")
    try:
        await anyio.to_thread.run_sync(lambda: broker.publish(topic, payload, retain=retain))
    except BrokerUnavailable as e:
        ctx.metrics.writes.labels("unavailable").inc()
        return error(503, f"broker unavailable: {e}", headers={"Retry-After": "5"})
    ctx.metrics.writes.labels("published").inc()
    return None


def _refused(ctx: ApiContext, e: WriteRefused) -> Response:
    ctx.metrics.writes.labels("refused").inc()
    return error(e.status, str(e))


def routes(ctx: ApiContext) -> dict[str, Any]:
    settings = ctx.settings

    @operation(
        "retain a JSON value",
        Json("published", models.KvWritten),
        access="write",
        errors=(400, 403, 408, 413, 422),
        body=Body(
            "the JSON value to retain (validated against the topic's schema, if any)",
            {"application/json": {"schema": {}}},
        ),
    )
    async def kv_put(request: Request) -> Response:
        topic = request.path_params["topic"]
        return await ctx.audited(request, "admin", "kv-put", topic, lambda: _kv_put(request, topic))

    async def _kv_put(request: Request, topic: str) -> Response:
        limit, timeout_s = settings.max_body_bytes, settings.http.body_timeout_s
        try:
            raw = await read_body(request, limit=limit, timeout_s=timeout_s)
            payload = kv_payload(topic, raw, prefixes=settings.allowed_prefixes, prefix=settings.topic_prefix)
        except BodyTooLarge:
            return error(413, f"payload for {topic!r} is over {limit} bytes")
        except BodyTimeout:
            return error(408, f"body not complete within {timeout_s:g} s", headers={"Connection": "close"})
        except ClientGone:
            return error(400, "client hung up")
        except WriteRefused as e:
            return _refused(ctx, e)
        failed = await _publish(ctx, topic, payload, retain=True)
        return failed or ApiJSON(models.KvWritten(topic=topic, retained=True, bytes=len(payload)))

    @operation("clear a retained value", Json("cleared", models.KvDeleted), access="write", errors=(400, 403))
    async def kv_del(request: Request) -> Response:
        topic = request.path_params["topic"]
        return await ctx.audited(request, "admin", "kv-delete", topic, lambda: _kv_del(topic))

    async def _kv_del(topic: str) -> Response:
        try:
            kv_delete(topic, prefixes=settings.allowed_prefixes)
        except WriteRefused as e:
            return _refused(ctx, e)
        failed = await _publish(ctx, topic, None, retain=True)
        return failed or ApiJSON(models.KvDeleted(topic=topic, deleted=True))

    @operation(
        "ask the node's agent to restart a container (not retained)",
        Json("command published", models.Restarted),
        access="write",
        status=202,
        errors=(400, 404),
    )
    async def restart(request: Request) -> Response:
        node, item_id = request.path_params["node"], request.path_params["id"]
        target = f"{node}/{item_id}"
        return await ctx.audited(request, "deploy", "restart", target, lambda: _restart(node, item_id))

    async def _restart(node: str, item_id: str) -> Response:
        if node not in ctx.state.node_names():
            return error(404, f"node {node!r} is in neither the desired nor the actual snapshot")
        try:
            command_id = uuid.uuid4().hex
            topic, payload = restart_command(
                settings.topic_prefix, node, item_id, now=time.time(), by="topic-api", command_id=command_id
            )
        except WriteRefused as e:
            return _refused(ctx, e)
        failed = await _publish(ctx, topic, payload, retain=False)
        return failed or ApiJSON(models.Restarted(topic=topic, id=command_id), status_code=202)

    return {"kv_put": kv_put, "kv_delete": kv_del, "restart": restart}
