"""What ``phrame promote``, ``approve`` and ``rollback`` share: where config-sync is, the token, the call.

The base URL: ``--url``, else ``http://$PHRAME_LISTEN``, else a dev stack's config-sync (its
``stack.json``). The token: ``--token-file FILE``, ``--token -`` for stdin, else
``PHRAME_TOKEN`` or ``_FILE`` (a ``deploy`` token of the tokens file), else
``PHRAME_WEBHOOK_SECRET`` or ``_FILE`` (honoured only where config-sync has no tokens file),
else a dev stack's own secret when the URL is its config-sync. Never changes git itself.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from phrame.cli.dev_target import NoDevStack, config_sync
from phrame.cli.http_post import post
from phrame.settings import EnvReader, SettingsError

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


def names_ok(command: str, **values: str) -> bool:
    """True when every value is a name (environment, service); else ``command: why`` on stderr."""
    for what, value in values.items():
        if not NAME.match(value):
            print(f"{command}: {what} {value!r} is not a name ({NAME.pattern})", file=sys.stderr)
            return False
    return True


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url``, ``--token-file`` and ``--token -``."""
    parser.add_argument(
        "--url",
        help="config-sync's base URL (default http://$PHRAME_LISTEN, else a dev stack's from "
        "its stack.json, else http://127.0.0.1:8080)",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--token-file", metavar="FILE", help="read the bearer token from FILE")
    given.add_argument("--token", choices=["-"], help="'-': read the token from stdin")


def _token(args: argparse.Namespace, dev_secret: Path | None) -> str | None:
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            return f.readline().strip() or None
    if args.token == "-":
        return sys.stdin.readline().strip() or None
    reader = EnvReader(error=SettingsError)
    token = reader.secret("PHRAME_TOKEN") or reader.secret("PHRAME_WEBHOOK_SECRET")
    if token is None and dev_secret is not None:  # the dev stack's config-sync: its secret
        token = dev_secret.read_text().strip() or None
    return token


def target(command: str, args: argparse.Namespace) -> tuple[str, str | None] | None:
    """``(base URL, token)``, or None after ``command: why`` on stderr (exit 2)."""
    try:
        base, dev_secret = config_sync(args.url)
        return base, _token(args, dev_secret)
    except NoDevStack as e:
        print(f"{command}: {e}", file=sys.stderr)
    except OSError as e:
        where = "--token-file: " if args.token_file else ""
        print(f"{command}: {where}cannot read {e.filename}: {e.strerror}", file=sys.stderr)
    except SettingsError as e:
        print(f"{command}: {e}", file=sys.stderr)
    return None


def explain_401(command: str, token: str | None) -> None:
    given = "the token given is not config-sync's" if token else "no token was given"
    print(
        f"{command}: {given}: pass a deploy token with --token-file FILE, --token - (stdin) or"
        " PHRAME_TOKEN; without a tokens file, config-sync takes its webhook secret (the dev stack's:"
        " .phrame-dev/webhook-secret, or PHRAME_WEBHOOK_SECRET)",
        file=sys.stderr,
    )


def call(
    command: str,
    base: str,
    token: str | None,
    path: str,
    payload: dict[str, Any] | None,
    *,
    timeout: float = 10,
) -> int:
    """POST ``payload`` as JSON to ``base + path`` with the token; print the answer; the exit code.

    0 for a 2xx answer, 1 for a refusal (with the 401 hint), 2 when config-sync cannot be reached.
    """
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps(payload).encode() if payload is not None else b""
    answer = post(command, f"{base}{path}", body, headers, timeout=timeout)
    if answer is None:
        return 2
    code, text = answer
    print(f"{code} {text}")
    if code == 401:
        explain_401(command, token)
    return 0 if 200 <= code < 300 else 1
