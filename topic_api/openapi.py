"""The OpenAPI 3.0 document of the topic API (``/openapi.json``), written as data.

Served by :mod:`topic_api.app`, rendered by Swagger UI at ``/docs`` and checked against the
running API by schemathesis (tests/integration/test_topic_api_schema.py): every route,
parameter and answer shape is here. Change a route and this file together.
"""

from __future__ import annotations

from typing import Any

from topic_api.openapi_shapes import SCHEMAS


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


def path_param(name: str, description: str, example: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
        "example": example,
    }


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
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": {"type": "string"},
    }


def compose_import() -> dict[str, Any]:
    """``POST /api/import/compose``: a write whose 200 is a preview and whose 422 lists problems."""
    op = write(
        "a compose file in, phrame-config files out, proposed on a new branch for review",
        "201",
        answer("branch written (with GitLab, the merge request opened too)", "ComposeImport"),
        400,
        408,
        409,
        413,
        params=[
            query("env", "the environment to import into (environments/NAME/)", True),
            query("node", "pin every service to this node (else placement chooses)", False),
            query("dry_run", "true: validate and return the files, write nothing", False),
        ],
    )
    op["responses"] |= {
        "200": answer("files only: a dry run, or no repository configured", "ComposeImport"),
        "422": answer("the files do not validate (problems with file:line)", "ImportInvalid"),
    }
    op["responses"]["503"] = answer("the config repository or GitLab is unavailable", "Error")
    op["requestBody"] = {
        "required": True,
        "description": "the docker-compose.yml (UTF-8, at most PHRAME_API_MAX_BODY_BYTES)",
        "content": {
            "application/yaml": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }
    return op


def paths() -> dict[str, Any]:
    kv_body = {
        "required": True,
        "description": "the JSON value to retain (validated against the topic's schema, if any)",
        "content": {"application/json": {"schema": {}}},
    }
    return {
        "/api/nodes": {"get": read("every node: health, host stats, drift", answer("nodes", "Nodes"))},
        "/api/nodes/{node}": {
            "get": read(
                "one node with desired against actual per item",
                answer("node", "NodeDetail"),
                404,
                params=[NODE],
            )
        },
        "/api/nodes/{node}/containers/{id}/restart": {
            "post": write(
                "ask the node's agent to restart a container (not retained)",
                "202",
                answer("command published", "Restarted"),
                400,
                404,
                params=[NODE, path_param("id", "item id <env>.<service>.<replica>", "demo.web.0")],
            )
        },
        "/api/nodes/{node}/compose": {
            "get": read(
                "the node's desired state as a docker-compose.yml (from the desired snapshot)",
                {
                    "description": "docker-compose.yml text (a YAML mapping with services:)",
                    "content": {"application/yaml": {"schema": {"type": "object", "required": ["services"]}}},
                },
                404,
                params=[
                    NODE,
                    query("download", "1 or true: answer with Content-Disposition: attachment", False),
                ],
            )
        },
        "/api/import/compose": {"post": compose_import()},
        "/api/environments": {
            "get": read("every environment: sync, placement, deploys", answer("environments", "Environments"))
        },
        "/api/environments/{env}": {
            "get": read(
                "one environment with its declared services",
                answer("environment", "EnvironmentDetail"),
                404,
                params=[path_param("env", "environment name", "demo")],
            )
        },
        "/api/topics": {
            "get": read(
                "retained topics of both planes matching an MQTT filter",
                answer("topics", "Topics"),
                400,
                params=[
                    {
                        "name": "filter",
                        "in": "query",
                        "required": False,
                        "description": "MQTT topic filter (+ one level, # the rest); default #",
                        "schema": {"type": "string", "default": "#"},
                    }
                ],
            )
        },
        "/api/kv/{topic}": {
            "get": read("one retained value", answer("value", "KvValue"), 404, params=[TOPIC]),
            "put": {
                **write(
                    "retain a JSON value",
                    "200",
                    answer("published", "KvWritten"),
                    400,
                    403,
                    408,
                    413,
                    422,
                    params=[TOPIC],
                ),
                "requestBody": kv_body,
            },
            "delete": write(
                "clear a retained value", "200", answer("cleared", "KvDeleted"), 400, 403, params=[TOPIC]
            ),
        },
        "/api/events": {
            "get": {
                "summary": "server-sent events: hello, then one change per snapshot change",
                "security": READ_SECURITY,
                "responses": {
                    "200": {
                        "description": "event stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **READ_401,
                    **errors(503),
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "liveness and what is loaded",
                "responses": {"200": answer("health", "Health")},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "this document",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.0",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    }
                },
            }
        },
        "/docs": {
            "get": {
                "summary": "Swagger UI",
                "responses": {
                    "200": {"description": "page", "content": {"text/html": {"schema": {"type": "string"}}}}
                },
            }
        },
        "/": {
            "get": {
                "summary": "the dashboard",
                "responses": {
                    "200": {"description": "page", "content": {"text/html": {"schema": {"type": "string"}}}},
                    **errors(404),
                },
            }
        },
    }


def document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Phrame topic API",
            "version": "1",
            "description": "Desired against actual state of a Phrame fleet (the mirrors' snapshots).",
        },
        "paths": paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "PHRAME_API_TOKEN"},
                "access_token": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "access_token",
                    "description": "reads only",
                },
            },
        },
    }
