"""``phrame import-compose FILE --env NAME [--node N] [--repo PATH] [--force]``.

Writes the phrame-config files of a compose file into a config repo checkout, prints what it
wrote and what compose features have no equivalent, then validates the repo as ``phrame
validate`` does. Never overwrites a different file without ``--force``; an existing
``environment.yaml`` is always kept (the environment's own settings win).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phrame.cli.repo_args import open_source
from phrame.compose import ComposeError, import_compose
from phrame.config_repo import ConfigError, load, validate


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the compose file ('-' reads standard input)")
    parser.add_argument("--env", required=True, help="environment to write into (environments/NAME/)")
    parser.add_argument("--node", help="pin every service to this node (else placement chooses)")
    parser.add_argument("--repo", default=".", help="config repo checkout to write into (default: .)")
    parser.add_argument("--force", action="store_true", help="overwrite files that differ")


def _read(file: str) -> str:
    return sys.stdin.read() if file == "-" else Path(file).read_text("utf-8")


def _plan(repo: Path, files: dict[str, str], force: bool) -> tuple[dict[str, str], list[str], list[str]]:
    """(files to write, kept or unchanged lines, conflicts)."""
    write, kept, conflicts = {}, [], []
    for rel, text in files.items():
        path = repo / rel
        old = path.read_text("utf-8") if path.is_file() else None
        if old is None:
            write[rel] = text
        elif rel.endswith("/environment.yaml"):
            kept.append(f"kept {rel} (exists)")
        elif old == text:
            kept.append(f"unchanged {rel}")
        elif force:
            write[rel] = text
        else:
            conflicts.append(rel)
    return write, kept, conflicts


def run(args: argparse.Namespace) -> int:
    name = "phrame import-compose"
    try:
        text = _read(args.file)
        result = import_compose(text, env=args.env, node=args.node)
    except ComposeError as e:
        print(f"{name}: {args.file}:{e.line}:{e.column}: {e.message}", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"{name}: {args.file}: {e}", file=sys.stderr)
        return 2
    repo = Path(args.repo)
    if not repo.is_dir():
        print(f"{name}: {args.repo}: no such directory", file=sys.stderr)
        return 2
    write, kept, conflicts = _plan(repo, result.files, args.force)
    if conflicts:
        for rel in conflicts:
            print(f"{name}: {rel} exists and differs; nothing written (--force overwrites)", file=sys.stderr)
        return 1
    for rel, body in write.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(body, "utf-8")
        print(f"wrote {rel}")
    for line in kept:
        print(line)
    print(f"unsupported ({len(result.unsupported)}):" if result.unsupported else "unsupported: none")
    for u in result.unsupported:
        print(f"  {u.format()}")
    # kept, but each gives a service power over its host: a node's policy may refuse it
    print(f"dangerous, kept ({len(result.dangerous)}):" if result.dangerous else "dangerous: none")
    for d in result.dangerous:
        print(f"  {d.format()}")
    return _validate(repo)


def _validate(repo: Path) -> int:
    try:
        loaded, read_problems = load(open_source(str(repo), None))
    except ConfigError as e:
        print(f"validate: {e}", file=sys.stderr)
        return 1
    problems = validate(loaded, read_problems)
    for p in problems:
        print(p.format())
    print(f"validate: {len(problems)} problem(s)" if problems else "validate: valid")
    return 1 if problems else 0
