"""Each deployment as a GitLab deployment, so GitLab's Environments page shows which commit
runs where (as review apps and CI deployments do): one GitLab environment per phrame
environment, a deployment per commit deployed to it.

:class:`config_sync.deploys.history.DeployHistory` tells :meth:`GitLabEnvironments.note` of
every record it makes or judges (under its lock: it only notes and enqueues). One worker
(:class:`phrame.runtime.Runner`) converges GitLab for each (environment, commit): it finds
the deployment (created by this process, or by one before a restart) or creates it, and
moves it on from ``running``. GitLab away: retried with backoff; GitLab refusing: logged,
never retried until the record changes. It never delays or fails a deployment.
"""

from __future__ import annotations

import logging
import threading

from config_sync.deploys.records import CONVERGED, DEGRADED, FAILED, SUPERSEDED, DeployRecord
from phrame.gitlab import Deployment, Deployments, GitLabRefused, GitLabUnavailable
from phrame.runtime import Backoff, PermanentError, Runner, TemporaryError

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (environment, commit)
KEPT = 500  # deployments remembered; an older one is looked up again if it changes


def gitlab_status(record: DeployRecord) -> str:
    """The GitLab deployment status of a record: pending ones run, the rest have finished."""
    return {CONVERGED: "success", FAILED: "failed", DEGRADED: "failed", SUPERSEDED: "canceled"}.get(
        record.state, "running"
    )


class GitLabEnvironments:
    def __init__(self, deployments: Deployments, *, backoff: Backoff | None = None) -> None:
        self.deployments = deployments
        self._wanted: dict[Key, tuple[str, str]] = {}  # key -> (ref, GitLab status)
        self._known: dict[Key, Deployment] = {}
        self._lock = threading.Lock()
        self.runner: Runner[Key] = Runner(
            "gitlab-environments", self.sync, backoff=backoff or Backoff(1.0, 60.0)
        )

    def start(self) -> GitLabEnvironments:
        self.runner.start()
        return self

    def stop(self) -> None:
        self.runner.stop(timeout=2.0)

    def note(self, environment: str, record: DeployRecord) -> None:
        """A record was made or judged: GitLab should show it (any thread; only enqueues)."""
        key = (environment, record.commit)
        with self._lock:
            self._wanted[key] = (record.ref, gitlab_status(record))
            while len(self._wanted) > KEPT:
                old = next(iter(self._wanted))
                del self._wanted[old]
                self._known.pop(old, None)
        self.runner.queue.add(key)

    def sync(self, key: Key) -> None:
        environment, commit = key
        with self._lock:
            wanted, known = self._wanted.get(key), self._known.get(key)
        if wanted is None:
            return
        ref, status = wanted
        try:
            if known is None:
                known = self.deployments.find(environment, commit)
            if known is None:
                known = self.deployments.create(environment, commit, ref, status)
                log.info("GitLab deployment %d: %s at %s, %s", known.id, environment, commit[:12], status)
            elif known.status != status and known.status not in ("success", "failed", "canceled"):
                self.deployments.set_status(known.id, status)
                log.info("GitLab deployment %d: %s at %s, %s", known.id, environment, commit[:12], status)
                known = Deployment(known.id, status)
        except GitLabUnavailable as e:
            raise TemporaryError(f"GitLab deployment of {commit[:12]} to {environment}: {e.reason}") from e
        except GitLabRefused as e:
            raise PermanentError(
                f"GitLab refused the deployment of {commit[:12]} to {environment}: {e.reason}"
            ) from e
        with self._lock:
            if key in self._wanted:
                self._known[key] = known
