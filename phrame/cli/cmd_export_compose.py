"""``phrame export-compose --node N [--repo PATH] [--ref REF] [--out FILE]``.

Renders the config repo as ``phrame render --format topics`` does and prints node N's
desired containers and networks as a docker-compose.yml (``phrame.compose.export_node``).
Secrets stay references; an invalid repo prints its problems and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phrame.cli.repo_args import add_prefix_arg, valid_repo_from_args
from phrame.compose import export_node
from phrame.config_repo import render
from schemas import Topics


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", required=True, help="the node whose desired state to export")
    parser.add_argument(
        "--repo", dest="path", default=".", help="config repo: a directory or a git repository"
    )
    parser.add_argument("--ref", help="read this git ref (branch, tag, sha) instead of the files on disk")
    parser.add_argument("--out", help="write the file here instead of standard output")
    add_prefix_arg(parser)


def run(args: argparse.Namespace) -> int:
    name = "phrame export-compose"
    repo = valid_repo_from_args(args, node=args.node, refusal="exported")
    if isinstance(repo, int):
        return repo
    text = export_node(render(repo).topics(Topics(args.prefix)), args.node, prefix=args.prefix)
    if args.out:
        try:
            Path(args.out).write_text(text, "utf-8")
        except OSError as e:
            print(f"{name}: {args.out}: {e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0
