"""``phrame validate [PATH] [--ref REF] [--format text|json]``.

Prints every problem as ``file:line:col: rule: message``; exits 0 valid, 1 invalid,
2 usage (including a path or ref that cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys

from phrame.cli.repo_args import add_repo_args, validated_from_args


def configure(parser: argparse.ArgumentParser) -> None:
    add_repo_args(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    loaded = validated_from_args(args)
    if loaded is None:
        return 2
    repo, problems = loaded
    if args.format == "json":
        doc = {
            "valid": not problems,
            "commit": repo.commit,
            "problems": [p.to_dict() for p in problems],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        for p in problems:
            print(p.format())
        services = sum(len(e.services) for e in repo.environments.values())
        where = f" at {repo.commit[:12]}" if repo.commit else ""
        verdict = f"{len(problems)} problem(s)" if problems else "valid"
        summary = f"{args.path}{where}: {verdict}; {len(repo.nodes)} nodes, "
        summary += f"{len(repo.environments)} environments, {services} services"
        print(summary, file=sys.stderr)
    return 1 if problems else 0
