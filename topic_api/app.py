"""The HTTP face of the topic API (Starlette): routes, event streams, the watcher's lifespan.

``phrame topic-api`` builds it with :func:`create_app` and serves it through
``phrame.settings.http_serving``; tests build one over a folder of snapshot files. Bad
input is a 4xx with ``{"error": ...}``, never a 5xx. The broker connection is optional:
without one, reads work and writes answer 503. It never subscribes per browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route

from phrame.auth import AuditLog, TokensFileError, TokenStore
from schemas import Topics
from topic_api import compose_routes, docs, forwarding, models, reads, write_routes
from topic_api.broker import Broker
from topic_api.context import ApiContext
from topic_api.errors import SettingsError
from topic_api.events import EventHub, event_stream
from topic_api.guard import BrowserGuard
from topic_api.imports.targets import import_target
from topic_api.metrics import CONTENT_TYPE, ApiMetrics
from topic_api.openapi.document import document
from topic_api.openapi.operations import TEXT, Body, Json, Query, operation
from topic_api.responses import ApiJSON, error
from topic_api.settings import ApiSettings
from topic_api.state import ApiState
from topic_api.watcher import SnapshotWatcher

log = logging.getLogger(__name__)


def create_app(
    settings: ApiSettings,
    *,
    broker: Broker | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Starlette:
    """The app; ``broker`` (started and stopped by the lifespan) publishes writes.

    ``should_stop`` (the server's ``should_exit``) is polled by the watcher: when it turns
    true the event streams end, so the server's graceful shutdown does not wait on them."""
    state = ApiState(settings.topic_prefix, history_s=settings.history_s, timeout_s=settings.node_timeout_s)
    hub = EventHub(settings.max_streams, settings.max_streams_per_client)
    metrics = ApiMetrics(streams=lambda: len(hub.streams))
    ctx = ApiContext(
        settings,
        state,
        hub,
        metrics,
        broker,
        store=_token_store(settings),
        audit=_audit_log(settings, broker),
    )
    watcher = SnapshotWatcher(settings.mirror_dir, state, hub, poll_s=settings.poll_s, metrics=metrics)
    if should_stop is not None:
        watcher.should_stop = should_stop
    read, write = reads.routes(ctx), write_routes.routes(ctx)
    compose = compose_routes.routes(ctx, import_target(settings.imports))
    deploy = forwarding.routes(settings)  # promote and rollback: config-sync's to decide

    @operation(
        "a stream ticket: what an EventSource sends to /api/events instead of the token",
        Json("ticket issued", models.StreamTicket),
        status=201,
        errors=(429,),
    )
    async def stream_tickets(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        tickets = ctx.tickets
        ticket = tickets.issue()
        if ticket is None:
            why = f"{tickets.max_open} stream tickets wait to be used; use them or wait {tickets.ttl_s:g} s"
            return error(429, why, headers={"Retry-After": str(int(tickets.ttl_s))})
        issued = models.StreamTicket(ticket=ticket, expires_in_s=int(tickets.ttl_s))
        return ApiJSON(issued, status_code=201)

    @operation(
        "server-sent events: hello, then one change per snapshot change",
        Body("event stream", {"text/event-stream": TEXT}),
        errors=(429, 503),
        query=(Query("ticket", "a stream ticket (POST /api/stream-tickets), when reads need the token"),),
    )
    async def events(request: Request) -> Response:
        if (refused := ctx.refuse_stream(request)) is not None:
            return refused
        client = request.client.host if request.client else ""
        stream = hub.open(client)
        if stream is None:
            metrics.refused_streams.inc()
            if not hub.closed and hub.is_client_full(client):
                why = (
                    f"{client or 'this client'} has {hub.max_per_client} event streams open "
                    "(PHRAME_API_MAX_STREAMS_PER_CLIENT); close one"
                )
                return error(429, f"no event stream: {why}", headers={"Retry-After": "5"})
            why = (
                "the server is shutting down"
                if hub.closed
                else f"{hub.max_streams} event streams are open (the cap)"
            )
            return error(503, f"no event stream: {why}; retry later", headers={"Retry-After": "5"})
        body = event_stream(
            hub,
            stream,
            hello={"generated_at": state.generated_at()},
            generated_at=state.generated_at,
            keepalive_s=settings.keepalive_s,
        )
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    @operation(
        "this document",
        Body("OpenAPI 3.0", {"application/json": {"schema": {"type": "object"}}}),
        access="public",
    )
    async def openapi(_: Request) -> Response:
        return ApiJSON(spec)

    @operation("liveness and what is loaded", Json("health", models.Health), access="public")
    async def healthz(_: Request) -> Response:
        return ApiJSON(
            models.Health(
                status="ok",
                snapshots=models.Snapshots(
                    desired="desired" in state.loaded, actual="actual" in state.loaded
                ),
                broker=broker is not None and broker.client.is_connected,
                streams=len(hub.streams),
            )
        )

    @operation(
        "readiness: 503 with the reason while the broker connection (writes) is down",
        Json("ready", models.Ready),
        access="public",
        answers={503: Json("the broker connection is down (the reason in error)", models.NotReady)},
    )
    async def readyz(_: Request) -> Response:
        problem = None if broker is None else broker.problem()
        if problem is not None:
            return ApiJSON(models.NotReady(error=problem, broker=False), status_code=503)
        return ApiJSON(models.Ready(status="ready", broker=broker is not None))

    @operation("Prometheus metrics", Body("metrics", {"text/plain": TEXT}), access="public")
    async def metrics_route(_: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if broker is not None:
            broker.start()
        await watcher.check()  # the first read before the first request
        task = asyncio.create_task(watcher.run(), name="snapshot-watcher")
        try:
            yield
        finally:
            hub.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if broker is not None:
                await anyio.to_thread.run_sync(broker.stop)

    routes = [
        Route("/api/nodes", read["nodes"]),
        Route("/api/nodes/{node}", read["node"]),
        Route("/api/nodes/{node}/compose", compose["export"]),
        Route("/api/nodes/{node}/containers/{id}/restart", write["restart"], methods=["POST"]),
        Route("/api/nodes/{node}/containers/{id}/logs", write["logs"], methods=["POST"]),
        Route("/api/environments", read["environments"]),
        Route("/api/environments/{env}", read["environment"]),
        Route("/api/environments/{env}/rollback", deploy["rollback"], methods=["POST"]),
        Route("/api/rollouts/{env}/{service}/promote", deploy["promote"], methods=["POST"]),
        Route("/api/topics", read["topics"]),
        Route("/api/import/compose", compose["import"], methods=["POST"]),
        Route("/api/kv/{topic:path}", read["kv_get"], methods=["GET"]),
        Route("/api/kv/{topic:path}", write["kv_put"], methods=["PUT"]),
        Route("/api/kv/{topic:path}", write["kv_delete"], methods=["DELETE"]),
        Route("/api/stream-tickets", stream_tickets, methods=["POST"]),
        Route("/api/events", events),
        Route("/openapi.json", openapi),
        Route("/docs", docs.docs_page),
        Mount("/docs/static", app=docs.swagger_files(), name="swagger"),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_route),
        Route("/", docs.index),
        Mount("/static", app=docs.dashboard_files(), name="static"),
    ]
    spec = document(routes)  # from the routes and their handlers' @operation
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={404: _not_found, 405: _not_allowed},
        middleware=[Middleware(BrowserGuard, names=settings.host_names)],  # Host check, headers
    )
    app.state.ctx = ctx
    app.state.watcher = watcher
    return app


async def _not_found(request: Request, _exc: Exception) -> Response:
    return error(404, f"no route {request.url.path!r}")


async def _not_allowed(request: Request, _exc: Exception) -> Response:
    return error(405, f"method {request.method} is not allowed on {request.url.path!r}")


def _token_store(settings: ApiSettings) -> TokenStore | None:
    if settings.tokens_file is None:
        return None
    try:
        return TokenStore(settings.tokens_file)
    except TokensFileError as e:
        raise SettingsError(f"PHRAME_TOKENS_FILE: {e}") from None


def _audit_log(settings: ApiSettings, broker: Broker | None) -> AuditLog:
    """The audit list at ``<prefix>/desired/audit/topic-api`` (taken back once the broker
    holds it; without a broker, the log only)."""
    topic = audit_topic(settings.topic_prefix)
    if broker is None:
        return AuditLog("topic-api", topic, None)

    def publish(t: str, payload: bytes) -> None:
        broker.publish(t, payload, retain=True)

    def previous() -> bytes | None:
        return (broker.value(topic) or b"") if broker.client.is_connected else None

    return AuditLog("topic-api", topic, publish, previous=previous)


def audit_topic(prefix: str) -> str:
    return Topics(prefix).audit("topic-api")
