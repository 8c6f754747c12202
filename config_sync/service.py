"""The wiring of one config-sync: broker clients, clone, publisher, reporter, queues, watcher.

``app.py`` starts and stops it; the HTTP handlers only call the ``trigger_*`` methods,
which queue work and return at once. Tests build it with a small :class:`SyncSettings`.
It never publishes or fetches on a request thread.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config_sync.approvals.controller import Approvals
from config_sync.approvals.protection import describe
from config_sync.approvals.store import ApprovalStore
from config_sync.deploys.gitlab_environments import GitLabEnvironments
from config_sync.deploys.history import DeployHistory
from config_sync.deploys.records import DeployRecord
from config_sync.deploys.watcher import DeployWatcher
from config_sync.errors import PublishError
from config_sync.intake.clone import SyncRepo
from config_sync.intake.queue import Worker, WorkQueue
from config_sync.intake.syncing import Syncer
from config_sync.intake.webhooks import Route
from config_sync.lease_client import BrokerLease, FencedMqttClient
from config_sync.metrics import Metrics
from config_sync.notify.decide import open_problem
from config_sync.notify.delivery import HttpDelivery
from config_sync.notify.events import Message, Transition
from config_sync.notify.notifier import Notifier
from config_sync.notify.outbox import Outbox
from config_sync.previews.gitlab_review import GitLabReviewApps
from config_sync.previews.manager import PreviewManager
from config_sync.publication.anti_entropy import STALE_PASSES, AntiEntropy
from config_sync.publication.sender import DesiredPublisher, SyncOutcome
from config_sync.reporting import CommitReporter, GitLabReporter, LocalReporter
from config_sync.reviews.memory import ReviewedPlans
from config_sync.reviews.merges import MergeCheck
from config_sync.rollbacks.runner import Rollbacks
from config_sync.rollouts.controller import RolloutController
from config_sync.settings import SyncSettings
from config_sync.status_views import full_view, public_view
from phrame.actual import ActualView, liveness_filters
from phrame.mqtt import MqttClient, MqttError
from phrame.runtime import Backoff, backoff
from schemas import Topics

log = logging.getLogger(__name__)
MAX_PENDING_REVIEWS = 100  # merge requests waiting for a review; each costs a fetch and a plan


def make_reporter(settings: SyncSettings) -> CommitReporter:
    if settings.git_host == "gitlab":
        assert settings.gitlab_url and settings.gitlab_token and settings.gitlab_project
        return GitLabReporter(settings.gitlab_url, settings.gitlab_token, settings.gitlab_project)
    return LocalReporter()


def commit_page(settings: SyncSettings, commit: str) -> str | None:
    """The commit's page on GitLab (its ``phrame/deploy`` status is there), when the project
    is given by path; None with the local git host or a numeric project id."""
    project = (settings.gitlab_project or "").strip("/")
    if settings.git_host != "gitlab" or not settings.gitlab_url or not project or project.isdigit():
        return None
    return f"{settings.gitlab_url.rstrip('/')}/{project}/-/commit/{commit}"


def make_notifier(settings: SyncSettings, metrics: Metrics) -> Notifier:
    def counted(message: Message, result: str) -> None:
        metrics.notifications.labels(message.environment, message.target.name, result).inc()

    delivery = HttpDelivery(Path(settings.notify_secrets_dir), timeout_s=settings.notify_timeout_s)
    low = settings.notify_retry_min_s
    outbox = Outbox(
        delivery,
        attempts=settings.notify_attempts,
        backoff=Backoff(low, max(low, settings.notify_retry_max_s), jitter=0.2),
        on_result=counted,
    )
    return Notifier(outbox)


class ConfigSync:
    def __init__(
        self,
        settings: SyncSettings,
        *,
        reporter: CommitReporter | None = None,
        before_manifests: Callable[[], None] | None = None,
    ) -> None:
        """``before_manifests``: the publisher's hook between a commit's items and its manifests."""
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        suffix = uuid.uuid4().hex[:8]
        # active + standby: the lease decides which instance publishes (config_sync.lease)
        self.lease: BrokerLease | None = None
        self.on_lost: Callable[[str], None] = lambda why: None  # the lease was lost: the process ends
        if settings.ha_lease_s > 0:
            me = settings.instance_id or f"{socket.gethostname()}-{os.getpid()}"
            self.lease = BrokerLease(self.topics, me=me, lease_s=settings.ha_lease_s)
            self.mqtt: MqttClient = FencedMqttClient(
                settings.mqtt,
                f"config-sync-{suffix}",
                on_connect=self._on_reconnect,
                fence=self.lease.may_publish,
                exempt=self.lease.topic,
            )
        else:
            self.mqtt = MqttClient(settings.mqtt, f"config-sync-{suffix}", on_connect=self._on_reconnect)
        actual = settings.actual_mqtt
        self.actual = (
            self.mqtt
            if actual is None or actual == settings.mqtt
            else MqttClient(actual, f"config-sync-a-{suffix}")
        )
        token = settings.gitlab_token if settings.git_host == "gitlab" else None
        self.git = SyncRepo(
            settings.repo_url,
            settings.state_dir,
            token=token,
            ca_file=settings.git_ca_file,
            timeout_s=settings.git_timeout_s,
        )
        self.reporter = reporter or make_reporter(settings)
        self.metrics = Metrics(ready=self.is_ready)  # the gauge asks is_ready at each scrape
        if self.lease is not None:
            lease = self.lease
            self.metrics.watch_lease(lambda: lease.is_active, lambda: int(lease.view()["term"]))
        deploy_s, node_s = settings.deploy_timeout_s, settings.node_timeout_s
        # one view of the actual plane (statuses, heartbeats, containers) for deploys and rollouts
        self.view = ActualView(self.topics, timeout_s=node_s)
        self.deployer = DeployWatcher(
            self.reporter, self.topics, timeout_s=deploy_s, view=self.view, settle_s=settings.deploy_settle_s
        )
        # changed manifests go out above what agents applied (subscribed before any publication)
        self.publisher = DesiredPublisher(
            self.mqtt,
            self.topics,
            applied=self.deployer.applied_generations,
            before_manifests=before_manifests,
        )
        # the broker held to what was published: read back after each publication and on a timer
        self.anti_entropy = AntiEntropy(
            self.publisher,
            self.topics,
            interval_s=settings.anti_entropy_s,
            on_verified=self.metrics.anti_entropy_verified,
            on_stale=self._stale_broker_node,
        )
        self.history = DeployHistory(self.mqtt, self.topics, self.git.commit_info, timeout_s=deploy_s)
        self.deployer.history = self.history
        self.history.on_finished = self._deploy_finished
        self.history.on_health = self._deploy_health
        self.history.busy = self.publisher.is_publishing
        # with GitLab: each deployment as a GitLab deployment of its environment
        self.environments = (
            GitLabEnvironments(self.reporter.gitlab.deployments)
            if isinstance(self.reporter, GitLabReporter)
            else None
        )
        if self.environments is not None:
            self.history.watchers.append(self.environments.note)
        self.notifier = make_notifier(settings, self.metrics)
        # staged rollouts: a rolled-back replica's earlier spec is re-rendered from its commit
        self.rollouts = RolloutController(
            self.topics, self.reporter, spec_at=lambda sha: self.syncer.read(sha).rendered, view=self.view
        )
        self.rollouts.trigger = self._trigger_rollout
        # protected environments and freezes: approvals retained, queued on the connection
        self.approval_store = ApprovalStore(self.topics, lambda t, p: self.mqtt.publish(t, p, retain=True))
        self.approvals = Approvals(
            self.topics,
            self.approval_store,
            self.reporter,
            read=lambda sha: self.syncer.read(sha),
            sync_state=lambda env: self.publisher.sync_state(env),
            gitlab=self.reporter.gitlab.approvals if isinstance(self.reporter, GitLabReporter) else None,
        )
        self.approvals.trigger = self._trigger_rollout  # a freeze ended, an approval: a pass, no fetch
        self.approvals.known = lambda: set(self.syncer.owners)
        self.history.approvals_of = self.approvals.approvals_for
        self.syncer = Syncer(
            self.git,
            self.publisher,
            self.reporter,
            self.topics,
            default_ref=settings.default_ref,
            deployer=self.deployer,
            on_outcome=self._record,
            history=self.history,
            rollouts=self.rollouts,
            approvals=self.approvals,
        )
        # merge-request previews: deployed by a review, stopped by a close, a merge or the
        # expiry poll, all on the reviews worker
        self.previews = PreviewManager(
            self.git,
            self.publisher,
            self.topics,
            fleet=lambda: self.syncer.fleet,
            review_apps=(
                GitLabReviewApps(self.reporter.gitlab) if isinstance(self.reporter, GitLabReporter) else None
            ),
            read_cache=self.syncer.read_cache,
            ports=settings.preview_ports,
        )
        self.syncer.previews = self.previews
        # the reviewed plan stays the plan: each MR's plan digest, retained; compared on merge
        self.reviewed = ReviewedPlans(
            self.topics.reviews(), lambda t, payload: self.mqtt.publish(t, payload, retain=True)
        )
        self.syncer.reviewed = self.reviewed
        self.syncer.merges = MergeCheck(
            self.reviewed,
            self.topics,
            read=self.syncer.read,
            resolve=self.git.resolve,
            parent_of=self.git.first_parent,
            remark=self.deployer.remark,
            annotate=self.history.annotate,
            note=self.reporter.upsert_review_note,
        )
        # rollback as a revert commit: pushed (local host) or a merge request (GitLab)
        self.rollbacks = Rollbacks(
            self.git,
            self.syncer,
            self.history,
            tracks_at=lambda sha: self.syncer.read(sha).tracks,
            gitlab=self.reporter.gitlab if isinstance(self.reporter, GitLabReporter) else None,
            trigger=self.trigger_sync,
        )
        # a fetch or a publication that failed (a TemporaryError) runs again with backoff, not
        # at the next poll; an invalid commit is no failure (it is reported) and waits for a new head
        self.queue = WorkQueue(
            poll_s=settings.poll_s,
            debounce_s=settings.debounce_s,
            backoff=Backoff(settings.retry_min_s, max(settings.retry_min_s, settings.retry_max_s)),
        )
        self.sync_counts: dict[str, int] = {}
        self.started_at: float | None = None
        self._lock = threading.Lock()
        # around creating/retiring a ref's worker with a fresh read of the tracked refs
        self._workers_lock = threading.RLock()
        self._stopping = False
        self.start_wait_s = 10.0
        self._start_error: MqttError | None = None
        self.max_pending_reviews = MAX_PENDING_REVIEWS
        self._deferred_reviews: dict[int, Route] = {}  # by iid: the latest event wins
        self._deferred_stops: set[int] = set()  # closed or merged before start: stopped once started

    # -- lifecycle
    def start(self) -> None:
        """Connect, read back what is published and sync the tracked refs.

        A broker that does not answer within ``start_wait_s`` does not stop the service: it serves
        (``/readyz`` says not ready, triggers wait for the first sync) and finishes starting
        once the broker answers. A refused login within ``start_wait_s`` raises: waiting would not help.
        """
        if self.lease is not None:  # connect and stand by; start for real once active
            self.lease.on_active, self.lease.on_lost = self._take_over, self._lost
            threading.Thread(target=self._stand_by, name="config-sync-standby", daemon=True).start()
            return
        starter = threading.Thread(target=self._start, name="config-sync-start", daemon=True)
        starter.start()
        starter.join(self.start_wait_s)
        if self._start_error is not None:
            raise self._start_error
        if starter.is_alive():
            log.warning(
                "no broker at %s yet; serving, not ready, and syncing once it answers",
                self.settings.mqtt.broker.redacted(),
            )

    @property
    def start_error(self) -> MqttError | None:
        """Why starting failed for good (a refused login), also after ``start()`` returned."""
        return self._start_error

    def _stand_by(self) -> None:
        """Active + standby: connect, for the lease only; nothing else runs until it is ours."""
        assert self.lease is not None
        try:
            self.mqtt.start(timeout=None)
        except MqttError as e:
            if not self._stopping:
                log.error("config-sync cannot start: %s", e)
                self._start_error = e
            return
        self.lease.run(self.mqtt)

    def _take_over(self) -> None:
        """The lease is ours: read back what is published and sync every tracked ref, as a
        fresh start does (a webhook the standby answered is acted on by that first sync)."""
        if self._stopping:
            return
        try:
            self._start(connected=True)
        except Exception:
            if not self._stopping:  # stopped while taking over: its queue refuses work, as it should
                raise

    def _lost(self, why: str) -> None:
        """The lease is lost (another instance took it): the fence already refuses every
        publication; the process ends (``on_lost``) and comes back as a standby."""
        log.error("config-sync is no longer active (%s)", why)
        self.on_lost(why)

    @property
    def role(self) -> str:
        """``active`` or ``standby`` (a single config-sync without a lease is always active)."""
        return "active" if self.lease is None or self.lease.is_active else "standby"

    def _start(self, *, connected: bool = False) -> None:
        try:
            if not connected:
                self.mqtt.start(timeout=None)
            if self.actual is not self.mqtt:
                self.actual.start(timeout=None)
        except MqttError as e:
            if not self._stopping:
                log.error("config-sync cannot start: %s", e)
                self._start_error = e
            return
        for topic_filter, qos in liveness_filters(self.topics):  # heartbeats at QoS 0
            self.actual.subscribe(topic_filter, self.view.on_message, qos=qos)
        self.actual.subscribe(self.topics.actual_containers_filter(), self.view.on_message)
        self.notifier.start()
        if self.environments is not None:
            self.environments.start()
        # placement's state per environment: which replicas no node can take (deploy health)
        self.mqtt.subscribe(
            f"{self.topics.prefix}/desired/environments/+/placement", self.deployer.on_placement
        )
        self.deployer.start()
        self.rollouts.start()
        self.approvals.start()
        failures = 0
        while not self._stopping:
            try:
                self.publisher.rebuild()
                break
            except PublishError as e:  # the broker went away again: read back once it returns
                failures += 1
                delay = backoff(failures, base=1.0, cap=30.0)
                log.warning("cannot read back the published state (%s); retrying in %.0f s", e, delay)
                time.sleep(delay)
        self.anti_entropy.start()
        # the deployments recorded before a restart, before anything is published
        self.history.restore(self.publisher.published or {})
        self.approval_store.restore(self.publisher.published or {})
        self.reviewed.restore(self.publisher.published or {})
        self._remember_failures()
        self.previews.restore(self.publisher.published or {})
        self.started_at = time.time()
        if self.previews.records:  # previews read back: the worker whose poll expires them
            self._reviews_worker()
        self.trigger_sync(self.settings.default_ref)
        with self._lock:
            deferred, self._deferred_reviews = self._deferred_reviews, {}
            stops, self._deferred_stops = self._deferred_stops, set()
        for route in deferred.values():
            self.trigger_review(route)
        for iid in sorted(
            stops
        ):  # after the reviews: a merge request opened and closed meanwhile ends stopped
            self.trigger_preview_stop(iid)

    def stop(self) -> None:
        self._stopping = True
        if self.lease is not None:
            self.lease.stop()
        self.queue.stop()
        self.anti_entropy.stop()
        self.rollouts.stop()
        self.approvals.stop()
        self.deployer.stop()
        self.notifier.stop()
        if self.environments is not None:
            self.environments.stop()
        if self.actual is not self.mqtt:
            self.actual.stop()
        self.mqtt.stop()

    # -- triggers (called from request handlers: they must return at once)
    @property
    def tracked(self) -> set[str]:
        return set(self.syncer.tracked)

    def trigger_sync(self, ref: str) -> bool:
        with self._workers_lock:
            if ref not in self.syncer.tracked:
                return False
            if self.started_at is None:
                return True  # not started yet: the first sync, once connected, reads every head
            self._ref_worker(ref).trigger(ref, lambda: self._sync(ref))
            return True

    def note_merge(self, route: Route) -> None:
        """A merge request merged into a tracked ref: its target's next pass compares the
        plan of the merge with the one reviewed (``config_sync.reviews.merges``)."""
        if route.ref and route.mr_iid is not None and self.syncer.merges is not None:
            self.syncer.merges.merged(route.ref, route.mr_iid, route.sha)

    def trigger_review(self, route: Route) -> bool:
        """Queue a review of the merge request (its latest event wins); False when
        ``max_pending_reviews`` other merge requests already wait (nothing queued)."""
        assert route.mr_iid is not None and route.source_branch and route.ref
        iid, source, target = route.mr_iid, route.source_branch, route.ref
        with self._lock:
            if self.started_at is None:  # its review note compares with what is published: not read yet
                deferred = self._deferred_reviews
                if iid not in deferred and len(deferred) >= self.max_pending_reviews:
                    return False
                deferred[iid] = route
                return True
        self.previews.forks[iid] = route.fork
        job = lambda: self._review(iid, source, target)  # noqa: E731
        return self._reviews_worker().trigger(f"mr:{iid}", job, max_pending=self.max_pending_reviews)

    def trigger_preview_stop(self, iid: int) -> bool:
        """Stop the previews of merge request ``iid`` (closed or merged), on the reviews worker."""
        with self._lock:
            if self.started_at is None:  # its record is not read back yet: stopped once started
                self._deferred_reviews.pop(iid, None)
                self._deferred_stops.add(iid)
                return True
        return self._reviews_worker().trigger(f"stop:{iid}", lambda: self.previews.stop_mr(iid))

    def _reviews_worker(self) -> Worker:
        """The worker of reviews and previews, made by the first review (or at start when
        previews were read back); its poll stops the previews past ``stop_at``."""
        return self.queue.worker("reviews", poll=self.previews.expire, poll_key="preview-expiry")

    def _trigger_rollout(self, ref: str) -> None:
        """A rollout of ``ref`` may move on (its containers changed, a deadline, a promotion):
        a pass on the ref's own worker, after any sync queued there, without fetching."""
        with self._workers_lock:
            if ref in self.syncer.tracked and self.started_at is not None:
                self._ref_worker(ref).trigger("rollout", lambda: self._sync(ref, fetch=False))

    def _ref_worker(self, ref: str) -> Any:
        return self.queue.worker(f"ref:{ref}", poll=lambda: self._sync(ref), poll_key=ref)

    # -- work (worker threads)
    def _sync(self, ref: str, *, fetch: bool = True) -> None:
        if ref not in self.syncer.tracked:  # the default ref took its environments back
            self._retire_self(ref)
            return
        with self._lock:
            self.sync_counts[ref] = self.sync_counts.get(ref, 0) + 1
        with self.metrics.sync_seconds.labels(ref).time():
            try:
                outcome = self.syncer.sync_ref(ref) if fetch else self.syncer.sync_ref(ref, fetch=False)
            except Exception:
                self.metrics.record_sync(ref, "error")
                raise
        if not outcome.tracked:  # untracked while it ran
            self._retire_self(ref)
            return
        with self._workers_lock:
            tracked = self.syncer.tracked
            for name in self.queue.names():
                if name.startswith("ref:") and name[4:] not in tracked:  # no longer tracked: no more polls
                    self.queue.retire(name)
            for other in sorted(tracked - {ref}):
                if f"ref:{other}" not in self.queue.names():  # newly tracked: its worker, poll and first sync
                    self.trigger_sync(other)

    def _retire_self(self, ref: str) -> None:
        """Retire the worker running this job if ``ref`` is still untracked: only that very
        worker, never one made since for ``ref`` tracked again, nor from another thread."""
        name = f"ref:{ref}"
        with self._workers_lock:
            if ref in self.syncer.tracked:  # tracked again meanwhile: sync its head once more
                self.trigger_sync(ref)
                return
            worker = self.queue.workers.get(name)
            if worker is not None and worker.is_current():
                self.queue.retire(name, only_if=worker)

    def _review(self, iid: int, source: str, target: str) -> None:
        try:
            self.syncer.review(iid, source, target)
        except Exception:
            self.metrics.reviews.labels("error").inc()
            raise
        self.metrics.reviews.labels("ok").inc()

    def _on_reconnect(self) -> None:
        """MQTT network thread: after a reconnect the broker may have lost its retained
        topics (no persistence), so re-read them and re-sync every tracked ref."""
        if self.lease is not None:
            self.lease.on_connect()  # a standby's silence counts from the reconnect
        if self.started_at is None:
            return  # the first connection: start() rebuilds and syncs
        log.info("reconnected to the desired broker; re-reading what is published")
        self.publisher.invalidate()
        self.anti_entropy.full_soon()  # a failover: the node now served may hold an older set
        self.history.republish()
        self.approval_store.republish()
        for ref in sorted(self.syncer.tracked):
            self.trigger_sync(ref)

    def _stale_broker_node(self, topics: list[str]) -> None:
        """Anti-entropy's ``on_stale``: the node read from stored none of what was sent again
        (NATS: a server whose retained index stopped with a dead node); read from the next."""
        why = (
            f"it still serves {len(topics)} desired topic(s) otherwise after {STALE_PASSES} re-sends "
            f"(first: {topics[0]}): its retained index may have stopped (NATS: restart that server)"
        )
        if not self.mqtt.fail_over(why):
            log.error("the desired broker %s: %s", self.mqtt.broker_url, why)

    def _record(self, outcome: SyncOutcome) -> None:
        self.metrics.record_sync(outcome.ref, "applied" if outcome.ok else "invalid")
        self.metrics.messages.inc(len(outcome.messages))
        self.anti_entropy.after(outcome)
        if outcome.ok and outcome.commit and outcome.environments:
            # the notify: targets of the commit just synced (its reading is cached)
            targets = self.syncer.read(outcome.commit).notify
            self.notifier.configure({env: targets.get(env, ()) for env in outcome.environments})
        # a commit held for approvals or by a freeze: the environment's notify: targets hear it
        for env, commit, ref, hold in self.approvals.take_announcements():
            url = commit_page(self.settings, commit)
            why = (describe(hold),)
            self.notifier.notify(
                Transition(env, commit, ref, "progressing", "suspended", why, url, time.time())
            )

    # -- notifications: every transition reaches the notifier here
    def _deploy_finished(self, environment: str, record: DeployRecord) -> None:
        """A deployment of ``environment`` converged, degraded or failed (the deploy watcher's thread)."""
        self.metrics.deploy_finished(environment, record)
        state = {"converged": "healthy", "failed": "failed", "degraded": "degraded"}.get(record.state)
        if state is not None:  # None: superseded, the newer commit's own outcome will tell
            self._notify(environment, record, state)

    def _deploy_health(self, environment: str, record: DeployRecord, previous: str) -> None:
        """A deployment's health word changed (the deploy watcher's thread): a pending one
        waiting for a promotion is worth a message; the newest finished one's word is the
        environment's health after its deployment ended (degraded later, healthy again)."""
        if record.is_pending:
            if record.health == "suspended":
                self._notify(environment, record, "suspended", previous)
            return
        self._notify(environment, record, record.health, previous, at=time.time())

    def _notify(
        self,
        environment: str,
        record: DeployRecord,
        state: str,
        previous: str = "progressing",
        *,
        at: float | None = None,
    ) -> None:
        reasons = tuple(
            ": ".join(str(r[k]) for k in ("node", "replica", "reason") if r.get(k)) for r in record.reasons
        )
        if not reasons and record.failed is not None and state != "healthy":
            node, reason = record.failed
            reasons = (f"{node}: {reason}" if node else reason,)
        if at is None:
            at = record.finished_at if record.finished_at is not None else time.time()
        url = commit_page(self.settings, record.commit)
        self.notifier.notify(
            Transition(environment, record.commit, record.ref, previous, state, reasons, url, at)
        )

    def _remember_failures(self) -> None:
        """After a restart: the problem an environment's last deployment was notified of (its
        verdict, or the health followed since) is not sent again, and its end is sent as
        recovered."""
        for env, records in sorted(self.history.by_env.items()):
            last = next((r for r in records if r.state in ("converged", "failed", "degraded")), None)
            problem = open_problem(last.state, last.health) if last is not None else None
            if last is not None and problem is not None:
                self.notifier.remember(env, last.commit, problem)

    # -- reading
    def is_ready(self) -> bool:
        """Active: broker connected and repository fetched. Standby: connected, so it
        holds the lease's view and can take over (it answers webhooks either way)."""
        if self.role == "standby":
            return self.mqtt.is_connected
        return self.mqtt.is_connected and self.git.fetched_at is not None

    def public_status(self) -> dict[str, Any]:
        """What anyone may see (``/status`` without a token)."""
        return public_view(self)

    def status(self) -> dict[str, Any]:
        """Everything (``/status`` with the token)."""
        return full_view(self)
