"""``phrame approve ENV COMMIT [--override-freeze] [--url URL]``: approve a held commit.

Posts ``/environments/<env>/approvals`` with ``{"commit": SHA, "override_freeze": BOOL}`` to a
running config-sync, which records the token holder's approval (retained, so it survives a
restart) and deploys the commit once it has the approvals the environment needs;
``--override-freeze`` also releases it during a deploy freeze (recorded as such). URL and
token as for ``phrame promote`` (:mod:`phrame.cli.deploy_call`). Prints config-sync's
answer; exits 0 when the approval is recorded, 1 when config-sync refused it (nothing held
at that commit, wrong token or scope), 2 for usage or an unreachable config-sync. Never
changes git.
"""

from __future__ import annotations

import argparse
import re
import sys

from phrame.cli.deploy_call import add_target_arguments, call, names_ok, target

COMMIT = re.compile(r"^[0-9a-fA-F]{7,64}$")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("environment", help="the protected environment, e.g. prod")
    parser.add_argument("commit", help="the commit held for it (7+ hex digits)")
    parser.add_argument(
        "--override-freeze",
        action="store_true",
        help="release the commit during a deploy freeze too (an emergency; recorded)",
    )
    add_target_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if not names_ok("phrame approve", environment=args.environment):
        return 2
    if not COMMIT.match(args.commit):
        print(
            f"phrame approve: commit {args.commit!r} is not a commit sha (7 to 64 hex digits)",
            file=sys.stderr,
        )
        return 2
    found = target("phrame approve", args)
    if found is None:
        return 2
    base, token = found
    payload = {"commit": args.commit.lower(), "override_freeze": args.override_freeze}
    return call("phrame approve", base, token, f"/environments/{args.environment}/approvals", payload)
