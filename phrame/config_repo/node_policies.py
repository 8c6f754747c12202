"""Review-time check of a rendering against the policies the nodes' agents report.

``phrame validate --policy-from-broker`` calls :func:`policy_problems` with the policies read
from the nodes' retained statuses; each item a node's policy refuses becomes a problem at the
line of its service file that asks for it. The agent refuses the same items (the same check,
``schemas.node_policy``): this only says so before the merge. Pure: no broker, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from phrame.config_repo.model import ConfigRepo
from phrame.config_repo.problems import Problem
from phrame.config_repo.render import Rendered
from phrame.config_repo.rules import at
from schemas import PayloadError, check_payload
from schemas.node_policy import NodePolicy, violations

RULE = "node-policy"


def policies_from_statuses(statuses: Mapping[str, Any]) -> tuple[dict[str, NodePolicy], list[str]]:
    """Each node's policy from its status (node -> payload bytes, or the parsed document);
    and notes on the nodes whose status says none (an agent from before the node policy, or
    an unreadable status)."""
    out: dict[str, NodePolicy] = {}
    notes: list[str] = []
    for node, payload in sorted(statuses.items()):
        try:
            doc = json.loads(payload) if isinstance(payload, bytes | str) else payload
            check_payload("actual-status", doc)
        except (ValueError, PayloadError) as e:
            notes.append(f"node {node}: its status is unreadable ({e}); not checked")
            continue
        if not isinstance(doc.get("policy"), dict):
            notes.append(f"node {node}: its status reports no policy (an older agent); not checked")
            continue
        out[node] = NodePolicy.from_doc(doc["policy"])
    return out, notes


def policy_problems(
    repo: ConfigRepo, rendered: Rendered, policies: Mapping[str, NodePolicy]
) -> list[Problem]:
    """A problem per item that a node's reported policy refuses, at its service file's line."""
    problems: list[Problem] = []
    for node, desired in sorted(rendered.nodes.items()):
        policy = policies.get(node)
        if policy is None:
            continue
        for spec in desired.items.values():
            if spec.get("kind") not in ("container", "process"):
                continue
            doc = repo.environments[spec["environment"]].services[spec["service"]]
            for v in violations(spec, policy):
                message = f"{spec['name']}: {v.text}; not allowed on node {node} by {policy.source}"
                problems.append(at(doc, list(v.path), RULE, message))
    return problems
