"""``phrame token new NAME --scopes deploy`` and ``phrame token hash``: entries of the tokens file.

``new`` prints a fresh random token once (on stdout, for its holder) and, on stderr, the
entry to add to ``PHRAME_TOKENS_FILE`` (its SHA-256 only: the file never holds a token).
``hash`` reads one token from stdin and prints its SHA-256 as the file stores it. Exit 2
for usage (a bad name or scope, nothing on stdin). Writes no file.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys

from phrame.auth import SCOPES, hash_token
from phrame.auth.tokens import NAME


def configure(parser: argparse.ArgumentParser) -> None:
    subs = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = subs.add_parser("new", help="print a new token and its tokens-file entry")
    new.add_argument("name", help="who holds it: a person or a tool (e.g. alice, ci-deploy)")
    new.add_argument(
        "--scopes", default="read", help=f"comma-separated, of {', '.join(SCOPES)} (default read)"
    )
    subs.add_parser("hash", help="read a token on stdin, print its SHA-256 as the tokens file stores it")


def run(args: argparse.Namespace) -> int:
    if args.action == "hash":
        token = sys.stdin.readline().strip()
        if not token:
            print("phrame token hash: no token on stdin", file=sys.stderr)
            return 2
        print(hash_token(token))
        return 0
    if not NAME.match(args.name):
        print(f"phrame token new: name {args.name!r} is not a name ({NAME.pattern})", file=sys.stderr)
        return 2
    scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
    unknown = [s for s in scopes if s not in SCOPES]
    if not scopes or unknown:
        print(
            f"phrame token new: --scopes {args.scopes!r}: each must be one of {', '.join(SCOPES)}",
            file=sys.stderr,
        )
        return 2
    token = secrets.token_urlsafe(32)
    entry = {"name": args.name, "scopes": scopes, "sha256": hash_token(token)}
    print(token)
    print(f"# give the token above to {args.name} (shown once); add to PHRAME_TOKENS_FILE:", file=sys.stderr)
    print(f"- {json.dumps(entry)}", file=sys.stderr)
    return 0
