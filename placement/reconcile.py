"""One placement pass over one environment: read git, decide, commit and push if changed.

Called by the loop (and ``phrame placement --once``). Every pass re-reads the tracked
head, so a rejected push (someone committed meanwhile) is retried from a fresh fetch
after a short random wait and never forced. ``auto`` commits onto the tracked branch; ``review``
pushes ``placement/<env>/<short-sha>`` and opens one merge request. Never writes a tag.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol

from phrame.config_repo import ConfigError, ConfigRepo, Problem, ReadCache, validate
from phrame.git import GitError, PushRejected, TagTargetError
from phrame.placement_rules import inventory
from phrame.placement_rules.decide import decide
from phrame.placement_rules.models import Decision, NodeHealth, NodeInfo
from phrame.runtime import backoff
from placement.errors import EXPECTED, InvalidInputs, NotOnTrackedRef, PlacementError
from placement.git_repo import PlacementRepo
from placement.health import PlacementHealth, gc_candidates
from placement.problem_log import ProblemLog

log = logging.getLogger(__name__)

PUSH_ATTEMPTS = 5
PUSH_RETRY_MAX_S = 0.2  # a rejected push is tried again after a random wait up to this
PASS = ""  # the ProblemLog key of the pass as a whole (environment names are never empty)
FAILURES: tuple[type[Exception], ...] = (*EXPECTED, ConfigError)  # ours, or a commit we cannot read


class MergeRequestPort(Protocol):
    def ensure(self, source_branch: str, target_branch: str, title: str, description: str) -> Any: ...

    def close_superseded(self, source_branch: str) -> list[int]: ...


@dataclass
class EnvResult:
    """What one pass did for one environment (published as the placement state)."""

    environment: str
    mode: str = "auto"
    track: str = "main"
    base: str | None = None
    decision: Decision | None = None
    commit: str | None = None  # the commit this pass pushed, if any
    branch: str | None = None  # review mode: the placement branch
    merge_request: str | None = None
    gc_candidates: list[str] = field(default_factory=list)
    error: str | None = None
    disconnect_grace_s: float | None = None  # the wait on a silent node this pass decided with


def render_document(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


class PlacementReconciler:
    def __init__(
        self,
        git: PlacementRepo,
        liveness: PlacementHealth,
        *,
        clock: Callable[[], float],
        reschedule_after_s: float,
        node_gc_s: float,
        default_ref: str = "main",
        instance: str = "",
        merge_requests: MergeRequestPort | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.git = git
        self.sleep = sleep
        self.liveness = liveness
        self.clock = clock
        self.reschedule_after_s = reschedule_after_s
        self.node_gc_s = node_gc_s
        self.default_ref = default_ref  # PHRAME_TRACK_REF: lists the environments; track: default
        self.instance = instance
        self.merge_requests = merge_requests
        self.problems = ProblemLog(log)  # a problem that lasts many passes is logged once
        # parsed files and their schema results by git blob, as config-sync keeps them: every
        # pass re-reads the head (twice when the environment tracks the default ref), and
        # at 1,000 nodes parsing it all cost 1.6-2.5 s of CPU per pass; now only changed files
        self.read_cache = ReadCache()
        self._last: tuple[str, ConfigRepo] | None = None  # a commit never changes: read it once
        # environment -> (what its last decision read, that decision): a pass whose inputs are
        # the same decides nothing again (at 10,000 nodes a decision takes seconds)
        self._decided: dict[str, tuple[DecisionInputs, Decision]] = {}
        self.decisions = 0  # decisions made (``decide`` ran): for tests and benchmarks
        self.decisions_skipped = 0  # passes that found their environment's inputs unchanged
        # the last repo read and its nodes (nobody mutates them)
        self._inventory: tuple[ConfigRepo, dict[str, NodeInfo]] | None = None

    def run_pass(self, only: Collection[str] | None = None) -> list[EnvResult]:
        """Every environment of the default ref (``only``: those of them named there); one
        failing environment never stops the rest."""
        try:
            self.git.fetch()
            repo = self._load(self.git.head(self.default_ref))
        except FAILURES as e:  # git, or a commit phrame.config_repo cannot read
            self.problems.problem(PASS, f"placement pass skipped: {e}", level=logging.WARNING)
            return []
        # anything else is a bug: placement.loop logs it with its traceback and carries on
        self.problems.clear(PASS, f"placement passes read {self.default_ref} again")
        names = sorted(repo.environments if only is None else set(only) & set(repo.environments))
        return [self.sync_environment(name, fetch=False) for name in names]

    def sync_environment(self, name: str, *, fetch: bool = True) -> EnvResult:
        """Decide ``name`` and write the result; a rejected push → fetch, decide again, retry."""
        try:
            result = self._sync_retrying(name, fetch=fetch)
            self.problems.clear(name, f"environment {name}: placement works again")
            return result
        except FAILURES as e:
            # an unreadable commit is the config's problem (config-sync reports it too), not ours
            ours = isinstance(e, EXPECTED) and not isinstance(e, InvalidInputs | NotOnTrackedRef)
            level = logging.ERROR if ours else logging.WARNING
            self.problems.problem(name, f"placement of environment {name} failed: {e}", level=level)
            return EnvResult(name, error=str(e))
        except Exception as e:  # a bug: logged with its traceback; the other environments go on
            text = f"placement of environment {name} failed unexpectedly: {type(e).__name__}: {e}"
            self.problems.problem(name, text, exc_info=True)
            return EnvResult(name, error=f"unexpected {type(e).__name__}: {e}")

    def _sync_retrying(self, name: str, *, fetch: bool) -> EnvResult:
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            if fetch or attempt > 1:
                self.git.fetch()  # a retry starts from the branch's new head
            try:
                return self._sync(name)
            except PushRejected:
                if attempt == PUSH_ATTEMPTS:
                    raise
                log.info("environment %s: the branch moved meanwhile; deciding again", name)
                # all jitter: two instances that raced do not come back together
                self.sleep(backoff(attempt, base=PUSH_RETRY_MAX_S, cap=PUSH_RETRY_MAX_S, jitter=1.0))
        raise AssertionError("unreachable: the last attempt returned or raised")

    def _sync(self, name: str) -> EnvResult:
        main = self._load(self.git.head(self.default_ref))
        env_main = main.environments.get(name)
        if env_main is None:
            raise PlacementError(f"environment {name} is gone from {self.default_ref}")
        _, track = inventory.mode_and_track(env_main, self.default_ref)
        base = self.git.head(track)
        repo = main if base == main.commit else self._load(base)
        env = repo.environments.get(name)
        if env is None or env.doc is None:
            # Deciding from the default ref's files would commit a lone node.json onto a ref
            # that lacks the environment: an orphan that fails validation there.
            kind = "tag" if self.git.is_tag(track) else "branch"
            raise NotOnTrackedRef(
                f"environment {name} is not on {kind} {track} yet: {track} at {base[:12]} has no "
                f"environments/{name}/environment.yaml; nothing is decided for it until it has"
            )
        mode, _ = inventory.mode_and_track(env, self.default_ref)
        result = EnvResult(name, mode=mode, track=track, base=base)
        unreadable = unreadable_inputs(repo, name)
        if unreadable:
            # A node or service file that does not parse would read as "gone" and move healthy
            # replicas for good (a returning node gets nothing back): wait for a readable commit.
            files = ", ".join(sorted({p.file for p in unreadable}))
            raise InvalidInputs(
                f"environment {name}: the config at {base[:12]} has files placement cannot read "
                f"({files}; first: {unreadable[0].format()}); node.json is left as it is"
            )
        if mode == "auto" and self.git.is_tag(track):
            raise TagTargetError(
                f"environment {name} tracks the tag {track!r} with placement: auto; placement never "
                f"writes to a tag: set placement: review in environments/{name}/environment.yaml"
            )
        nodes = self._nodes_of(repo)
        now = self.clock()
        self.liveness.note_decision(name, nodes, now)  # may end a full disruption
        health = self.liveness.health(nodes, now)
        result.gc_candidates = gc_candidates(health, now, self.node_gc_s)
        # the environment's disconnect grace, else PHRAME_RESCHEDULE_AFTER_S
        wait_s = result.disconnect_grace_s = inventory.reschedule_after(env, self.reschedule_after_s)
        inputs = decision_inputs(base, repo.commit, health, wait_s)
        last = self._decided.get(name)
        if last is not None and last[0] == inputs:
            self.decisions_skipped += 1
            result.decision = last[1]  # unchanged, nothing pending: it would decide the same
            return result
        decision = decide(
            name,
            nodes=nodes,
            services=inventory.services_of(env),
            current=inventory.current_document(env),
            health=health,
            now=now,
            reschedule_after=wait_s,
            reserved=inventory.reserved_elsewhere(repo, name),
        )
        self.decisions += 1
        result.decision = decision
        if is_final(decision):
            self._decided[name] = (inputs, decision)
        else:
            self._decided.pop(name, None)
        if not decision.is_changed:
            return result
        content = render_document(decision.doc)
        message = decision.commit_message(name) + f"\nPlacement-By: {self.instance}\n"
        path = f"environments/{name}/node.json"
        if mode == "auto":
            result.commit = self.git.commit_file(base, path, content, message)
            self.git.push(result.commit, track)
            log.info("environment %s: committed %s onto %s: %s", name, result.commit[:12], track, message)
            return result
        return self._review(result, base, path, content, message)

    def _review(self, result: EnvResult, base: str, path: str, content: bytes, message: str) -> EnvResult:
        """Push the decision to ``placement/<env>/<short-sha of the base>`` and open one MR."""
        branch = f"placement/{result.environment}/{base[:8]}"
        result.branch = branch
        head = self.git.branch_head(branch)
        if head is not None and not self.git.is_ancestor(base, head):
            raise GitError(f"branch {branch} exists but does not start from {base[:12]}; leaving it alone")
        if head is None or self.git.read_file(head, path) != content:
            # On top of our own earlier proposal: a fast-forward, so no force is ever needed.
            result.commit = self.git.commit_file(head or base, path, content, message)
            self.git.push(result.commit, branch)
            log.info(
                "environment %s: pushed %s to %s for review", result.environment, result.commit[:12], branch
            )
        if self.merge_requests is not None and not self.git.is_tag(result.track):
            title = message.splitlines()[0]
            mr = self.merge_requests.ensure(branch, result.track, title, message)
            result.merge_request = str(getattr(mr, "web_url", mr))
            if getattr(mr, "is_new", False):
                self._close_superseded(result.environment, branch)
        return result

    def _close_superseded(self, environment: str, branch: str) -> None:
        """Older proposals for ``environment`` are stale once a new one is open; failing to
        close them is logged, never a failed placement (the new merge request is open)."""
        assert self.merge_requests is not None
        try:
            closed = self.merge_requests.close_superseded(branch)
        except EXPECTED as e:
            log.warning("environment %s: %s", environment, e)
            return
        if closed:
            log.info("environment %s: closed superseded merge requests %s", environment, closed)

    def _nodes_of(self, repo: ConfigRepo) -> dict[str, NodeInfo]:
        """The inventory of ``repo``, built once per repo read (3,000 nodes: 0.16 s a pass)."""
        last = self._inventory
        if last is not None and last[0] is repo:
            return last[1]
        nodes = inventory.nodes_of(repo)
        self._inventory = (repo, nodes)
        return nodes

    def _load(self, sha: str) -> ConfigRepo:
        last = self._last
        if last is not None and last[0] == sha:
            return last[1]  # nobody mutates a loaded repo: inventory and decide only read it
        # the shared adapter: its git processes end at once
        repo, problems = self.git.load(sha, cache=self.read_cache)
        problems = validate(repo, problems, cache=self.read_cache)
        if problems:
            # Semantic problems do not stop a decision (placement may be what fixes a capacity
            # or port problem); unreadable inputs do, per environment (unreadable_inputs).
            log.debug("config at %s has %d problems", sha[:12], len(problems))
        self._last = (sha, repo)
        return repo


#: What a decision reads besides the clock: the tracked commit and the repository read, each
#: node's health, the grace. Equal inputs and a final decision (nothing pending, nothing to
#: commit, not held) mean the same decision, whatever the time.
DecisionInputs = tuple[str, str | None, tuple[tuple[str, bool, float | None], ...], float]


def decision_inputs(
    base: str, read: str | None, health: dict[str, NodeHealth], wait_s: float
) -> DecisionInputs:
    """The inputs of a decision (``read``: the commit whose files were read)."""
    nodes = tuple((n, h.alive, None if h.alive else h.offline_since) for n, h in sorted(health.items()))
    return (base, read, nodes, wait_s)


def is_final(decision: Decision) -> bool:
    """A decision the clock alone cannot change: no pending move (its grace runs out with
    time), nothing to commit (the next pass reads the commit), not held."""
    return not decision.pending and not decision.is_changed and decision.held is None


# Problems that leave a file's content unknown (as opposed to a rule across files).
UNREADABLE_RULES = frozenset({
    "yaml-syntax", "yaml-duplicate-key", "yaml-tab", "yaml-encoding", "yaml-alias-bomb",
    "file-too-large", "json-syntax", "schema", "name-mismatch", "duplicate-name", "missing-file",
    "unknown-file",  # also a symlink, device or submodule where a file belongs: never read
})  # fmt: skip


def unreadable_inputs(repo: ConfigRepo, environment: str) -> list[Problem]:
    """Problems in the files a decision for ``environment`` reads: the inventory and the
    environment's own folder (its services, ``environment.yaml`` and ``node.json``)."""
    folders = ("nodes/", f"environments/{environment}/")
    return [p for p in repo.problems or () if p.rule in UNREADABLE_RULES and p.file.startswith(folders)]
