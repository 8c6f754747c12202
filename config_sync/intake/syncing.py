"""One pass of config-sync: fetch, read the head of a ref, validate, render, publish, report.

The work queue calls :meth:`Syncer.sync_ref` (a tracked ref) and :meth:`Syncer.review`
(a merge request). Both re-read everything from git, so the trigger that started them
carries no data that matters (level-triggered). A commit that fails validation is never
rendered or published: its errors go to the commit status and the ``sync`` topic.
Which environments a ref publishes, and which nodes get a manifest, is the default ref's
last valid reading's word alone, so two refs never take turns over one item.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any

from config_sync.approvals.controller import Approvals
from config_sync.deploys.history import DeployHistory
from config_sync.deploys.watcher import DeployWatcher
from config_sync.intake.clone import SyncRepo
from config_sync.models import Claim, Reading
from config_sync.notify.targets import targets_of
from config_sync.previews.manager import PreviewManager
from config_sync.publication.sender import DesiredPublisher, Gate, SyncOutcome
from config_sync.reporting import CommitReporter
from config_sync.review_note import item_changes, review_note, rollout_waves
from config_sync.reviews.digest import plan_digest
from config_sync.reviews.memory import ReviewedPlans
from config_sync.reviews.merges import MergeCheck
from config_sync.rollouts.controller import RolloutController
from phrame.actual.health import Replica
from phrame.config_repo import ConfigError, ConfigRepo, ReadCache, render, validate
from phrame.config_repo.node_policies import policies_from_statuses, policy_problems
from phrame.config_repo.update_policy import policies
from phrame.git import GitError, RefMissing
from phrame.gitlab import GitLabError
from phrame.placement_rules.preview import Placed, preview
from phrame.runtime.gc_pause import gc_paused
from schemas import Topics

log = logging.getLogger(__name__)
VALIDATE = "phrame/validate"
READINGS_KEPT = 4


def protections_of(repo: ConfigRepo) -> dict[str, dict[str, Any]]:
    """Each environment's ``protected:`` and ``freeze:`` as written (what judges later commits)."""
    keys = ("protected", "freeze")
    return {
        name: {k: env.settings[k] for k in keys if k in env.settings}
        for name, env in repo.environments.items()
    }


def _tracks(repo: ConfigRepo, default_ref: str) -> dict[str, str]:
    return {name: env.track(default_ref) for name, env in repo.environments.items()}


