"""The OpenAPI operations of the compose routes (:mod:`topic_api.compose_routes`): the
export as YAML and the import, whose 200 is a preview and whose 422 lists the problems.
Merged into the document by :mod:`topic_api.openapi.document`; data only."""

from __future__ import annotations

from typing import Any

from topic_api.openapi.parts import NODE, answer, query, read, write


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


def compose_paths() -> dict[str, Any]:
    return {
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
    }
