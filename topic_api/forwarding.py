"""Promote and Rollback from the dashboard: forwarded to config-sync, which holds git and decides.

``POST /api/rollouts/{env}/{service}/promote`` and ``POST /api/environments/{env}/rollback``
pass the body and the caller's bearer token to config-sync's own routes at
``PHRAME_CONFIG_SYNC_URL`` and hand its answer back as it is (status and JSON): config-sync
checks the ``deploy`` scope against the tokens file both share, audits and acts; this API
never judges the token nor writes git itself. Without the setting: 503. config-sync away:
502; no answer within ``PHRAME_CONFIG_SYNC_TIMEOUT_S``: 504. Wired by :mod:`topic_api.app`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from phrame.settings.http_body import BodyTimeout, BodyTooLarge, ClientGone, read_body
from topic_api import models
from topic_api.openapi.operations import Body, Json, operation
from topic_api.responses import ApiJSON, error
from topic_api.settings import ApiSettings

log = logging.getLogger(__name__)
NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
MAX_BODY = 4096
ANSWERS = {
    502: Json("config-sync could not be reached, or its answer was not JSON", models.Error),
    503: Json("PHRAME_CONFIG_SYNC_URL is not set: nothing to forward to", models.Error),
    504: Json("no answer from config-sync within PHRAME_CONFIG_SYNC_TIMEOUT_S", models.Error),
}
FORWARDED = (400, 401, 403, 404, 409, 413)


def _body(description: str) -> Body:
    return Body(description, {"application/json": {"schema": {"type": "object"}}})


async def forward(settings: ApiSettings, request: Request, path: str) -> Response:
    """POST ``path`` on config-sync with the request's body and bearer token; its answer."""
    base = settings.config_sync_url
    if base is None:
        return error(503, "PHRAME_CONFIG_SYNC_URL is not set: this API cannot reach config-sync")
    try:
        raw = await read_body(request, limit=MAX_BODY, timeout_s=settings.http.body_timeout_s)
    except BodyTooLarge:
        return error(413, f"body over {MAX_BODY} bytes")
    except (BodyTimeout, ClientGone):
        return error(400, "body not complete")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    auth = request.headers.get("authorization")
    if auth:
        headers["Authorization"] = auth  # config-sync judges it (the shared tokens file)
    url = f"{base.rstrip('/')}{path}"
    timeout_s = settings.config_sync_timeout_s
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            answer = await client.post(url, content=raw, headers=headers)
    except httpx.TimeoutException:
        return error(
            504, f"no answer from config-sync at {base} within {timeout_s:g} s (PHRAME_CONFIG_SYNC_TIMEOUT_S)"
        )
    except httpx.HTTPError as e:
        log.warning("cannot reach config-sync at %s: %s", base, e)
        return error(502, f"cannot reach config-sync at {base}: {type(e).__name__}: {e}")
    try:
        doc: Any = answer.json()
    except ValueError:
        return error(502, f"config-sync at {base} answered {answer.status_code} without JSON")
    if not isinstance(doc, dict):
        return error(502, f"config-sync at {base} answered {answer.status_code} with no JSON object")
    headers_out = {"WWW-Authenticate": "Bearer"} if answer.status_code == 401 else None
    return ApiJSON(doc, status_code=answer.status_code, headers=headers_out)


def routes(settings: ApiSettings) -> dict[str, Any]:
    @operation(
        "promote a staged rollout waiting at its canary (forwarded to config-sync, deploy scope)",
        Json("config-sync queued the promotion", models.Forwarded),
        access="write",
        status=202,
        errors=FORWARDED,
        answers=ANSWERS,
        body=_body('{"commit": SHA}: the commit whose canary to promote'),
        body_required=False,
    )
    async def promote(request: Request) -> Response:
        env, service = request.path_params["env"], request.path_params["service"]
        if not NAME.match(env) or not NAME.match(service):
            return error(400, f"{env!r}/{service!r} is not an environment and a service name")
        return await forward(settings, request, f"/rollouts/{env}/{service}/promote")

    @operation(
        "roll an environment back with a revert commit (forwarded to config-sync, deploy scope)",
        Json("config-sync made the revert commit (or opened its merge request)", models.Forwarded),
        access="write",
        status=201,
        errors=FORWARDED,
        answers=ANSWERS,
        body=_body(
            '{"to": SHA | null, "merge": bool}: the commit to go back to (default: the previous '
            "successful deployment); with GitLab, whether to merge the merge request"
        ),
        body_required=False,
    )
    async def rollback(request: Request) -> Response:
        env = request.path_params["env"]
        if not NAME.match(env):
            return error(400, f"{env!r} is not an environment name")
        return await forward(settings, request, f"/environments/{env}/rollback")

    return {"promote": promote, "rollback": rollback}
