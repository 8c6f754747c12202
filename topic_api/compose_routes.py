"""The compose routes: ``GET /api/nodes/{node}/compose`` (a node's desired state as a docker-
compose.yml, ``phrame.compose.export_node`` over the desired mirror snapshot) and ``POST
/api/import/compose`` (a compose file in, a branch for review out).

Wired by :mod:`topic_api.app`. An import needs an ``admin`` token (and is audited), reads its
body within the size and time limits of ``http_body``, and is proposed by the target the
settings name (local bare repository, GitLab, or none: the files are only returned). It never
deploys: it never writes the tracked branch or a tag. Bad input is a 4xx naming what and where.
"""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from phrame.compose import ComposeError, export_node, import_compose
from phrame.settings.http_body import BodyTimeout, BodyTooLarge, ClientGone, read_body
from topic_api import models
from topic_api.context import ApiContext
from topic_api.import_models import ComposeImport, ImportInvalid
from topic_api.imports.check import problems_alone
from topic_api.imports.proposal import Draft, ImportRefused, Proposal
from topic_api.imports.targets import ImportTarget
from topic_api.openapi.operations import TEXT, Body, Json, Query, operation
from topic_api.responses import ApiJSON, error

_TRUE, _FALSE = ("1", "true", "yes"), ("", "0", "false", "no")


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "").lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ImportRefused(400, f"query parameter {name}: {value!r} is not true or false")


def _propose_alone(draft: Draft) -> Proposal:
    """No repository configured (or a dry run without one): check the files on their own."""
    problems = problems_alone(draft.result.files)
    if problems:
        raise ImportRefused(422, f"the imported files do not validate: {problems[0].format()}", problems)
    return Proposal(draft, dict(draft.result.files))


def routes(ctx: ApiContext, target: ImportTarget | None) -> dict[str, Any]:
    """``target`` proposes imports (``LocalImports``, ``GitLabImports``); None: files only."""
    settings = ctx.settings

    @operation(
        "the node's desired state as a docker-compose.yml (from the desired snapshot)",
        Body(
            "docker-compose.yml text (a YAML mapping with services:)",
            {"application/yaml": {"schema": {"type": "object", "required": ["services"]}}},
        ),
        errors=(404,),
        query=(Query("download", "1 or true: answer with Content-Disposition: attachment"),),
    )
    async def export(request: Request) -> Response:
        if (refused := ctx.refuse_read(request)) is not None:
            return refused
        node = request.path_params["node"]
        desired = ctx.state.planes["desired"]
        if node not in desired.index.nodes:
            return error(404, f"node {node!r} has no desired state in the desired snapshot")
        text = export_node(desired.topics, node, prefix=settings.topic_prefix)
        headers = {}
        if request.query_params.get("download", "").lower() in _TRUE:
            headers["Content-Disposition"] = f'attachment; filename="{node}-docker-compose.yml"'
        return Response(text, media_type="application/yaml", headers=headers)

    @operation(
        "a compose file in, phrame-config files out, proposed on a new branch for review",
        Json("branch written (with GitLab, the merge request opened too)", ComposeImport),
        access="write",
        status=201,
        errors=(400, 408, 409, 413),
        answers={
            200: Json("files only: a dry run, or no repository configured", ComposeImport),
            422: Json("the files do not validate (problems with file:line)", ImportInvalid),
            503: Json("the config repository or GitLab is unavailable", models.Error),
        },
        query=(
            Query("env", "the environment to import into (environments/NAME/)", required=True),
            Query("node", "pin every service to this node (else placement chooses)"),
            Query("dry_run", "true: validate and return the files, write nothing"),
        ),
        body=Body(
            "the docker-compose.yml (UTF-8, at most PHRAME_API_MAX_BODY_BYTES)",
            {"application/yaml": TEXT, "text/plain": TEXT},
        ),
    )
    async def import_(request: Request) -> Response:
        target = request.query_params.get("env") or "?"
        return await ctx.audited(request, "admin", "import", target, lambda: _import(request))

    async def _import(request: Request) -> Response:
        limit, timeout_s = settings.max_body_bytes, settings.http.body_timeout_s
        try:
            env = request.query_params.get("env")
            if not env:
                raise ImportRefused(400, "query parameter env is required (the environment to import into)")
            node = request.query_params.get("node") or None
            dry_run = _flag(request, "dry_run")
            raw = await read_body(request, limit=limit, timeout_s=timeout_s)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ImportRefused(400, f"compose file: byte {e.start} is not UTF-8") from None
            try:
                result = import_compose(text, env=env, node=node)
            except ComposeError as e:
                raise ImportRefused(400, f"compose file:{e.line}:{e.column}: {e.message}") from None
            except ValueError as e:
                raise ImportRefused(400, f"compose import: {e}") from None
            draft = Draft(env, node, result)
            if target is None:
                proposal = _propose_alone(draft)
            else:
                proposal = await anyio.to_thread.run_sync(lambda: target.propose(draft, dry_run=dry_run))
        except BodyTooLarge:
            return error(413, f"compose file is over {limit} bytes (PHRAME_API_MAX_BODY_BYTES)")
        except BodyTimeout:
            return error(408, f"body not complete within {timeout_s:g} s", headers={"Connection": "close"})
        except ClientGone:
            return error(400, "client hung up")
        except ImportRefused as e:
            ctx.metrics.writes.labels("refused" if e.status < 500 else "unavailable").inc()
            return ApiJSON(e.to_json(), status_code=e.status)
        if proposal.branch:
            ctx.metrics.writes.labels("published").inc()
        return ApiJSON(proposal.to_json(dry_run=dry_run), status_code=201 if proposal.branch else 200)

    return {"export": export, "import": import_}
