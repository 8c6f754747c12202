"""The OpenAPI 3.0 document of the topic API (``/openapi.json``), generated from the routes.

:func:`document` is called once by :func:`topic_api.app.create_app` with the app's routes:
each path and its parameters come from the Starlette route, everything else from the
handler's ``@operation`` (:mod:`topic_api.openapi.operations`) and the TypedDicts it names
(:mod:`topic_api.models`, made schemas by :mod:`topic_api.openapi.json_schema`). Swagger UI
renders it at ``/docs``; schemathesis checks the running API against it. A routed handler
without an ``@operation`` is an error here, so no route goes undocumented; mounts are not
documented (static files).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Route

from topic_api import import_models, models
from topic_api.openapi.json_schema import SchemaBook
from topic_api.openapi.operations import ERRORS, PATH_PARAMS, Body, Json, Operation, operation_of

#: published under #/components/schemas, in this order; EnvError is open (more fields allowed)
COMPONENTS: tuple[type, ...] = (
    models.Error,
    models.PlaneStamps,
    models.HistoryEntry,
    models.NodeSummary,
    models.Item,
    models.NodeDetail,
    models.Nodes,
    models.EnvError,
    models.Environment,
    models.EnvironmentDetail,
    models.Environments,
    models.Topics,
    models.KvValue,
    models.KvWritten,
    models.KvDeleted,
    models.Restarted,
    models.LogTail,
    models.Forwarded,
    models.StreamTicket,
    import_models.Problem,
    import_models.ComposeImport,
    import_models.ImportInvalid,
    models.Health,
    models.Ready,
    models.NotReady,
)
OPEN = (models.EnvError, models.Forwarded)  # Forwarded: config-sync's answer, as it is
WRITE_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
# a read token is asked for only when PHRAME_API_READ_TOKEN_REQUIRED: anonymous reads too;
# never in the query (/api/events takes a stream ticket there, see its parameter)
READ_SECURITY: list[dict[str, list[str]]] = [{}, {"bearer": []}]
SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "PHRAME_API_TOKEN"},
}


def _book() -> SchemaBook:
    book = SchemaBook()
    book.publish(COMPONENTS, open_to_more=OPEN)
    return book


def _answer(book: SchemaBook, answer: Json | Body) -> dict[str, Any]:
    if isinstance(answer, Json):
        return {
            "description": answer.description,
            "content": {"application/json": {"schema": book.ref(answer.model)}},
        }
    return {"description": answer.description, "content": answer.content}


def _parameters(route: Route, op: Operation) -> list[dict[str, Any]]:
    params = []
    for name in route.param_convertors:
        if name not in PATH_PARAMS:
            raise ValueError(f"route {route.path}: path parameter {name!r} has no description in PATH_PARAMS")
        description, example = PATH_PARAMS[name]
        schema = {"type": "string"}
        params.append(
            {"name": name, "in": "path", "required": True, "description": description, "schema": schema}
            | {"example": example}
        )
    for q in op.query:
        query_schema: dict[str, Any] = {"type": "string"} | ({"default": q.default} if q.default else {})
        params.append(
            {"name": q.name, "in": "query", "required": q.required, "description": q.description}
            | {"schema": query_schema}
        )
    return params


def _operation(book: SchemaBook, route: Route, op: Operation) -> dict[str, Any]:
    codes = op.errors
    if op.access == "read":
        codes = (401, *codes)
    elif op.access == "write":
        codes = (401, 403, 503, *codes)
    responses = {str(op.status): _answer(book, op.ok)}
    responses |= {str(c): _answer(book, Json(ERRORS[c], models.Error)) for c in codes}
    responses |= {str(c): _answer(book, a) for c, a in op.answers.items()}
    out: dict[str, Any] = {"summary": op.summary}
    if params := _parameters(route, op):
        out["parameters"] = params
    if op.access != "public":
        out["security"] = READ_SECURITY if op.access == "read" else WRITE_SECURITY
    if op.body is not None:
        out["requestBody"] = {"required": op.body_required, "description": op.body.description}
        out["requestBody"]["content"] = op.body.content
    out["responses"] = responses
    return out


def _openapi_path(path: str) -> str:
    """``/api/kv/{topic:path}`` -> ``/api/kv/{topic}``."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


def paths(routes: Sequence[BaseRoute], book: SchemaBook) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route):
            continue  # a mount: static files
        op = operation_of(route.endpoint)
        if op is None:
            raise ValueError(f"route {route.path} ({route.name}) has no @operation: document it")
        item = out.setdefault(_openapi_path(route.path), {})
        for method in sorted((route.methods or {"GET"}) - {"HEAD"}):
            item[method.lower()] = _operation(book, route, op)
    return out


def document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    book = _book()
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Phrame topic API",
            "version": "1",
            "description": "Desired against actual state of a Phrame fleet (the mirrors' snapshots).",
        },
        "paths": paths(routes, book),
        "components": {"schemas": book.components, "securitySchemes": SECURITY_SCHEMES},
    }
