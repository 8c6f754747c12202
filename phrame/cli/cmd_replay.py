"""``phrame replay EVENT.json [--url URL]``: post a recorded GitLab delivery to config-sync.

EVENT.json is ``{"headers": {...}, "body": {...}}`` (see fixtures/webhooks). The token
sent is ``--token-file FILE`` or ``--token -`` (stdin), else ``--token`` (warned about:
other users see argv), else ``PHRAME_WEBHOOK_SECRET`` (or ``_FILE``), else a dev stack's
when the URL is its config-sync, else the file's. Without ``--url`` or ``PHRAME_LISTEN`` it
posts to a dev stack's config-sync (its ``stack.json``).
``--new-key`` gives the delivery a fresh ``Idempotency-Key`` so config-sync does not drop
it as a replay. Exits 0 for a 2xx answer, 1 for another answer, 2 when the file, the token
or the server is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from phrame.cli.dev_target import config_sync, dev_stack, secret_for
from phrame.cli.http_post import post
from phrame.settings import EnvReader


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", help="recorded delivery: {headers, body} JSON")
    parser.add_argument(
        "--url",
        help="webhook URL (default http://$PHRAME_LISTEN/webhooks/gitlab, else a dev stack's "
        "config-sync from its stack.json, else http://127.0.0.1:8080/webhooks/gitlab)",
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--token-file", metavar="FILE", help="read the X-Gitlab-Token to send from FILE")
    given.add_argument(
        "--token",
        help="X-Gitlab-Token to send; '-' reads it from stdin. A literal token is visible to other"
        " users in the process list: prefer --token-file or '-' (default PHRAME_WEBHOOK_SECRET or"
        " _FILE, else the recording's)",
    )
    parser.add_argument("--new-key", action="store_true", help="send a fresh Idempotency-Key")


def _token(args: argparse.Namespace, dev_secret: Path | None) -> str | None:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as e:
            raise OSError(f"--token-file: cannot read {args.token_file}: {e.strerror}") from e
        if not token:
            raise ValueError(f"--token-file: {args.token_file} is empty")
        return token
    if args.token == "-":
        token = sys.stdin.readline().strip()
        if not token:
            raise ValueError("--token -: no token on stdin")
        return token
    if args.token:
        print(
            "phrame replay: warning: --token TOKEN is visible to other users of this host;"
            " use --token-file FILE or --token - (stdin)",
            file=sys.stderr,
        )
        return str(args.token)
    # the same secret config-sync checks, from PHRAME_WEBHOOK_SECRET or its _FILE, else the
    # dev stack's own when the URL is its config-sync (else the recording's token is sent)
    from_env = EnvReader().secret("PHRAME_WEBHOOK_SECRET")
    if from_env is None and dev_secret is not None:
        return dev_secret.read_text().strip() or None
    return from_env


def run(args: argparse.Namespace) -> int:
    try:
        with open(args.event, encoding="utf-8") as f:
            doc = json.load(f)
        headers = {str(k): str(v) for k, v in doc["headers"].items()}
        body = json.dumps(doc["body"]).encode()
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"phrame replay: {args.event}: not a recorded delivery ({e})", file=sys.stderr)
        return 2
    try:
        url = args.url or f"{config_sync(None)[0]}/webhooks/gitlab"
        token = _token(args, secret_for(url, dev_stack()))
    except (OSError, ValueError) as e:  # NoDevStack too
        print(f"phrame replay: {e}", file=sys.stderr)
        return 2
    if token:
        headers["X-Gitlab-Token"] = token
    if args.new_key:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    headers["Content-Type"] = "application/json"
    answer = post("phrame replay", url, body, headers)
    if answer is None:
        return 2
    code, text = answer
    print(f"{code} {text}")
    return 0 if 200 <= code < 300 else 1
