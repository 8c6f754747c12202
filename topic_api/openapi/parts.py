"""The building blocks of the OpenAPI document: references, answers, errors, parameters
and the read/write operation shapes with their security. Used by :mod:`topic_api.openapi.document`
and :mod:`topic_api.openapi.compose`; data only."""

from __future__ import annotations

from typing import Any


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def answer(description: str, schema: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref(schema)}}}


def errors(*codes: int) -> dict[str, Any]:
    why = {
        400: "bad input (the message says what and where)",
        401: "missing or wrong bearer token",
        403: "topic outside the writable prefixes",
        404: "not found",
        408: "body not complete in time",
        409: "the import's branch exists already, or the tracked ref is no branch",
        413: "body too large",
        422: "payload invalid under the topic's schema",
        503: "broker unavailable, or the stream cap reached",
    }
    return {str(c): answer(why[c], "Error") for c in codes}


def parameter(name: str, where: str, description: str, *, required: bool, **more: Any) -> dict[str, Any]:
    """One string parameter (``where``: ``path`` or ``query``); ``more``: e.g. its ``example``."""
    doc = {"name": name, "in": where, "required": required, "description": description}
    return doc | {"schema": {"type": "string"}} | more


def path_param(name: str, description: str, example: str) -> dict[str, Any]:
    return parameter(name, "path", description, required=True, example=example)


READ_401 = errors(401)  # only when PHRAME_API_READ_TOKEN_REQUIRED
NODE = path_param("node", "node name", "dev-1")
TOPIC = path_param("topic", "a topic (slashes included), no wildcards", "phrame/kv/example")
WRITE_SECURITY: list[dict[str, list[str]]] = [{"bearer": []}]
READ_SECURITY: list[dict[str, list[str]]] = [{}, {"bearer": []}, {"access_token": []}]


def read(summary: str, ok: dict[str, Any], *more: int, params: list[Any] | None = None) -> dict[str, Any]:
    return {
        "summary": summary,
        "parameters": params or [],
        "security": READ_SECURITY,
        "responses": {"200": ok, **READ_401, **errors(*more)},
    }


def write(summary: str, ok_code: str, ok: dict[str, Any], *more: int, params: list[Any]) -> dict[str, Any]:
    return {
        "summary": summary,
        "parameters": params,
        "security": WRITE_SECURITY,
        "responses": {ok_code: ok, **errors(401, 503, *more)},
    }


def query(name: str, description: str, required: bool) -> dict[str, Any]:
    return parameter(name, "query", description, required=required)
