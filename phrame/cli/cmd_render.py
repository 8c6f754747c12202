"""``phrame render [PATH] [--ref REF] [--node N] [--format documents|topics]``.

Prints each node's desired state exactly as config-sync publishes it for that tree:
``documents`` groups items and manifest per node; ``topics`` maps every desired-plane
topic to its payload. A fresh rendering has generation 1; config-sync continues the
generation it finds on the broker. An invalid repo prints its problems and exits 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from phrame.cli.repo_args import add_prefix_arg, add_repo_args, valid_repo_from_args
from phrame.config_repo import render
from schemas import Topics


def configure(parser: argparse.ArgumentParser) -> None:
    add_repo_args(parser)
    parser.add_argument("--node", help="only this node's documents")
    parser.add_argument("--format", choices=("documents", "topics"), default="documents")
    add_prefix_arg(parser)


def run(args: argparse.Namespace) -> int:
    repo = valid_repo_from_args(args, node=args.node, refusal="rendered")
    if isinstance(repo, int):
        return repo
    rendered = render(repo)
    out: Any
    if args.format == "topics":
        topics = Topics(args.prefix)
        out = rendered.topics(topics)
        if args.node is not None:
            node_prefix = topics.desired_node(args.node) + "/"
            out = {t: p for t, p in out.items() if t.startswith(node_prefix)}
    else:
        nodes = {
            n: {"manifest": nd.manifest, "items": nd.items}
            for n, nd in rendered.nodes.items()
            if args.node in (None, n)
        }
        out = {"commit": rendered.commit, "nodes": nodes, "unassigned": rendered.unassigned}
    print(json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False))
    return 0
