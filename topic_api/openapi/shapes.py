"""The response shapes of the OpenAPI document (``components.schemas``), as data.

Used by :mod:`topic_api.openapi.document` only. They describe what :mod:`topic_api.nodes`,
:mod:`topic_api.drift` and :mod:`topic_api.environments` return (docs/api.md); a test
validates live answers against them (schemathesis), so they must stay exact.
"""

from __future__ import annotations

from typing import Any

ANY: dict[str, Any] = {}  # a payload: any JSON value
NUM_OR_NULL = {"type": "number", "nullable": True}
INT_OR_NULL = {"type": "integer", "nullable": True}
STR_OR_NULL = {"type": "string", "nullable": True}
OBJ_OR_NULL = {"type": "object", "nullable": True, "additionalProperties": True}


def obj(props: dict[str, Any], *, required: list[str] | None = None, extra: bool = False) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(props) if required is None else required,
        "properties": props,
        "additionalProperties": extra,
    }


PLANE_STAMPS = obj({"desired": NUM_OR_NULL, "actual": NUM_OR_NULL})
HOST_FIELDS = ("cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used")
HOST = {**obj({k: NUM_OR_NULL for k in HOST_FIELDS}), "nullable": True}
HISTORY_ENTRY = obj(
    {
        "ts": {"type": "number", "description": "the heartbeat's own ts (the node's clock)"},
        "at": {"type": "number", "description": "when this API received it (its own clock)"},
        **{k: NUM_OR_NULL for k in ("cpu_percent", "mem_used", "mem_total", "disk_used", "disk_total")},
    }
)
NODE_SUMMARY_PROPS: dict[str, Any] = {
    "node": {"type": "string"},
    "state": {"type": "string", "enum": ["online", "offline", "unknown"]},
    "online": {"type": "boolean"},
    "reason": {"type": "string", "description": "why the state (judge_node)"},
    "heartbeat_age_s": NUM_OR_NULL,
    "host": HOST,
    "converged": {"type": "boolean", "nullable": True},
    "generation": obj({"desired": INT_OR_NULL, "applied": INT_OR_NULL}),
    "commit": obj({"desired": STR_OR_NULL, "applied": STR_OR_NULL}),
    "drift": {"type": "integer", "minimum": 0, "description": "items not in-sync"},
    "recent_exits": {
        "type": "integer",
        "minimum": 0,
        "description": "containers running again after an exit within PHRAME_API_RECENT_EXIT_S",
    },
    "errors": {"type": "array", "items": {"type": "string"}},
    "counts": obj({k: {"type": "integer", "minimum": 0} for k in ("containers", "networks", "processes")}),
    "history": {"type": "array", "items": {"$ref": "#/components/schemas/HistoryEntry"}},
}
ITEM = obj(
    {
        "kind": {"type": "string", "enum": ["containers", "networks", "processes"]},
        "id": {"type": "string"},
        "environment": {"type": "string"},
        "service": STR_OR_NULL,
        "status": {"type": "string", "enum": ["in-sync", "drift", "missing", "extra", "failed", "pending"]},
        "desired": {"nullable": True},
        "actual": {"nullable": True},
        "differences": {
            "type": "array",
            "items": obj(
                {"field": {"type": "string"}, "desired": {"nullable": True}, "actual": {"nullable": True}}
            ),
        },
        "commit": {"nullable": True},
        "health": {"nullable": True},
        "recent_exit": {
            **obj(
                {
                    "exit_code": {**INT_OR_NULL, "description": "null: the agent did not see this exit"},
                    "finished_at": {"type": "string", "description": "Docker's FinishedAt (RFC 3339)"},
                    "age_s": {"type": "number", "minimum": 0},
                    "restarted_by": {**STR_OR_NULL, "description": "agent, or null: not started by it"},
                }
            ),
            "nullable": True,
            "description": "running again, but exited within PHRAME_API_RECENT_EXIT_S (status stays in-sync)",
        },
    }
)
ENV_ERROR = obj(
    {
        "file": {"nullable": True},
        "line": {"nullable": True},
        "rule": {"nullable": True},
        "message": {"type": "string"},
    },
    required=["file", "line", "rule", "message"],
    extra=True,
)
ENV_PROPS: dict[str, Any] = {
    "environment": {"type": "string"},
    "sync": OBJ_OR_NULL,
    "ok": {"type": "boolean", "nullable": True},
    "commit": STR_OR_NULL,
    "errors": {"type": "array", "items": {"$ref": "#/components/schemas/EnvError"}},
    "placement": OBJ_OR_NULL,
    "deploys": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
    "rollouts": {
        "type": "object",
        "description": "service -> its staged rollout (schemas/json/desired-rollout.schema.json)",
        "additionalProperties": {"type": "object", "additionalProperties": True},
    },
}

