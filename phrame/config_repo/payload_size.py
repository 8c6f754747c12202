"""The ``payload-too-large`` rule: a rendered item or manifest no agent would accept.

Called by ``validate`` once the schemas and the other rules passed (render needs their
guarantees). Agents refuse a desired payload over ``PHRAME_MAX_PAYLOAD_BYTES`` (default
1 MiB) as invalid, so a commit that renders one must fail validation, at the service (or
node) that makes it so. Anchors and aliases, and the environment's defaults merged into
every container, let files of a few KiB render to more. Pure: never raises for content.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from phrame.config_repo.cache import ReadCache
from phrame.config_repo.model import ConfigRepo, Document
from phrame.config_repo.problems import Problem
from phrame.config_repo.render import render_checked
from schemas import canonical_json
from schemas.registry import pointer

# the node agent's default PHRAME_MAX_PAYLOAD_BYTES (node_agent/settings.py)
MAX_PAYLOAD_BYTES = 1024 * 1024
_COMMIT = "0" * 40  # payloads carry a full commit sha: measure with one


def _largest_field(doc: Document) -> str | None:
    data = doc.data if isinstance(doc.data, dict) else {}
    sizes = {k: len(json.dumps(v, ensure_ascii=False)) for k, v in data.items()}
    return max(sizes, key=lambda k: sizes[k]) if sizes else None


def _at(doc: Document, path: list[Any], message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, "payload-too-large", message, pointer(path))


def payload_problems(
    repo: ConfigRepo, limit: int = MAX_PAYLOAD_BYTES, cache: ReadCache | None = None
) -> Iterator[Problem]:
    sha = repo.commit or _COMMIT
    rendered = render_checked(repo, sha, cache)
    repo.rendered = (sha, rendered)
    reported: set[tuple[str, str]] = set()
    sizes = rendered.sizes
    for name, node in sorted(rendered.nodes.items()):
        for key, payload in node.items.items():
            size = sizes[(name, key)]
            if size <= limit:
                continue
            env, service = payload["environment"], payload.get("service")
            if service is None or (env, service) in reported:
                continue  # a network is small: its fields are few and short
            reported.add((env, service))
            doc = repo.environments[env].services[service]
            biggest = _largest_field(doc)
            kind = key.split("/", 1)[0].removesuffix("es").removesuffix("s")
            msg = (
                f"{kind} {payload['name']} for node {name} renders to {size} bytes; agents refuse "
                f"payloads over {limit} bytes (the default PHRAME_MAX_PAYLOAD_BYTES)"
            )
            if biggest is not None:
                msg += f"; its largest part is {biggest!r} (with the environment's defaults merged)"
            yield _at(doc, [biggest] if biggest else [], msg)
        size = _manifest_size(node.manifest, limit)
        if size > limit and name in repo.nodes:
            msg = (
                f"the manifest of node {name} renders to {size} bytes ({len(node.items)} items); "
                f"agents refuse payloads over {limit} bytes (the default PHRAME_MAX_PAYLOAD_BYTES): "
                "run fewer replicas on this node"
            )
            yield _at(repo.nodes[name], ["name"], msg)


def _manifest_size(manifest: dict[str, Any], limit: int) -> int:
    """The size of ``manifest``'s canonical JSON, or a bound of it when that is within
    ``limit``: a character takes at most 6 bytes in JSON (``\\uXXXX``), and an entry adds
    4 quotes, a colon and a comma (every manifest of the fleet was encoded on each commit
    only to be measured)."""
    text = sum(len(k) + len(str(v)) for k, v in manifest["items"].items()) + len(str(manifest.get("commit")))
    bound = 6 * text + 6 * len(manifest["items"]) + 200
    return bound if bound <= limit else len(canonical_json(manifest))
