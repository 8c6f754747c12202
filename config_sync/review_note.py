"""The review note: what a commit would change on each node, for people.

``Syncer.review`` posts it on a merge request (through the reporter) and ``phrame plan``
prints it. ``item_changes`` compares two renderings; ``review_note`` writes the Markdown.
Pure: renderings in, text out; it never decides what is published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from config_sync.models import Change
from config_sync.publication.plane import owned_topic
from phrame.config_repo.update_policy import UpdatePolicy
from phrame.placement_rules.preview import Placed
from schemas import Topics
from schemas.topics import ITEM_KINDS

# the marker GitLab notes already carry ("plan" kept in it: existing notes are edited, not duplicated)
REVIEW_NOTE_MARKER = "<!-- phrame:plan -->"
_BOOKKEEPING = ("digest", "commit")


def item_changes(
    old: Mapping[str, dict[str, Any]], new: Mapping[str, dict[str, Any]], topics: Topics
) -> list[Change]:
    """Per node, the items a move from ``old`` to ``new`` adds, changes (which fields) or removes."""
    changes = []
    for topic in sorted(set(old) | set(new)):
        parsed = owned_topic(topics, topic)
        if parsed is None or parsed.kind not in ITEM_KINDS:
            continue
        before, after = old.get(topic), new.get(topic)
        node, kind, item = str(parsed.node), parsed.kind, str(parsed.item_id)
        if before is None and after is not None:
            changes.append(Change(node, kind, item, "add"))
        elif after is None and before is not None:
            changes.append(Change(node, kind, item, "remove"))
        elif before is not None and after is not None and before.get("digest") != after.get("digest"):
            keys = (set(before) | set(after)) - set(_BOOKKEEPING)
            fields = tuple(sorted(k for k in keys if before.get(k) != after.get(k)))
            changes.append(Change(node, kind, item, "change", fields))
    return sorted(changes)


def rollout_waves(changes: list[Change], policies: Mapping[tuple[str, str], UpdatePolicy]) -> list[str]:
    """One line per service with ``update:`` whose replicas ``changes`` changes: its waves, in
    order, as config-sync would release them (added and removed replicas are not waved)."""
    changed: dict[tuple[str, str], list[str]] = {}
    for c in changes:
        env, service = c.item_id.split(".")[:2]
        if c.kind == "containers" and c.action == "change" and (env, service) in policies:
            changed.setdefault((env, service), []).append(c.item_id)
    lines = []
    for (env, service), items in sorted(changed.items()):
        policy = policies[(env, service)]
        items.sort(key=lambda i: int(i.rsplit(".", 1)[-1]) if i.rsplit(".", 1)[-1].isdigit() else 0)
        waves: list[list[str]] = []
        left = list(items)
        while left:
            size = policy.wave_size(not waves, len(left))
            waves.append(left[:size])
            left = left[size:]
        parts = []
        for n, wave in enumerate(waves, 1):
            text = ", ".join(f"`{i}`" for i in wave)
            if n == 1 and policy.canary:
                text += f" (canary; then `phrame promote {env} {service}`)"
            parts.append(f"{n}) {text}")
        head = f"- `{env}/{service}`: {len(items)} replica(s) in {len(waves)} wave(s)"
        head += f", each healthy for {policy.min_healthy_s:g} s before the next: "
        lines.append(head + " ".join(parts))
    return lines


def plan_lines(digest: str | None, reviewed: tuple[str, str] | None, commit: str) -> list[str]:
    """The plan digest line, and the warning when the merge's plan is not the one reviewed."""
    if digest is None:
        return []
    lines = [f"Plan digest: `{digest}`", ""]
    if reviewed is not None:
        lines = [
            f"**Plan changed since review**: the merge `{commit[:12]}` deploys the plan `{digest}`, "
            f"not the reviewed `{reviewed[0]}` (of `{reviewed[1][:12]}`): another change landed on "
            "the target in between. The tables below are what the merge changed.",
            "",
        ]
    return lines


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def review_note(
    changes: list[Change],
    errors: list[dict[str, Any]],
    *,
    commit: str,
    ref: str | None = None,
    waves: list[str] | None = None,
    placed: Sequence[Placed] = (),
    liveness: str = "",
    refused: Sequence[dict[str, Any]] = (),
    plan_digest: str | None = None,
    reviewed: tuple[str, str] | None = None,
) -> str:
    """The review note as Markdown: errors first, then one table per node, then the staged
    rollouts' ``waves`` (:func:`rollout_waves`), then the placement preview of label-placed
    replicas (``placed``, decided with ``liveness`` as the caller knows it) — the MR note
    body, and what ``phrame plan`` prints. ``refused``: the items the nodes' own policies
    refuse (``node-policy`` problems), shown first: their agents will not run them.
    ``plan_digest``: the plan's digest (:mod:`config_sync.reviews.digest`); ``reviewed``: the
    digest and commit reviewed before, when the merge's plan differs from it."""
    where = f" into `{ref}`" if ref else ""
    lines = [REVIEW_NOTE_MARKER, f"### Phrame plan for `{commit[:12]}`{where}", ""]
    lines += plan_lines(plan_digest, reviewed, commit)
    if errors:
        lines += [f"**{len(errors)} problem(s): this commit will not be deployed.**", ""]
        lines += ["| file | rule | message |", "|---|---|---|"]
        for e in errors:
            place = f"{e.get('file', '?')}:{e.get('line', 1)}:{e.get('column', 1)}"
            lines.append(f"| `{_cell(place)}` | {_cell(e.get('rule', ''))} | {_cell(e.get('message', ''))} |")
        return "\n".join(lines) + "\n"
    lines += _refused(refused)
    if not changes:
        return (
            "\n".join([*lines, "No changes to any node.", "", *_placement(placed, liveness)]).rstrip() + "\n"
        )
    counts = {a: sum(c.action == a for c in changes) for a in ("add", "change", "remove")}
    lines += [f"{counts['add']} to add, {counts['change']} to change, {counts['remove']} to remove.", ""]
    for node in sorted({c.node for c in changes}):
        lines += [f"#### {node}", "", "| action | kind | item | changed fields |", "|---|---|---|---|"]
        for c in (c for c in changes if c.node == node):
            fields = ", ".join(f"`{f}`" for f in c.fields)
            lines.append(f"| {c.action} | {c.kind[:-1]} | `{c.item_id}` | {fields} |")
        lines.append("")
    if waves:
        lines += ["#### Staged rollouts", "", *waves, ""]
    return "\n".join([*lines, *_placement(placed, liveness)])


