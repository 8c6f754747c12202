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
import json
import re
import sys

from phrame.cli.deploy_call import add_target_arguments, explain_401, target
from phrame.cli.http_post import post

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
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
    if not NAME.match(args.environment):
        print(
            f"phrame approve: environment {args.environment!r} is not a name ({NAME.pattern})",
            file=sys.stderr,
        )
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
    url = f"{base}/environments/{args.environment}/approvals"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = json.dumps({"commit": args.commit.lower(), "override_freeze": args.override_freeze}).encode()
    answer = post("phrame approve", url, body, {**headers, "Content-Type": "application/json"})
    if answer is None:
        return 2
    code, text = answer
    print(f"{code} {text}")
    if code == 401:
        explain_401("phrame approve", token)
    return 0 if 200 <= code < 300 else 1
