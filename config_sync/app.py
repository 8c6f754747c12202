"""The HTTP face of config-sync (Starlette): GitLab webhooks, manual sync, health, status, metrics.

Handlers only check, deduplicate, route and queue; they never wait on git or MQTT, so
GitLab gets its answer in milliseconds (it disables a hook after 4 failures in a row).
An accepted event is never answered 5xx: the poll catches anything a trigger missed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as HttpRoute

from config_sync.metrics import CONTENT_TYPE
from config_sync.service import ConfigSync
from config_sync.webhooks import MalformedEvent, delivery_key, is_token_valid, parse_body, route

log = logging.getLogger(__name__)
SEEN_KEYS = 10_000


class _TooLarge(Exception):
    pass


class Deliveries:
    """Keys of recent deliveries (GitLab resends the same ``Idempotency-Key`` on retries)."""

    def __init__(self, size: int = SEEN_KEYS) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def is_new(self, key: str) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            if len(self._keys) > self._size:
                self._keys.popitem(last=False)
            return True


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _answer(service: ConfigSync, result: str, status: int, **extra: object) -> JSONResponse:
    service.metrics.webhooks.labels(result).inc()
    return JSONResponse({"status": result, **extra}, status_code=status)


def create_app(service: ConfigSync, *, manage_lifecycle: bool = True) -> Starlette:
    settings = service.settings
    seen = Deliveries()

    def token_ok(request: Request) -> bool:
        given = request.headers.get("x-gitlab-token")
        auth = request.headers.get("authorization", "")
        if given is None and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return is_token_valid(settings.webhook_secret, given)

    async def webhook(request: Request) -> Response:
        if not token_ok(request):
            return _answer(service, "unauthorized", 401, error="X-Gitlab-Token does not match")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _answer(service, "unsupported", 415, error="Content-Type must be application/json")
        try:
            raw = await _read_limited(request, settings.max_body_bytes)
            body = parse_body(raw)
            key = delivery_key(request.headers, raw)
            decided = route(request.headers.get("x-gitlab-event"), body, service.tracked)
        except _TooLarge:
            return _answer(service, "too-large", 413, error=f"body over {settings.max_body_bytes} bytes")
        except MalformedEvent as e:
            return _answer(service, "malformed", 400, error=str(e))
        if not seen.is_new(key):
            return _answer(service, "duplicate", 200, reason="delivery already seen")
        try:
            if decided.action == "sync" and decided.ref and service.trigger_sync(decided.ref):
                return _answer(service, "queued", 202, ref=decided.ref, reason=decided.reason)
            if decided.action == "review":
                service.trigger_review(decided)
                return _answer(
                    service, "queued", 202, ref=decided.ref, mr=decided.mr_iid, reason=decided.reason
                )
        except Exception:  # accepted: the poll will catch what this trigger missed
            log.exception("could not queue %s; the next poll catches up", decided.reason)
            return _answer(service, "accepted", 202, reason="queued for the next poll")
        return _answer(service, "ignored", 200, reason=decided.reason)

    async def manual_sync(request: Request) -> Response:
        if not token_ok(request):
            return JSONResponse({"error": "token does not match"}, status_code=401)
        ref = request.query_params.get("ref")
        refs = [ref] if ref else sorted(service.tracked)
        queued = [r for r in refs if service.trigger_sync(r)]
        if not queued:
            return JSONResponse({"error": f"ref {ref!r} is not tracked"}, status_code=404)
        return JSONResponse({"status": "queued", "refs": queued}, status_code=202)

    async def healthz(_: Request) -> Response:
        failed = service.start_error
        if failed is not None:  # a refused broker login: restarting us is the remedy
            return JSONResponse({"status": "failed", "error": str(failed)}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        ready = service.is_ready()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    async def status(_: Request) -> Response:
        return JSONResponse(service.status())

    async def metrics(_: Request) -> Response:
        service.is_ready()
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if manage_lifecycle:
            await anyio.to_thread.run_sync(service.start)
        try:
            yield
        finally:
            if manage_lifecycle:
                await anyio.to_thread.run_sync(service.stop)

    return Starlette(
        routes=[
            HttpRoute("/webhooks/gitlab", webhook, methods=["POST"]),
            HttpRoute("/sync", manual_sync, methods=["POST"]),
            HttpRoute("/healthz", healthz),
            HttpRoute("/readyz", readyz),
            HttpRoute("/status", status),
            HttpRoute("/metrics", metrics),
        ],
        lifespan=lifespan,
    )