class Syncer:
    def __init__(
        self,
        git: SyncRepo,
        publisher: DesiredPublisher,
        reporter: CommitReporter,
        topics: Topics,
        *,
        default_ref: str = "main",
        deployer: DeployWatcher | None = None,
        on_outcome: Callable[[SyncOutcome], None] | None = None,
        history: DeployHistory | None = None,
        rollouts: RolloutController | None = None,
        approvals: Approvals | None = None,
    ) -> None:
        self.approvals = approvals  # protected environments and freezes: holds a commit whole
        self.rollouts = rollouts  # staged rollouts: the gate of each publication
        self.history = history  # each environment's deployments (the ``deploys`` topic)
        self.git, self.publisher, self.reporter, self.topics = git, publisher, reporter, topics
        self.default_ref = default_ref
        self.deployer = deployer
        self.on_outcome = on_outcome
        self.tracked: set[str] = {default_ref}
        # Who owns what comes from the default ref's last valid reading only: every ref's
        # own tree may say otherwise (a branch left behind), and two readings must not fight.
        self.owners: dict[str, str] = {}  # environment -> the ref that publishes it
        self.fleet: frozenset[str] | None = None  # the inventory's nodes: each gets a manifest
        self.envs_by_ref: dict[str, set[str]] = {}
        self.last: dict[str, SyncOutcome] = {}  # by ref
        self._resumed: set[str] = set()  # refs past their first valid sync in this run
        self._lock = threading.Lock()
        # held from deciding what a ref owns to the end of its publication, so a ref never
        # publishes under an ownership the default ref has just taken back
        self._publishing = threading.Lock()
        self._readings: OrderedDict[str, Reading] = OrderedDict()
        # files parsed and schema-checked before (same path, same blob) are not read again
        self.read_cache = ReadCache()
        # merge-request previews (config_sync.previews): a review deploys or moves them and
        # the plan note gets their section; None: no previews
        self.previews: PreviewManager | None = None
        # the reviewed plan stays the plan: digests per merge request, checked on merge
        self.reviewed: ReviewedPlans | None = None
        self.merges: MergeCheck | None = None

    def read(self, sha: str) -> Reading:
        """Load, validate and render ``sha`` once; a poll that finds the same head only diffs."""
        with self._lock:
            if sha in self._readings:
                self._readings.move_to_end(sha)
                return self._readings[sha]
        try:
            repo, read_problems = self.git.load(sha, cache=self.read_cache)
        except ConfigError as e:
            reading = Reading(sha, {}, [{"rule": "unreadable", "message": str(e)}], None)
        else:
            errors = [p.to_dict() for p in validate(repo, read_problems, cache=self.read_cache)]
            made = None if errors else render(repo, commit=sha)
            rendered = made.topics(self.topics) if made is not None else None
            rules = policies(repo, self.read_cache) if not errors else {}
            reading = Reading(
                sha, _tracks(repo, self.default_ref), errors, rendered, frozenset(repo.nodes), rules,
                tuple(made.unassigned) if made is not None else (),
                notify=targets_of(repo) if not errors else {},
                protections=protections_of(repo) if not errors else {},
            )  # fmt: skip
        with self._lock:
            self._readings[sha] = reading
            while len(self._readings) > READINGS_KEPT:
                self._readings.popitem(last=False)
        return reading

    def _report_validation(self, sha: str, errors: list[dict[str, Any]], ref: str | None) -> None:
        if errors:
            first = errors[0]
            where = f"{first['file']}:{first.get('line', 1)}: " if "file" in first else ""
            text = f"{len(errors)} problem(s); first: {where}{first['message']}"
            self._report(sha, "failed", text, ref)
        else:
            self._report(sha, "success", "valid", ref)

    def _report(self, sha: str, state: str, text: str, ref: str | None) -> None:
        # GitLab being down must never hold a deployment back: log (the reporter keeps the
        # error for /status) and carry on; the next pass sets the status again
        try:
            self.reporter.set_status(sha, VALIDATE, state, text, ref=ref)
        except GitLabError as e:  # the adapter's own error; anything else is a bug and is raised
            log.warning("could not report %s=%s on %s: %s", VALIDATE, state, sha[:12], e)

    def sync_ref(self, ref: str, *, fetch: bool = True) -> SyncOutcome:
        """Publish the head of ``ref`` (or, if it is invalid, only its errors).

        A ref no longer tracked (the default ref took its environments back) publishes,
        reports and records nothing: the outcome says ``tracked=False``. ``fetch=False``:
        the head already fetched, again (a rollout's re-evaluation: no git traffic, and
        ``phrame/validate`` is not reported again). Python's cyclic collector is held off
        while it runs (:func:`~phrame.runtime.gc_pause.gc_paused`)."""
        with gc_paused():
            return self._sync_ref(ref, fetch=fetch)

    def _sync_ref(self, ref: str, *, fetch: bool) -> SyncOutcome:
        if ref not in self.tracked:
            return _untracked(ref)
        if fetch:
            try:
                self.git.fetch()
            except GitError as e:  # the queue retries with backoff; the sync topic says why meanwhile
                self._keep_last(ref, "git-unreachable", f"{e}; keeping the last good state")
                raise
        try:
            sha = self.git.head(ref)
        except RefMissing as e:
            return self._keep_last(
                ref, "ref-missing", f"{ref} is not on the remote ({e}); keeping the last good state"
            )
        reading = self.read(sha)
        errors = reading.errors
        if self.approvals is not None:  # GitLab's approvals of a held commit: before any lock
            self.approvals.prepare(ref, reading)
        claimed = False
        try:  # publish first: a slow or unreachable git host never delays a deployment
            with self._publishing:
                claim = self._claim(ref, reading)
                if claim is None:
                    return _untracked(ref, sha)
                claimed = True
                gate = self._gate(ref, reading, claim.environments)
                outcome = self.publisher.publish_commit(
                    ref=ref, commit=sha, claim=claim, rendered=reading.rendered, errors=errors, gate=gate
                )
        finally:
            if claimed and fetch:
                self._report_validation(sha, errors, ref)
        self.last[ref] = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        # the replicas of the environments it publishes that no node is assigned to
        unassigned = tuple(i for i in reading.unassigned if i.split(".", 1)[0] in outcome.environments)
        if self.history is not None:
            self.history.record(outcome, unassigned=unassigned)
        if self.merges is not None and outcome.ok:
            self.merges.published(ref, sha)
            self.merges.check(ref, sha)
        if outcome.ok and self.deployer is not None:
            first, generations = ref not in self._resumed, outcome.generations
            self._resumed.add(ref)
            self.deployer.note_published(generations)
            if not generations and self.approvals is not None and self.approvals.report_hold(ref, outcome):
                return outcome  # held whole (approvals, a freeze): phrame/deploy says why
            if self.rollouts is not None:  # a rollout reports its own waves, then hands over
                rolling, generations = self.rollouts.deploy_view(ref, outcome)
                if rolling:
                    return outcome
            wanted = tuple(Replica(i, None) for i in unassigned)
            if generations:
                self.deployer.watch(ref, sha, generations, (*deployed(outcome, self.topics), *wanted))
            elif self._is_new_commit(outcome):
                self.deployer.unchanged(ref, sha, wanted)  # a README edit deserves its green tick too
            elif first:
                self._resume(ref, sha, outcome)
        return outcome

    def _resume(self, ref: str, sha: str, outcome: SyncOutcome) -> None:
        """The first valid sync of ``ref`` in this run (a restart, a takeover) found ``sha``
        published by an earlier run, which reported it ``running`` and may be gone before its
        nodes converged: follow that deployment again from its records, so ``phrame/deploy``
        gets its verdict here."""
        if self.history is None or self.deployer is None:
            return
        record = self.history.deployment_of(ref, sha, outcome.environments)
        if record is None:
            return
        replicas = tuple(Replica(item, node) for item, node in sorted(record.replicas.items()))
        self.deployer.resume(ref, sha, record.nodes, replicas, published_at=record.published_at)

    def _gate(self, ref: str, reading: Reading, environments: frozenset[str]) -> Gate | None:
        """The gate of a publication: the approvals' hold around the staged rollouts' gate."""

        def rollouts(envs: Collection[str]) -> Gate | None:
            return self.rollouts.gate(reading, envs) if self.rollouts is not None else None

        if self.approvals is None:
            return rollouts(environments)
        return self.approvals.gate(ref, reading, environments, rollouts)

    def _keep_last(self, ref: str, rule: str, text: str) -> SyncOutcome:
        """A tracked ref that cannot be read (``ref-missing``: a deleted tag, a release not
        tagged yet; ``git-unreachable``: the fetch failed): nothing is cleared or deployed; its
        environments' ``sync`` topics report why, at the commit they last attempted, so
        ``phrame status`` and the dashboard show it while the last good state runs."""
        errors = [{"rule": rule, "message": text}]
        with self._publishing:
            with self._lock:
                if ref not in self.tracked:
                    return _untracked(ref)
                envs = set(self.envs_by_ref.get(ref) or {e for e, o in self.owners.items() if o == ref})
                last = self.last.get(ref)
            commit = last.commit if last is not None else self._last_attempted(envs)
            if commit:
                outcome = self.publisher.publish_commit(
                    ref=ref, commit=commit, claim=Claim(frozenset(envs)), rendered=None, errors=errors
                )
            else:  # never deployed: no commit to report against; /status and the log say it
                outcome = SyncOutcome(ref=ref, commit="", ok=False, environments=sorted(envs), errors=errors)
        if last is None or last.errors != errors:  # once per disappearance, not every poll
            log.warning("%s; %d environment(s) keep running %s", text, len(envs), commit[:12] or "nothing")
        self.last[ref] = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        return outcome

    def _last_attempted(self, envs: set[str]) -> str:
        """The commit an environment's ``sync`` topic last named (after a restart), else ``""``."""
        for env in sorted(envs):
            commit = (self.publisher.sync_state(env) or {}).get("commit")
            if isinstance(commit, str):
                return commit
        return ""

    def _is_new_commit(self, outcome: SyncOutcome) -> bool:
        """Whether ``outcome`` published an environment's ``sync`` topic: it moved to a new
        commit (an idle poll, or a restart on the same head, publishes none)."""
        for topic, payload in outcome.messages:
            try:
                if payload and self.topics.parse(topic).kind == "sync":
                    return True
            except ValueError:
                continue
        return False

    def _claim(self, ref: str, reading: Reading) -> Claim | None:
        """What ``ref`` publishes from ``reading``: its environments, those it must leave
        alone, the fleet; ``None`` when it is not tracked (any more)."""
        with self._lock:
            if ref == self.default_ref and not reading.errors:
                self._adopt(reading)
            if ref not in self.tracked:
                return None
            adopted = self.fleet is not None  # a valid default reading, maybe with no environment
            owned = {env for env, owner in self.owners.items() if owner == ref}
            # the default ref disposes; the ref's own tree only has to hold the environment (its
            # own track: may predate the hand-over). Before any valid default reading only the
            # default ref syncs, and its best-effort claim reports errors.
            envs = {env for env in owned if env in reading.tracks} if adopted else reading.tracking(ref)
            if not envs and reading.errors:
                envs = set(self.envs_by_ref.get(ref, set()))
            if not reading.errors:
                self.envs_by_ref[ref] = envs
            # an environment another ref owns (or that this tree hands on) is that ref's to
            # publish or clear: never cleared here on the way
            handed = {env for env, track in reading.tracks.items() if track != ref} - owned
            handed |= {env for env, owner in self.owners.items() if owner != ref}
            default = ref == self.default_ref and adopted
            return Claim(
                environments=frozenset(envs),
                handed_over=frozenset(handed),
                nodes=self.fleet,
                declared=frozenset(self.owners) if default else None,
            )

    def _adopt(self, reading: Reading) -> None:
        """Take ownership and the fleet from a valid reading of the default ref (lock held)."""
        self.owners = dict(reading.tracks)
        self.fleet = reading.nodes
        self.tracked = {self.default_ref, *reading.tracks.values()}
        for ref in list(self.envs_by_ref):
            if ref not in self.tracked:
                del self.envs_by_ref[ref]
                self.last.pop(ref, None)
            else:
                self.envs_by_ref[ref] &= {e for e, owner in self.owners.items() if owner == ref}

    def review(self, mr_iid: int, source_branch: str, target_ref: str) -> str:
        """Validate a merge request's head and upsert its review note; returns the note."""
        self.git.fetch()
        mr_ref = f"merge-requests/{mr_iid}"
        sha = self.git.head(mr_ref if self.git.has_branch(mr_ref) else source_branch)
        # what merging would change: against the merge base, as GitLab's own MR diff is; the
        # target's head would also undo whatever landed on the target since the branch forked
        target = self.git.head(target_ref)
        base = self.git.merge_base(target, sha) or target
        new, old = self.read(sha), self.read(base)
        errors = new.errors
        self._report_validation(sha, errors, source_branch)
        changes, liveness = [], ""
        placed: list[Placed] = []
        refused: list[dict[str, Any]] = []
        digest = None
        if new.rendered is not None:
            changes = item_changes(old.rendered or {}, new.rendered, self.topics)
            digest = plan_digest(old.rendered or {}, new.rendered, self.topics)
            placed, liveness = self._placement_preview(sha)
            refused = self._refused_by_nodes(sha)
        waves = rollout_waves(changes, new.policies)
        body = review_note(
            changes,
            errors,
            commit=sha,
            ref=target_ref,
            waves=waves,
            placed=placed,
            liveness=liveness,
            refused=refused,
            plan_digest=digest,
        )
        if self.previews is not None:
            body += self.previews.review(
                mr_iid,
                source_branch=source_branch,
                target_ref=target_ref,
                sha=sha,
                target_sha=target,
                changed={c.item_id.split(".", 1)[0] for c in changes},
                head_errors=errors,
            )
        self.reporter.upsert_review_note(mr_iid, body)
        if digest is not None and self.reviewed is not None:
            self.reviewed.remember(mr_iid, digest, sha, target_ref)
        log.info("reviewed !%d at %s: %d change(s), %d error(s)", mr_iid, sha[:12], len(changes), len(errors))
        return body

    def _refused_by_nodes(self, sha: str) -> list[dict[str, Any]]:
        """The items of a valid ``sha`` that the nodes' own policies (as their statuses, heard
        by this config-sync, report them) refuse: ``node-policy`` problems."""
        if self.deployer is None:
            return []
        policies, _ = policies_from_statuses(self.deployer.view.statuses())
        if not policies:
            return []
        repo, problems = self.git.load(sha, cache=self.read_cache)
        validate(repo, problems, cache=self.read_cache)
        return [p.to_dict() for p in policy_problems(repo, render(repo, commit=sha), policies)]

    def _placement_preview(self, sha: str) -> tuple[list[Placed], str]:
        """Where placement would put the replicas ``sha`` adds or moves, with the nodes this
        config-sync hears now (a valid commit: its files are in the read cache already)."""
        repo, problems = self.git.load(sha, cache=self.read_cache)
        validate(repo, problems, cache=self.read_cache)  # marks the documents placement may read
        if self.deployer is None:
            return preview(repo), "every node assumed online"
        down = sorted(n for n in repo.nodes if not self.deployer.view.verdict(n).is_online)
        return preview(
            repo, offline=down
        ), f"not online now: {', '.join(down)}" if down else "every node online"


def _untracked(ref: str, commit: str = "") -> SyncOutcome:
    log.info("%s is no longer tracked by the default ref: nothing synced", ref)
    return SyncOutcome(ref=ref, commit=commit, ok=True, environments=[], tracked=False)


def deployed(outcome: SyncOutcome, topics: Topics) -> tuple[Replica, ...]:
    """The container replicas ``outcome`` gave a new spec: node and digest each."""
    out = []
    for topic, raw in outcome.messages:
        try:
            parsed = topics.parse(topic)
        except ValueError:
            continue
        if parsed.plane == "desired" and parsed.kind == "containers" and raw and parsed.item_id:
            try:
                digest = json.loads(raw).get("digest")
            except ValueError:
                digest = None
            out.append(Replica(parsed.item_id, parsed.node, digest if isinstance(digest, str) else None))
    return tuple(sorted(out, key=lambda r: r.replica))
