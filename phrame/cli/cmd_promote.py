"""``phrame promote ENV SERVICE [--url URL]``: release a staged rollout past its canary wave.

Posts ``/rollouts/<env>/<service>/promote`` to a running config-sync with the webhook
secret as a bearer token (``--token-file FILE``, ``--token -`` for stdin, else
``PHRAME_WEBHOOK_SECRET`` or ``_FILE``, else a dev stack's own when the URL is its config-sync).
Without ``--url`` or ``PHRAME_LISTEN`` it goes to a dev stack's config-sync (its ``stack.json``).
Prints config-sync's answer (and, on a 401, where the token comes from); exits 0 when the
promotion is queued, 1 when config-sync refused it (no such rollout waiting, wrong token), 2
for usage or an unreachable config-sync. Never changes git.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from phrame.cli.dev_target import NoDevStack, config_sync
from phrame.cli.http_post import post
from phrame.settings import EnvReader

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("environment", help="the environment, e.g. studio-a")
    parser.add_argument("service", help="the service whose rollout waits for a promotion")
    parser.add_argument(
        "--url",
        help="config-sync's base URL (default http://$PHRAME_LISTEN, else a dev stack's from "
        "its stack.json, else http://127.0.0.1:8080)",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument(
        "--token-file", metavar="FILE", help="read the bearer token (the webhook secret) from FILE"
    )
    given.add_argument("--token", choices=["-"], help="'-': read the token from stdin")


def _token(args: argparse.Namespace, dev_secret: Path | None) -> str | None:
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            return f.readline().strip() or None
    if args.token == "-":
        return sys.stdin.readline().strip() or None
    token = EnvReader().secret("PHRAME_WEBHOOK_SECRET")
    if token is None and dev_secret is not None:  # the dev stack's config-sync: its secret
        token = dev_secret.read_text().strip() or None
    return token


def run(args: argparse.Namespace) -> int:
    for what, value in (("environment", args.environment), ("service", args.service)):
        if not NAME.match(value):
            print(f"phrame promote: {what} {value!r} is not a name ({NAME.pattern})", file=sys.stderr)
            return 2
    try:
        base, dev_secret = config_sync(args.url)
        token = _token(args, dev_secret)
    except NoDevStack as e:
        print(f"phrame promote: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = "--token-file: " if args.token_file else ""
        print(f"phrame promote: {where}cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    url = f"{base}/rollouts/{args.environment}/{args.service}/promote"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = post("phrame promote", url, b"", headers)
    if answer is None:
        return 2
    code, text = answer
    print(f"{code} {text}")
    if code == 401:
        given = "the token given is not config-sync's" if token else "no token was given"
        print(
            f"phrame promote: {given}: pass its webhook secret with --token-file FILE (the dev stack's:"
            " .phrame-dev/webhook-secret), --token - (stdin) or PHRAME_WEBHOOK_SECRET",
            file=sys.stderr,
        )
    return 0 if 200 <= code < 300 else 1
