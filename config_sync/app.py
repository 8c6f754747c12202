"""The HTTP face of config-sync (Starlette): GitLab webhooks, manual sync, health, status, metrics.

Handlers only check, deduplicate, route and queue; they never wait on git or MQTT, so
GitLab gets its answer in milliseconds (it disables a hook after 4 failures in a row).
Bad input is a 4xx that says why, never a 5xx; an accepted event is never answered 5xx
either: the poll catches anything a trigger missed. Served by ``phrame.settings.http_serving``.
Credentials: the webhook secret authenticates GitLab's webhook; promote and rollback (scope ``deploy``),
``/sync`` (``admin``) and the full ``/status`` (``read``) take a token of the tokens file
(``PHRAME_TOKENS_FILE``), or the webhook secret only when there is no tokens file. Every
write a known holder asks for is audited (``phrame.auth.audit``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as HttpRoute

from config_sync.errors import SettingsError
from config_sync.intake.webhooks import MalformedEvent, delivery_key, is_token_valid, parse_body, route
from config_sync.metrics import CONTENT_TYPE
from config_sync.rollbacks.answer import rollback_answer
from config_sync.service import ConfigSync
from phrame.auth import AuditLog, TokensFileError, TokenStore
from phrame.auth.access import Access, Legacy, check_access
from phrame.settings.http_body import BodyTimeout, BodyTooLarge, ClientGone, read_body
from phrame.settings.logs import ConditionLog
from schemas import load_json

log = logging.getLogger(__name__)
SEEN_KEYS = 10_000  # x 32-byte digests: about 2 MB at most, whatever the keys' length


class Deliveries:
    """Keys of recent deliveries (GitLab resends the same ``Idempotency-Key`` on retries),
    kept as fixed-size digests so that long keys cannot grow the memory."""

    def __init__(self, size: int = SEEN_KEYS) -> None:
        self._keys: OrderedDict[bytes, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    @staticmethod
    def _digest(key: str) -> bytes:
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()

    def is_new(self, key: str) -> bool:
        digest = self._digest(key)
        with self._lock:
            if digest in self._keys:
                return False
            self._keys[digest] = None
            if len(self._keys) > self._size:
                self._keys.popitem(last=False)
            return True

    def forget(self, key: str) -> None:
        """The delivery was not taken after all: its retry must get through."""
        with self._lock:
            self._keys.pop(self._digest(key), None)


class AsciiJSONResponse(JSONResponse):
    """Escapes non-ASCII: an echoed field can never fail to encode (a lone surrogate)."""

    def render(self, content: object) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _answer(service: ConfigSync, result: str, status: int, **extra: object) -> JSONResponse:
    service.metrics.webhooks.labels(result).inc()
    headers = {"Connection": "close"} if status == 408 else None  # the rest of the body may still come
    return AsciiJSONResponse({"status": result, **extra}, status_code=status, headers=headers)


def create_app(service: ConfigSync, *, manage_lifecycle: bool = True) -> Starlette:
    settings = service.settings
    settings.require_webhook_auth()
    insecure = settings.webhook_secret is None  # and explicitly allowed, or the line above raised
    if insecure:
        log.warning(
            "INSECURE: PHRAME_INSECURE_NO_WEBHOOK_SECRET is set and there is no webhook secret: "
            "anyone who reaches %s can trigger syncs and read the full /status; development only",
            settings.listen,
        )
    seen = Deliveries()
    notes = ConditionLog(log)

    store = _token_store(settings.tokens_file)
    # without a tokens file, the webhook secret does what it always did (an implicit admin);
    # with one, it authenticates GitLab's webhook only
    secret = settings.webhook_secret
    legacy = [Legacy("webhook-secret", secret, frozenset({"admin"}))] if store is None and secret else []
    audit = _audit_log(service)

    def given_token(request: Request) -> str | None:
        given = request.headers.get("x-gitlab-token")
        auth = request.headers.get("authorization", "")
        if given is None and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return given

    def token_ok(request: Request) -> bool:
        """The webhook's check: GitLab's secret."""
        if insecure:
            return True
        return is_token_valid(settings.webhook_secret, given_token(request))

    def access(request: Request, scope: str) -> Access:
        if insecure and store is None:
            return Access(None, 200)
        return check_access(given_token(request), scope, store=store, legacy=legacy)

    def refused(request: Request, decided: Access, action: str, target: str) -> Response:
        if decided.status == 403:  # a known holder: on the record
            audit.record(who=decided.who, action=action, target=target, result="forbidden", status=403)
        else:
            log.info("%s %s refused (401) for %s: %s", action, target, _peer(request), decided.why)
        headers = {"WWW-Authenticate": "Bearer"} if decided.status == 401 else None
        return AsciiJSONResponse({"error": decided.why}, status_code=decided.status, headers=headers)

    def dropped(iid: int | None) -> Response:
        pending = service.max_pending_reviews
        notes.note("reviews-full", "review queue full (%d merge requests): dropping reviews", pending)
        reason = f"review queue full ({pending} merge requests pending); !{iid} is reviewed at its next event"
        return _answer(service, "dropped", 200, mr=iid, reason=reason)

    async def webhook(request: Request) -> Response:
        if not token_ok(request):
            return _answer(service, "unauthorized", 401, error="X-Gitlab-Token does not match")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _answer(service, "unsupported", 415, error="Content-Type must be application/json")
        limit, timeout_s = settings.max_body_bytes, settings.http.body_timeout_s
        try:
            raw = await read_body(request, limit=limit, timeout_s=timeout_s)
            body = parse_body(raw)
            key = delivery_key(request.headers, raw)
            decided = route(request.headers.get("x-gitlab-event"), body, service.tracked)
        except BodyTooLarge:
            return _answer(service, "too-large", 413, error=f"body over {limit} bytes")
        except BodyTimeout:
            notes.note("body-timeout", "webhook: a body was not complete within %g s (408)", timeout_s)
            return _answer(service, "timeout", 408, error=f"body not complete within {timeout_s:g} s")
        except ClientGone:
            notes.note("hung-up", "webhook: a client hung up before its body was complete")
            return _answer(service, "disconnected", 400, error="client hung up")  # nobody reads it
        except MalformedEvent as e:
            return _answer(service, "malformed", 400, error=str(e))
        # stored only now that the event is readable and routed: a retry of a refused one gets in
        if not seen.is_new(key):
            return _answer(service, "duplicate", 200, reason="delivery already seen")
        try:
            if decided.action == "sync" and decided.mr_iid is not None:
                service.note_merge(decided)  # its plan is compared with the reviewed one
            if decided.mr_iid is not None and decided.action in ("sync", "stop"):
                service.trigger_preview_stop(decided.mr_iid)  # closed or merged: its preview goes
                if decided.action == "stop":
                    return _answer(service, "queued", 202, mr=decided.mr_iid, reason=decided.reason)
            if decided.action == "sync" and decided.ref and service.trigger_sync(decided.ref):
                return _answer(service, "queued", 202, ref=decided.ref, reason=decided.reason)
            if decided.action == "review":
                if not service.trigger_review(decided):
                    seen.forget(key)
                    return dropped(decided.mr_iid)
                return _answer(
                    service, "queued", 202, ref=decided.ref, mr=decided.mr_iid, reason=decided.reason
                )
        except Exception:  # accepted: the poll will catch what this trigger missed
            log.exception("could not queue %s; the next poll catches up", decided.reason)
            return _answer(service, "accepted", 202, reason="queued for the next poll")
        return _answer(service, "ignored", 200, reason=decided.reason)

    async def manual_sync(request: Request) -> Response:
        ref = request.query_params.get("ref")
        decided = access(request, "admin")
        if not decided.is_allowed:
            return refused(request, decided, "sync", ref or "*")
        refs = [ref] if ref else sorted(service.tracked)
        queued = [r for r in refs if service.trigger_sync(r)]
        if not queued:
            why = f"ref {ref!r} is not tracked"
            audit.record(
                who=decided.who, action="sync", target=str(ref), result="refused", status=404, detail=why
            )
            return AsciiJSONResponse({"error": why}, status_code=404)
        audit.record(who=decided.who, action="sync", target=",".join(queued), result="accepted", status=202)
        return JSONResponse({"status": "queued", "refs": queued}, status_code=202)

    def standing_by() -> Response | None:
        """Active + standby: a deploy-scope write goes to the active (503 names the holder)."""
        if service.role != "standby":
            return None
        holder = service.lease.view()["holder"] if service.lease is not None else None
        why = f"this config-sync stands by; send it to the active one ({holder or 'none yet'})"
        return AsciiJSONResponse({"error": why, "role": "standby"}, status_code=503)

    async def deploy_body(request: Request, decided: Access, action: str, target: str) -> bytes | Response:
        """A deploy-scoped write's small JSON body, or the answer that refuses it (401/403 with
        its audit line, 413 over 4 KiB, 400 when the body did not arrive whole)."""
        if not decided.is_allowed:
            return refused(request, decided, action, target)
        if (busy := standing_by()) is not None:
            return busy
        try:
            return await read_body(request, limit=4096, timeout_s=settings.http.body_timeout_s)
        except BodyTooLarge:
            return AsciiJSONResponse({"error": "body over 4096 bytes"}, status_code=413)
        except (BodyTimeout, ClientGone):
            return AsciiJSONResponse({"error": "body not complete"}, status_code=400)

    async def promote(request: Request) -> Response:
        env, svc = request.path_params["env"], request.path_params["service"]
        target = f"{env}/{svc}"
        decided = access(request, "deploy")
        raw = await deploy_body(request, decided, "promote", target)
        if isinstance(raw, Response):
            return raw
        commit = _commit_of(raw)
        promotion = service.rollouts.promote(env, svc, commit)
        named = commit if isinstance(commit, str) else None
        audit.record(
            who=decided.who,
            action="promote",
            target=target,
            result="accepted" if promotion.is_taken else "refused",
            status=promotion.status,
            commit=promotion.commit or (named[:64] if named else None),
            detail=None if promotion.is_taken else promotion.message,
        )
        if not promotion.is_taken:  # nothing waits for this promotion (or it names no commit)
            return AsciiJSONResponse({"error": promotion.message}, status_code=promotion.status)
        body = {"status": "queued", "message": promotion.message, "commit": promotion.commit}
        return AsciiJSONResponse(body, status_code=202)

    async def approve(request: Request) -> Response:
        env = request.path_params["env"]
        decided = access(request, "deploy")
        raw = await deploy_body(request, decided, "approve", env)
        if isinstance(raw, Response):
            return raw
        commit, override = _approval_of(raw)
        answer = service.approvals.approve(env, commit, decided.who, override_freeze=override)
        named = commit if isinstance(commit, str) else None
        audit.record(
            who=decided.who,
            action="approve",
            target=env,
            result="accepted" if answer.is_taken else "refused",
            status=answer.status,
            commit=answer.commit or (named[:64] if named else None),
            detail=answer.message if not answer.is_taken or override else None,
        )
        if not answer.is_taken:
            return AsciiJSONResponse({"error": answer.message}, status_code=answer.status)
        body = {
            "status": "approved",
            "message": answer.message,
            "commit": answer.commit,
            "approvers": list(answer.approvers),
            "needed": answer.needed,
            "override_freeze": override,
        }
        return AsciiJSONResponse(body, status_code=202)

    async def rollback(request: Request) -> Response:
        env = request.path_params["env"]
        decided = access(request, "deploy")
        raw = await deploy_body(request, decided, "rollback", env)
        if isinstance(raw, Response):
            return raw
        status, doc = await anyio.to_thread.run_sync(
            lambda: rollback_answer(service.rollbacks, env, raw, who=decided.who)
        )
        audit.record(
            who=decided.who,
            action="rollback",
            target=env,
            result="accepted" if status < 300 else "refused",
            status=status,
            commit=doc.get("to") if isinstance(doc.get("to"), str) else None,
            detail=doc.get("error") if status >= 300 else None,
        )
        return AsciiJSONResponse(doc, status_code=status)

    async def healthz(_: Request) -> Response:
        failed = service.start_error
        if failed is not None:  # a refused broker login: restarting us is the remedy
            return JSONResponse({"status": "failed", "error": str(failed)}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        ready = service.is_ready()
        return JSONResponse({"ready": ready, "role": service.role}, status_code=200 if ready else 503)

    async def status(request: Request) -> Response:
        # the full view names git command lines, errors and merge requests: token holders only
        if access(request, "read").is_allowed:
            return AsciiJSONResponse(service.status())
        return AsciiJSONResponse(service.public_status())

    async def metrics(_: Request) -> Response:
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

    app = Starlette(
        routes=[
            HttpRoute("/webhooks/gitlab", webhook, methods=["POST"]),
            HttpRoute("/sync", manual_sync, methods=["POST"]),
            HttpRoute("/rollouts/{env}/{service}/promote", promote, methods=["POST"]),
            HttpRoute("/environments/{env}/approvals", approve, methods=["POST"]),
            HttpRoute("/environments/{env}/rollback", rollback, methods=["POST"]),
            HttpRoute("/healthz", healthz),
            HttpRoute("/readyz", readyz),
            HttpRoute("/status", status),
            HttpRoute("/metrics", metrics),
        ],
        lifespan=lifespan,
    )
    app.state.audit = audit
    return app


def _token_store(path: str | None) -> TokenStore | None:
    if path is None:
        return None
    try:
        return TokenStore(Path(path))
    except TokensFileError as e:
        raise SettingsError(f"PHRAME_TOKENS_FILE: {e}") from None


def _audit_log(service: ConfigSync) -> AuditLog:
    """The audit list at ``<prefix>/desired/audit/config-sync``, taken back from the published
    plane at its first entry (queued on the broker connection: never waits on the broker)."""
    topic = service.topics.audit("config-sync")

    def publish(t: str, payload: bytes) -> None:
        service.mqtt.publish(t, payload, retain=True)

    def previous() -> bytes | None:
        published = service.publisher.published
        return None if published is None else published.get(topic, b"")

    return AuditLog("config-sync", topic, publish, previous=previous)


def _commit_of(raw: bytes) -> object:
    """The ``commit`` a promote body names (None: no body, not JSON or no such field)."""
    if not raw.strip():
        return None
    try:
        doc = load_json(raw)
    except ValueError:
        return None
    return doc.get("commit") if isinstance(doc, dict) else None


def _approval_of(raw: bytes) -> tuple[object, bool]:
    """The ``commit`` and ``override_freeze`` an approve body names (None, False: not given)."""
    if not raw.strip():
        return None, False
    try:
        doc = load_json(raw)
    except ValueError:
        return None, False
    if not isinstance(doc, dict):
        return None, False
    return doc.get("commit"), doc.get("override_freeze") is True


def _peer(request: Request) -> str:
    return request.client.host if request.client else "unknown"
