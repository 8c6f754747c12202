"""The write routes: ``PUT``/``DELETE /api/kv/{topic}`` and the restart and log commands.

Each checks the token and its scope first (``admin`` for kv, ``deploy`` for a restart,
``read`` for a log tail, even when reads need no token: a tail holds what no view shows), then
the body (size and time limits of ``http_body``), then the rules of :mod:`topic_api.writes`,
and only then publishes over the API's one broker connection, in a worker thread (the PUBACK
wait never blocks the event loop). Wired by :mod:`topic_api.app`. A refused write publishes
nothing. Every write a known holder asks for is audited with its result
(``ApiContext.record``). A log tail request waits for the agent's reply (registered with
the broker before the command goes out) for at most ``PHRAME_API_LOGS_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from phrame.settings.http_body import BodyTimeout, BodyTooLarge, ClientGone, read_body
from schemas import PayloadError, Topics, check_payload, load_json
from topic_api import models
from topic_api.broker import BrokerUnavailable
from topic_api.context import ApiContext
from topic_api.errors import WriteRefused
from topic_api.openapi.operations import Body, Json, Query, operation
from topic_api.responses import ApiJSON, error
from topic_api.writes import kv_delete, kv_payload, logs_command, restart_command

MAX_LOGS_PER_CLIENT = 4  # log tail requests one peer address may have waiting at once


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

    waiting: dict[str, int] = {}  # peer address -> its log tail requests waiting (event loop only)

    @operation(
        "ask the node's agent for a container's current log tail, and wait for it",
        Json("the tail, as the agent read it", models.LogTail),
        access="write",
        errors=(400, 404),
        answers={
            409: Json("the node is offline: no agent would answer", models.Error),
            429: Json(f"{MAX_LOGS_PER_CLIENT} log tail requests of this client wait already", models.Error),
            502: Json("the agent answered, but could not read the tail (its words in error)", models.Error),
            504: Json("no answer from the agent within PHRAME_API_LOGS_TIMEOUT_S", models.Error),
        },
        query=(Query("lines", "how many of the last lines, 1 to 200", default="50"),),
    )
    async def logs(request: Request) -> Response:
        node, item_id = request.path_params["node"], request.path_params["id"]
        target = f"{node}/{item_id}"
        return await ctx.audited(request, "read", "logs", target, lambda: _logs(request, node, item_id))

    def _is_known_container(node: str, item_id: str) -> bool:
        planes = ctx.state.planes
        return any(
            ("containers", item_id) in found.items
            for found in (planes[p].index.nodes.get(node) for p in ("desired", "actual"))
            if found is not None
        )

    async def _logs(request: Request, node: str, item_id: str) -> Response:
        raw = request.query_params.get("lines", "50")
        if not raw.isdigit():
            return error(400, f"lines={raw!r}: a whole number from 1 to 200")
        if node not in ctx.state.node_names():
            return error(404, f"node {node!r} is in neither the desired nor the actual snapshot")
        if not _is_known_container(node, item_id):
            return error(
                404, f"node {node!r} has no container {item_id!r} in the desired or the actual snapshot"
            )
        verdict = ctx.state.view.verdict(node)
        if verdict.state == "offline":
            return error(409, f"node {node!r} is offline ({verdict.reason}): its agent cannot answer")
        try:
            command_id = uuid.uuid4().hex
            topic, payload = logs_command(
                settings.topic_prefix, node, item_id, lines=int(raw), now=time.time(), by="topic-api",
                command_id=command_id,
            )  # fmt: skip
        except WriteRefused as e:
            return _refused(ctx, e)
        client = request.client.host if request.client else "?"
        if waiting.get(client, 0) >= MAX_LOGS_PER_CLIENT:
            return error(429, f"{MAX_LOGS_PER_CLIENT} log tail requests of {client} wait already; try again")
        return await _ask(client, node, topic, payload, Topics(settings.topic_prefix).reply(node, command_id))

    async def _ask(client: str, node: str, topic: str, payload: bytes, reply_topic: str) -> Response:
        broker = ctx.broker
        if broker is None:
            return error(503, "this API has no broker connection; log tails are unavailable")
        loop, arrived, box = asyncio.get_running_loop(), anyio.Event(), []

        def deliver(raw: bytes) -> None:  # on the MQTT thread
            def keep() -> None:
                box.append(raw)
                arrived.set()

            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(keep)

        try:
            forget = broker.expect_reply(reply_topic, deliver)  # before the command goes out
        except BrokerUnavailable as e:
            return error(503, f"broker unavailable: {e}", headers={"Retry-After": "5"})
        waiting[client] = waiting.get(client, 0) + 1
        timeout_s = settings.logs_timeout_s
        try:
            failed = await _publish(ctx, topic, payload, retain=False)
            if failed is not None:
                return failed
            with anyio.move_on_after(timeout_s):
                await arrived.wait()
        finally:
            forget()
            waiting[client] -= 1
            if not waiting[client]:
                del waiting[client]
        if not box:
            return error(
                504,
                f"no answer from the agent of node {node!r} within {timeout_s:g} s "
                "(PHRAME_API_LOGS_TIMEOUT_S); an agent older than log commands never answers",
            )
        return _tail_answer(node, box[0])

    def _tail_answer(node: str, raw: bytes) -> Response:
        try:
            doc = load_json(raw)
            check_payload("actual-reply", doc)
        except (ValueError, PayloadError) as e:
            return error(502, f"the agent of node {node!r} sent an invalid reply: {e}")
        if doc.get("error"):
            return error(502, f"the agent of node {node!r} answered: {doc['error']}")
        return ApiJSON(
            models.LogTail(
                node=node,
                item=doc["item"],
                id=doc["id"],
                at=doc["at"],
                lines=doc["lines"],
                truncated=doc["truncated"],
            )
        )

    return {"kv_put": kv_put, "kv_delete": kv_del, "restart": restart, "logs": logs}
