"""On a merge, is the plan that deploys the plan that was reviewed? (the merge check)

The webhook route hands in a merged merge request (:meth:`MergeCheck.merged`: its iid and
GitLab's ``merge_commit_sha`` when given); every valid sync pass tells what it published
(:meth:`MergeCheck.published`), so the commit deployed before each is known, and then runs
:meth:`MergeCheck.check`. The plan of the merge result is the move from the commit
the target deployed before the merged head (else the merged head's first parent, after a
restart) to the merged head; when its digest is not the one the note showed, another change
landed in between: the deployment says ``plan changed since review`` in ``phrame/deploy``, the
deploy record carries ``plan_changed`` and the plan note is rewritten with what the merge
changed. A merge request never reviewed, or a merge result that is invalid, is not judged.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from config_sync.models import Reading
from config_sync.review_note import item_changes, review_note
from config_sync.reviews.digest import plan_digest
from config_sync.reviews.memory import ReviewedPlans
from phrame.git import GitError
from phrame.gitlab import GitLabError
from schemas import Topics

log = logging.getLogger(__name__)
CHANGED = "plan changed since review"
REMEMBERED = 200  # commits whose previously deployed commit is kept


class MergeCheck:
    def __init__(
        self,
        reviewed: ReviewedPlans,
        topics: Topics,
        *,
        read: Callable[[str], Reading],
        resolve: Callable[[str], str | None],
        parent_of: Callable[[str], str | None],
        remark: Callable[[str, str, str], None],
        annotate: Callable[[str, dict[str, Any]], None],
        note: Callable[[int, str], None],
    ) -> None:
        """``remark(commit, text, ref)``: the deploy watcher's; ``annotate(commit, field)``:
        the deploy history's; ``note(iid, body)``: the reporter's plan note."""
        self.reviewed, self.topics = reviewed, topics
        self.read, self.resolve, self.parent_of = read, resolve, parent_of
        self.remark, self.annotate, self.note = remark, annotate, note
        self._pending: dict[str, dict[int, str | None]] = {}  # ref -> iid -> merge commit
        self._before: OrderedDict[str, str] = OrderedDict()  # commit -> deployed before it
        self._deployed: dict[str, str] = {}  # ref -> the commit its last valid pass published
        self._lock = threading.Lock()

    def merged(self, ref: str, iid: int, sha: str | None) -> None:
        """A Merge Request Hook said ``!iid`` merged into ``ref`` (a request thread)."""
        with self._lock:
            self._pending.setdefault(ref, {})[iid] = sha

    def published(self, ref: str, commit: str) -> None:
        """A valid pass of ``ref`` published ``commit`` (an invalid head never reaches here, so
        the commit remembered before it is the one that was deployed)."""
        with self._lock:
            previous = self._deployed.get(ref)
            self._deployed[ref] = commit
            if not previous or previous == commit:
                return
            self._before[commit] = previous
            self._before.move_to_end(commit)
            while len(self._before) > REMEMBERED:
                self._before.popitem(last=False)

    def check(self, ref: str, head: str) -> list[int]:
        """Judge the merges of ``ref`` waiting for this pass; returns the iids flagged."""
        with self._lock:
            waiting = self._pending.pop(ref, {})
        flagged = []
        for iid, sha in sorted(waiting.items()):
            try:
                if self._judge(ref, iid, (self.resolve(sha) if sha else None) or head):
                    flagged.append(iid)
            except GitError as e:  # the deployment goes on; only the comparison is lost
                log.warning("cannot compare the plan of !%d with its review: %s", iid, e)
        return flagged

    def _judge(self, ref: str, iid: int, merged: str) -> bool:
        reviewed = self.reviewed.get(iid)
        if reviewed is None:
            log.info("!%d merged into %s at %s: no reviewed plan to compare", iid, ref, merged[:12])
            return False
        with self._lock:
            base = self._before.get(merged)
        base = base or self.parent_of(merged)
        new = self.read(merged)
        if base is None or new.rendered is None:
            return False
        old = self.read(base).rendered or {}
        digest = plan_digest(old, new.rendered, self.topics)
        if digest == reviewed.digest:
            log.info("!%d merged into %s at %s: the plan is the one reviewed", iid, ref, merged[:12])
            return False
        log.warning(
            "!%d merged into %s at %s: %s (reviewed %s at %s, merged %s from %s)",
            iid, ref, merged[:12], CHANGED, reviewed.digest, reviewed.commit[:12], digest, base[:12],
        )  # fmt: skip
        self.remark(merged, CHANGED, ref)
        self.annotate(merged, {"mr": iid, "reviewed": reviewed.digest, "merged": digest})
        body = review_note(
            item_changes(old, new.rendered, self.topics),
            [],
            commit=merged,
            ref=ref,
            plan_digest=digest,
            reviewed=(reviewed.digest, reviewed.commit),
        )
        try:
            self.note(iid, body)
        except GitLabError as e:
            log.warning("could not update the plan note of !%d: %s", iid, e)
        return True