def _refused(refused: Sequence[dict[str, Any]]) -> list[str]:
    """The node-policy section: nothing when every node's policy allows its items."""
    if not refused:
        return []
    lines = [
        f"**{len(refused)} item(s) refused by their node's own policy: the agent will not run them** "
        "(the node's policy file decides; a commit cannot lift it).",
        "",
        "| file | message |",
        "|---|---|",
    ]
    for e in refused:
        place = f"{e.get('file', '?')}:{e.get('line', 1)}:{e.get('column', 1)}"
        lines.append(f"| `{_cell(place)}` | {_cell(e.get('message', ''))} |")
    return [*lines, ""]


def _placement(placed: Sequence[Placed], liveness: str) -> list[str]:
    """The preview's section: nothing when the change places no replica."""
    if not placed:
        return []
    known = f" ({liveness})" if liveness else ""
    lines = [
        "#### Placement preview",
        "",
        f"Label-placed replicas this change adds or moves, where placement would put them now{known}. "
        "Placement decides again after the merge and commits its choice to the environment's `node.json`.",
        "",
        "| environment | replica | from | to | why |",
        "|---|---|---|---|---|",
    ]
    for p in placed:
        target = p.target or "**unassigned**"
        lines.append(f"| {p.environment} | `{p.replica}` | {p.source or '—'} | {target} | {_cell(p.cause)} |")
    return [*lines, ""]
