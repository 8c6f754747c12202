"""One pass of the image watcher, and its loop: fetch the config repo, read the tracked
head, and for each service an ``images:`` policy names, ask the registry for the tags, pick
the highest one the policy allows past the service's current tag that is at least
``min_age`` old, and propose it through the target, unless its branch exists (proposed
already: also after a restart, since the branch is the record).

Called by ``phrame image-watch`` (a ``BackgroundLoop`` tick every
``PHRAME_IMAGE_WATCH_INTERVAL_S``, or ``--once``) and tests. A registry or service that
fails is logged and skipped; the others go on. Never writes the tracked branch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from image_watch.names import api_host, registry_and_path
from image_watch.proposal import RewriteError, Update, rewrite
from image_watch.registry import Credentials, RegistryClient, RegistryError
from image_watch.targets import Target
from phrame.config_repo.image_policy import ImagePolicy, PolicyError, policies, split_image
from phrame.config_repo.model import ConfigRepo
from phrame.git import GitError
from phrame.git.cache import GitCache
from phrame.gitlab import GitLabError

log = logging.getLogger(__name__)

MAX_INSPECTED = 10  # candidates inspected per service and pass (each costs two or three requests)


@dataclass(frozen=True)
class Outcome:
    env: str
    service: str
    state: str  # proposed | already-proposed | up-to-date | too-young | failed
    detail: str = ""
    update: Update | None = None


class ImageWatcher:
    def __init__(
        self,
        git: GitCache,
        target: Target,
        *,
        track: str,
        credentials: dict[str, Credentials] | None = None,
        plain_http: frozenset[str] = frozenset(),
        platform: tuple[str, str] = ("linux", "amd64"),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.git, self.target, self.track = git, target, track
        self.credentials = credentials or {}
        self.plain_http, self.platform, self.clock = plain_http, platform, clock
        self._clients: dict[str, RegistryClient] = {}

    def client(self, host: str) -> RegistryClient:
        if host not in self._clients:
            self._clients[host] = RegistryClient(
                api_host(host),
                credentials=self.credentials.get(host) or self.credentials.get(api_host(host)),
                plain_http=host in self.plain_http,
                platform=self.platform,
            )
        return self._clients[host]

    def run_once(self) -> list[Outcome]:
        self.git.fetch()
        head = self.git.head(self.track)
        repo, _problems = self.git.load(head)
        outcomes = []
        for env_name, env in sorted(repo.environments.items()):
            data = env.doc.data if env.doc is not None and isinstance(env.doc.data, dict) else {}
            for service, policy in sorted(policies(data).items()):
                try:
                    outcome = self.check(repo, env_name, policy, head)
                except (RegistryError, GitError, GitLabError, RewriteError, PolicyError) as e:
                    outcome = Outcome(env_name, service, "failed", str(e))
                    log.warning("image update of %s/%s: %s", env_name, service, e)
                outcomes.append(outcome)
        return outcomes

    def tick(self, interval_s: float) -> float:
        for o in self.run_once():
            log.debug("%s/%s: %s %s", o.env, o.service, o.state, o.detail)
        return interval_s

    def check(self, repo: ConfigRepo, env: str, policy: ImagePolicy, head: str) -> Outcome:
        doc = repo.environments[env].services.get(policy.service)
        image = doc.data.get("image") if doc is not None and isinstance(doc.data, dict) else None
        if doc is None or not isinstance(image, str):
            return Outcome(env, policy.service, "failed", "no such service with an image")
        repository, current, _digest = split_image(image)
        host, path = registry_and_path(repository)
        registry = self.client(host)
        newer = policy.newer(current, registry.tags(path))
        if not newer:
            return Outcome(env, policy.service, "up-to-date", f"{image}: no newer tag allowed")
        now = self.clock()
        for tag in newer[:MAX_INSPECTED]:
            info = registry.inspect(path, tag)
            if policy.min_age_s and (
                info.created is None or (now - info.created).total_seconds() < policy.min_age_s
            ):
                continue  # too young (or no created time to judge): a lower tag may be old enough
            update = Update(env, policy.service, doc.file, repository, image, tag, info.digest)
            if self.target.is_proposed(update):
                return Outcome(env, policy.service, "already-proposed", update.branch, update)
            line, _col = doc.position(["image"])
            text = self.git.read_file(head, doc.file)
            if text is None:
                raise GitError(f"{doc.file} is not in {head[:12]}")
            content = rewrite(text.decode(), line, update.image).encode()
            self.target.propose(update, base=head, content=content)
            log.info("%s/%s: proposed %s on branch %s", env, policy.service, update.image, update.branch)
            return Outcome(env, policy.service, "proposed", update.branch, update)
        return Outcome(env, policy.service, "too-young", f"newer tags {newer[:3]} are younger than min_age")
