"""The OpenAPI 3.0 document of the topic API (``/openapi.json``), written as data.

Served by :mod:`topic_api.app`, rendered by Swagger UI at ``/docs`` and checked against the
running API by schemathesis (tests/integration/test_topic_api_schema.py): every route,
parameter and answer shape is here. Change a route and this file together.
"""

from __future__ import annotations

from typing import Any

from topic_api.openapi.compose import compose_paths
from topic_api.openapi.parts import (
    NODE,
    READ_401,
    READ_SECURITY,
    TOPIC,
    answer,
    errors,
    path_param,
    read,
    write,
)
from topic_api.openapi.shapes import SCHEMAS


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
        **compose_paths(),
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
