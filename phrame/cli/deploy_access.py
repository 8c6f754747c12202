"""Where a deploy command (``phrame promote``, ``phrame approve``) posts, and with which token.

The options ``--url``, ``--token-file FILE`` and ``--token -`` (:func:`add_target_args`);
the base URL and the bearer token (:func:`target`): ``--token-file``, stdin, else
``PHRAME_TOKEN`` or ``_FILE`` (a ``deploy`` token of the tokens file), else
``PHRAME_WEBHOOK_SECRET`` or ``_FILE`` (honoured only where config-sync has no tokens file),
else a dev stack's own secret when the URL is its config-sync; the hint printed on a 401
(:func:`unauthorized`). Never sends the dev stack's secret to another server.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phrame.cli.dev_target import config_sync
from phrame.settings import EnvReader, SettingsError


def add_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help="config-sync's base URL (default http://$PHRAME_LISTEN, else a dev stack's from "
        "its stack.json, else http://127.0.0.1:8080)",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--token-file", metavar="FILE", help="read the bearer token from FILE")
    given.add_argument("--token", choices=["-"], help="'-': read the token from stdin")


def token(args: argparse.Namespace, dev_secret: Path | None) -> str | None:
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            return f.readline().strip() or None
    if args.token == "-":
        return sys.stdin.readline().strip() or None
    reader = EnvReader(error=SettingsError)
    found = reader.secret("PHRAME_TOKEN") or reader.secret("PHRAME_WEBHOOK_SECRET")
    if found is None and dev_secret is not None:  # the dev stack's config-sync: its secret
        found = dev_secret.read_text().strip() or None
    return found


def target(args: argparse.Namespace) -> tuple[str, str | None]:
    """(config-sync's base URL, the bearer token or None). Raises ``NoDevStack``,
    ``OSError`` (a token file) or ``SettingsError``: :func:`run_target` words them."""
    base, dev_secret = config_sync(args.url)
    return base, token(args, dev_secret)


def unauthorized(command: str, token_given: bool) -> None:
    """What to do after a 401, on stderr."""
    given = "the token given is not config-sync's" if token_given else "no token was given"
    print(
        f"{command}: {given}: pass a deploy token with --token-file FILE, --token - (stdin) or"
        " PHRAME_TOKEN; without a tokens file, config-sync takes its webhook secret (the dev stack's:"
        " .phrame-dev/webhook-secret, or PHRAME_WEBHOOK_SECRET)",
        file=sys.stderr,
    )