ENV_REQUIRED = [k for k in ENV_PROPS if k != "rollouts"]  # rollouts: only when there is one

PROBLEM = obj(
    {
        "file": {"type": "string"},
        "line": {"type": "integer"},
        "column": {"type": "integer"},
        "rule": {"type": "string"},
        "message": {"type": "string"},
        "path": {"type": "string"},
    }
)
COMPOSE_IMPORT = obj(
    {
        "environment": {"type": "string"},
        "node": STR_OR_NULL,
        "files": {
            "type": "object",
            "description": "repo-relative path -> YAML text: what the branch carries (or would)",
            "additionalProperties": {"type": "string"},
        },
        "kept": {
            "type": "array",
            "description": "files left as the tracked head has them (an existing environment.yaml)",
            "items": {"type": "string"},
        },
        "unsupported": {
            "type": "array",
            "items": obj(
                {"service": {"type": "string"}, "key": {"type": "string"}, "reason": {"type": "string"}}
            ),
        },
        "validation": obj(
            {
                "valid": {"type": "boolean"},
                "scope": {"type": "string", "enum": ["repository", "files"]},
                "base": STR_OR_NULL,
                "existing_problems": {"type": "integer", "minimum": 0},
            }
        ),
        "dry_run": {"type": "boolean"},
        "branch": STR_OR_NULL,
        "commit": STR_OR_NULL,
        "merge_request": {
            **obj({"iid": {"type": "integer"}, "web_url": {"type": "string"}}),
            "nullable": True,
        },
    }
)

SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": {"type": "string"}}),
    "PlaneStamps": PLANE_STAMPS,
    "HistoryEntry": HISTORY_ENTRY,
    "NodeSummary": obj(NODE_SUMMARY_PROPS),
    "NodeDetail": obj(
        {**NODE_SUMMARY_PROPS, "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}}
    ),
    "Item": ITEM,
    "Nodes": obj(
        {
            "generated_at": {"$ref": "#/components/schemas/PlaneStamps"},
            "nodes": {"type": "array", "items": {"$ref": "#/components/schemas/NodeSummary"}},
        }
    ),
    "EnvError": ENV_ERROR,
    "Environment": obj(ENV_PROPS, required=ENV_REQUIRED),
    "EnvironmentDetail": obj(
        {**ENV_PROPS, "services": {"type": "object", "additionalProperties": True}},
        required=[*ENV_REQUIRED, "services"],
    ),
    "Environments": obj(
        {"environments": {"type": "array", "items": {"$ref": "#/components/schemas/Environment"}}}
    ),
    "Topics": obj(
        {
            "filter": {"type": "string"},
            "count": {"type": "integer", "minimum": 0},
            "topics": {"type": "object", "additionalProperties": True},
        }
    ),
    "KvValue": obj(
        {"topic": {"type": "string"}, "payload": {"nullable": True}, "source": {"type": "string"}}
    ),
    "KvWritten": obj(
        {"topic": {"type": "string"}, "retained": {"type": "boolean"}, "bytes": {"type": "integer"}}
    ),
    "KvDeleted": obj({"topic": {"type": "string"}, "deleted": {"type": "boolean"}}),
    "Restarted": obj({"topic": {"type": "string"}}),
    "Problem": PROBLEM,
    "ComposeImport": COMPOSE_IMPORT,
    "ImportInvalid": obj(
        {
            "error": {"type": "string"},
            "problems": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}},
        }
    ),
    "Health": obj(
        {
            "status": {"type": "string"},
            "snapshots": obj({"desired": {"type": "boolean"}, "actual": {"type": "boolean"}}),
            "broker": {"type": "boolean"},
            "streams": {"type": "integer"},
        }
    ),
}
