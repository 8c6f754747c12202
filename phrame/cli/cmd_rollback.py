"""``phrame rollback ENV [--to COMMIT] [--merge] [--url URL]``: roll an environment back as a revert commit.

Posts ``/environments/<env>/rollback`` with ``{"to": SHA | null, "merge": bool}`` to a running
config-sync, which writes one new commit on the branch the environment tracks whose
``environments/<env>/`` is the folder as at ``--to`` (default: the environment's previous
successful deployment): pushed with the local git host, a merge request with GitLab
(``--merge``: merged when GitLab allows). URL and token as ``phrame promote`` takes them
(:mod:`phrame.cli.deploy_call`; a ``deploy`` token). Prints config-sync's answer; exits 0
when the commit is made, 1 when config-sync refused (nothing to roll back, not an ancestor,
a tag, wrong token or scope), 2 for usage or an unreachable config-sync.
"""

from __future__ import annotations

import argparse
import re
import sys

from phrame.cli.deploy_call import add_target_arguments, call, names_ok, target

SHA = re.compile(r"^[0-9a-f]{7,40}$")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("environment", help="the environment, e.g. studio-a")
    parser.add_argument(
        "--to",
        metavar="COMMIT",
        help="the commit whose environments/<env>/ to go back to (7+ hex digits); "
        "default: the environment's previous successful deployment",
    )
    parser.add_argument(
        "--merge", action="store_true", help="GitLab: merge the rollback's merge request when GitLab allows"
    )
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if not names_ok("phrame rollback", environment=args.environment):
        return 2
    if args.to is not None and not SHA.match(args.to):
        print(f"phrame rollback: --to {args.to!r} is not a commit sha (7 to 40 hex digits)", file=sys.stderr)
        return 2
    found = target("phrame rollback", args)
    if found is None:
        return 2
    base, token = found
    payload = {"to": args.to, "merge": bool(args.merge)}
    # a rollback fetches and pushes: give it git's time, not a status call's
    return call(
        "phrame rollback", base, token, f"/environments/{args.environment}/rollback", payload, timeout=150
    )
