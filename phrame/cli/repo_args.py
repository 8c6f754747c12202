"""The ``PATH [--ref REF]`` and ``--prefix`` arguments shared by sub-commands that read a config repo."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from phrame.config_repo import ConfigError, ConfigRepo, Problem, load, validate
from phrame.config_repo.sources import DirectorySource, GitSource, Source
from phrame.settings import EnvReader


def add_repo_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="config repo: a directory or a git repository")
    parser.add_argument("--ref", help="read this git ref (branch, tag, sha) instead of the files on disk")


def add_prefix_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prefix",
        default=EnvReader().topic_prefix(),
        help="topic prefix (default PHRAME_TOPIC_PREFIX or phrame)",
    )


def _is_bare(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and not (path / ".git").exists()


def open_source(path: str, ref: str | None) -> Source:
    """The repo at ``path`` (at ``ref``). Raises :class:`ConfigError` when it is missing or
    holds neither ``nodes/`` nor ``environments/``: a mistyped path must not pass as valid."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{path}: no such directory")
    is_git = ref is not None or _is_bare(p)
    source: DirectorySource | GitSource = GitSource(p, ref or "HEAD") if is_git else DirectorySource(p)
    if not source.has_layout():
        where = f"{path} at {ref}" if ref is not None else path
        raise ConfigError(f"{where} is not a phrame config repo: no nodes/ or environments/")
    return source


def validated_from_args(args: argparse.Namespace) -> tuple[ConfigRepo, list[Problem]] | None:
    """Load and validate the repo the arguments name: (repo, problems). Print the reason and
    return None when it cannot be read at all."""
    try:
        repo, read_problems = load(open_source(args.path, args.ref))
    except ConfigError as e:
        print(f"phrame {args.command}: {e}", file=sys.stderr)
        return None
    return repo, validate(repo, read_problems)


def valid_repo_from_args(
    args: argparse.Namespace, *, node: str | None = None, refusal: str
) -> ConfigRepo | int:
    """The valid repo the arguments name, or the exit code after printing why not: 2 when it
    cannot be read or ``node`` is not in it, 1 (with every problem) when it is invalid.
    ``refusal`` ends the summary line: ``3 problem(s); nothing <refusal>``."""
    loaded = validated_from_args(args)
    if loaded is None:
        return 2
    repo, problems = loaded
    name = f"phrame {args.command}"
    if problems:
        for p in problems:
            print(p.format(), file=sys.stderr)
        print(f"{name}: {len(problems)} problem(s); nothing {refusal}", file=sys.stderr)
        return 1
    if node is not None and node not in repo.nodes:
        print(f"{name}: node {node!r} is not in nodes/", file=sys.stderr)
        return 2
    return repo
