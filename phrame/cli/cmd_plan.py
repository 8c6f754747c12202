"""``phrame plan [PATH] [--from REF] [--to REF]``: what a change would do, per node.

Prints the same Markdown plan config-sync posts on a merge request: per node, the
containers, networks and processes to add, change (with the changed fields) and remove,
and where placement would put label-placed replicas the change adds or moves (every node
assumed online: a local command hears no heartbeats), or every problem of the new state.
``--to`` defaults to the files on disk (``HEAD`` for a bare repository); ``--from`` to
``main``. Like the note, the old side is the merge base of the two, so a branch behind
``--from`` does not show its newer work as removals.
Exits 0 valid, 1 invalid, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from config_sync.review_note import item_changes, review_note, rollout_waves
from config_sync.reviews.digest import plan_digest
from phrame.cli.repo_args import add_prefix_arg, open_source
from phrame.config_repo import ConfigError, load, render, validate
from phrame.config_repo.sources import GitSource
from phrame.config_repo.update_policy import policies
from phrame.git.cache import merge_base
from phrame.placement_rules.preview import preview
from schemas import Topics


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="config repo: a directory or a git repository")
    parser.add_argument("--from", dest="from_ref", default="main", help="the deployed ref (default main)")
    parser.add_argument("--to", dest="to_ref", help="the proposed ref (default: the files on disk)")
    add_prefix_arg(parser)


def _topics_at(
    source: Any, topics: Topics
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], str, Any]:
    """The rendered topics, the problems, the commit and the loaded (validated) repo of ``source``."""
    repo, read_problems = load(source)
    problems = validate(repo, read_problems)
    if problems:
        return {}, [p.to_dict() for p in problems], repo.commit or "worktree", repo
    rendered = render(repo)
    return rendered.topics(topics), [], rendered.commit, repo


def _source(path: str, ref: str | None, *, git_only: bool = False) -> Any:
    return GitSource(path, ref or "HEAD") if git_only else open_source(path, ref)


def _merge_base(path: str, from_ref: str, to_ref: str | None) -> str:
    """Where ``to_ref`` (default ``HEAD``) left ``from_ref``; ``from_ref`` itself when the
    histories are unrelated or ``path`` is no git repository."""
    return merge_base(path, from_ref, to_ref or "HEAD") or from_ref


def run(args: argparse.Namespace) -> int:
    topics = Topics(args.prefix)
    base = _merge_base(args.path, args.from_ref, args.to_ref)
    try:
        new, errors, commit, repo = _topics_at(_source(args.path, args.to_ref), topics)
        old, old_errors, _, _ = _topics_at(_source(args.path, base, git_only=True), topics)
    except ConfigError as e:
        print(f"phrame plan: {e}", file=sys.stderr)
        return 2
    if old_errors:
        print(f"phrame plan: {args.from_ref} is itself invalid; planning from nothing", file=sys.stderr)
    changes = item_changes(old, new, topics) if not errors else []
    placed = preview(repo) if not errors else []
    waves = rollout_waves(changes, policies(repo)) if not errors else []
    # a local command hears no heartbeats: the preview says what it assumed
    note = review_note(
        changes,
        errors,
        commit=commit,
        ref=args.from_ref,
        waves=waves,
        placed=placed,
        liveness="every node assumed online",
        plan_digest=plan_digest(old, new, topics) if not errors else None,  # the MR note's own
    )
    print(note, end="")
    return 1 if errors else 0
