"""Merge-request previews, end to end: deploy on a review, stop on close, merge or staleness.

config-sync's service runs every call here on its ``reviews`` worker (one thread): the
review of a merge request (:meth:`PreviewManager.review`, from ``Syncer.review``), a close
or merge (:meth:`PreviewManager.stop_mr`) and the expiry poll (:meth:`PreviewManager.expire`).
A preview publishes through the same :class:`DesiredPublisher` as every ref, with a
:class:`Claim` on its own environment alone and no ``sync`` topic: the default ref never
counts it as an environment to clear, and it never touches the environment's own items.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from config_sync.models import Claim
from config_sync.previews.derive import (
    PORT_FIRST,
    PORT_LAST,
    PreviewSpec,
    PreviewUnplaceable,
    allocate_ports,
    choose_node,
    derive,
    preview_spec,
    published_ports,
    select_services,
)
from config_sync.previews.state import DEPLOYED, FAILED, WAITING, addresses, note_section, previous_ports
from config_sync.publication.order import json_object
from config_sync.publication.sender import DesiredPublisher
from phrame.config_repo import ConfigRepo, ReadCache, validate
from phrame.config_repo.preview_rules import preview_name
from phrame.config_repo.render import render_checked
from schemas import Topics, canonical_json

log = logging.getLogger(__name__)
MR_REF = "merge-requests/{iid}"  # the ``ref`` a preview publishes under


class RepoReader(Protocol):
    """The part of config-sync's clone a preview reads: a tree at a commit."""

    def load(self, sha: str, *, cache: ReadCache | None = None) -> tuple[ConfigRepo, list[Any]]: ...


class ReviewApps(Protocol):
    """GitLab's side of previews (:class:`config_sync.previews.gitlab_review.GitLabReviewApps`)."""

    def started(self, preview: str, sha: str, ref: str) -> str | None: ...  # the environment's page

    def stopped(self, preview: str) -> None: ...

    def approvals(self, iid: int) -> int: ...


def gitlab_name(preview: str) -> str:
    return f"review/{preview}"


class PreviewManager:
    def __init__(
        self,
        git: RepoReader,
        publisher: DesiredPublisher,
        topics: Topics,
        *,
        fleet: Callable[[], frozenset[str] | None] = lambda: None,
        review_apps: ReviewApps | None = None,
        clock: Callable[[], float] = time.time,
        read_cache: ReadCache | None = None,
        ports: tuple[int, int] = (PORT_FIRST, PORT_LAST),
    ) -> None:
        self.ports = ports  # PHRAME_PREVIEW_PORTS
        self.git, self.publisher, self.topics = git, publisher, topics
        self.fleet = fleet  # the default ref's inventory: every node keeps its manifest
        self.review_apps = review_apps
        self.clock = clock
        self.read_cache = read_cache
        self.records: dict[str, dict[str, Any]] = {}  # preview name -> its published record
        self.forks: dict[int, bool] = {}  # iid -> from another project (told by the webhook)

    # -- state
    def restore(self, published: Mapping[str, bytes]) -> None:
        """Read every preview's record back (at start-up, from the rebuilt desired plane)."""
        for topic, raw in published.items():
            try:
                parsed = self.topics.parse(topic)
            except ValueError:
                continue
            record = json_object(raw) if parsed.kind == "preview" else None
            if record is not None and parsed.environment == record.get("preview"):
                self.records[str(parsed.environment)] = record
        if self.records:
            log.info("previews read back: %s", ", ".join(sorted(self.records)))

    def of_mr(self, iid: int) -> list[dict[str, Any]]:
        return [r for r in self.records.values() if r.get("mr_iid") == iid]

    def is_approved(self, iid: int) -> bool:
        """A fork's merge request may deploy a preview: GitLab shows at least one approval.
        Without GitLab there is no approval to read, so it waits (the plan note says so);
        this is the one place another approval source would answer."""
        if self.review_apps is None:
            return False
        return self.review_apps.approvals(iid) >= 1

    # -- the review of a merge request
    def review(
        self,
        iid: int,
        *,
        source_branch: str,
        target_ref: str,
        sha: str,
        target_sha: str,
        changed: Iterable[str],
        head_errors: list[dict[str, Any]],
    ) -> str:
        """Deploy, move or hold the previews of ``iid`` at ``sha``; returns the note section.
        ``changed``: the environments the head changes; only those with ``preview:`` in the
        target's head (``target_sha``) get one, so a merge request cannot grant itself one."""
        target = self._load(target_sha)
        if target.problems:  # its preview: blocks cannot be trusted: the previews stay as they are
            log.warning(
                "!%d: the target %s does not validate; its previews are left as they are",
                iid,
                target_sha[:12],
            )
            return note_section(self.of_mr(iid))
        if head_errors:  # what it changes is unknown: its previews say why they stay as they are
            changed = {str(r["environment"]) for r in self.of_mr(iid)}
        specs = {env: s for env in sorted(set(changed)) if (s := preview_spec(target, env)) is not None}
        head = self._load(sha) if not head_errors else None
        wanted = {preview_name(env, iid) for env in specs}
        stopped = []
        for record in self.of_mr(iid):
            if record["preview"] not in wanted:
                self.stop(record["preview"])
                stopped.append(record["preview"])
        for env, spec in specs.items():
            self._one(iid, env, spec, source_branch, target_ref, sha, target, head, head_errors)
        return note_section(self.of_mr(iid), stopped=stopped)

    def _one(
        self,
        iid: int,
        env: str,
        spec: PreviewSpec,
        source_branch: str,
        target_ref: str,
        sha: str,
        target: ConfigRepo,
        head: ConfigRepo | None,
        head_errors: list[dict[str, Any]],
    ) -> None:
        name = preview_name(env, iid)
        before = self.records.get(name)
        now = self.clock()
        fork = self.forks.get(iid, bool((before or {}).get("fork")))
        record: dict[str, Any] = {
            "preview": name,
            "environment": env,
            "mr_iid": iid,
            "source_branch": source_branch,
            "target_ref": target_ref,
            "commit": (before or {}).get("commit"),
            "state": FAILED,
            "node": (before or {}).get("node"),
            "services": (before or {}).get("services", []),
            "addresses": (before or {}).get("addresses", []),
            "fork": fork,
            "gitlab_environment": gitlab_name(name) if self.review_apps is not None else None,
            "updated_at": now,
            "stop_at": now + spec.auto_stop_h * 3600,
        }
        if fork and not self.is_approved(iid):
            record |= {"state": WAITING, "reason": _waiting(self.review_apps is not None)}
        elif head is None:
            first = head_errors[0] if head_errors else {"message": "unreadable"}
            where = f"{first['file']}:{first.get('line', 1)}: " if "file" in first else ""
            record["reason"] = (
                f"the head does not validate ({where}{first['message']}); the last preview stays"
            )
        elif env not in head.environments:
            record["reason"] = f"the head has no environment {env}"
        else:
            try:
                record |= self._deploy(iid, env, spec, sha, target, head, before)
            except PreviewUnplaceable as e:
                record["reason"] = f"{e}; the last preview stays"
        self._save(record)
        if record["state"] == DEPLOYED and self.review_apps is not None:
            url = self.review_apps.started(name, sha, source_branch)
            if url and url != record.get("gitlab_url"):
                self._save({**record, "gitlab_url": url})
        log.info("preview %s of !%d at %s: %s", name, iid, sha[:12], record["state"])

    def _deploy(
        self,
        iid: int,
        env: str,
        spec: PreviewSpec,
        sha: str,
        target: ConfigRepo,
        head: ConfigRepo,
        before: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        name = preview_name(env, iid)
        source = head.environments[env]
        services = select_services(source, spec.services)
        if not services:
            raise PreviewUnplaceable("none of the preview's services is in the head")
        node = choose_node(target, spec, name)
        mappings = published_ports(source, services)
        ports = allocate_ports(
            mappings,
            used=self._used_ports(node, name),
            previous=previous_ports(before),
            first=self.ports[0],
            last=self.ports[1],
        )
        derived = derive(head, env, iid, services=services, node=node, ports=ports)
        derived.nodes = dict(target.nodes)  # the target's inventory decides where it may run
        rendered = render_checked(derived, sha).topics(self.topics)
        self._publish(iid, name, sha, rendered)
        return {
            "state": DEPLOYED,
            "commit": sha,
            "node": node,
            "services": services,
            "addresses": addresses(node, mappings, ports),
        }

    def _used_ports(self, node: str, preview: str) -> set[int]:
        """Host ports the items of other environments publish on ``node`` now."""
        used: set[int] = set()
        for topic, raw in _snapshot(self.publisher.published):
            try:
                parsed = self.topics.parse(topic)
            except ValueError:
                continue
            if parsed.kind != "containers" or parsed.node != node or parsed.environment == preview:
                continue
            doc = json_object(raw) or {}
            used |= {p["host_port"] for p in doc.get("ports") or [] if isinstance(p.get("host_port"), int)}
        return used

    # -- stopping
    def stop_mr(self, iid: int) -> list[str]:
        """Stop every preview of ``iid`` (closed or merged)."""
        names = [r["preview"] for r in self.of_mr(iid)]
        for name in names:
            self.stop(name)
        self.forks.pop(iid, None)
        return names

    def expire(self) -> list[str]:
        """Stop the previews whose ``stop_at`` has passed (the ``reviews`` worker's poll)."""
        now = self.clock()
        stale = sorted(n for n, r in self.records.items() if float(r.get("stop_at", 0)) <= now)
        for name in stale:
            log.info("preview %s had no update for its auto_stop_h: removing it", name)
            self.stop(name)
        return stale

    def stop(self, name: str) -> None:
        """Clear ``name``'s items and record; stop its GitLab environment."""
        record = self.records.get(name) or {}
        iid = int(record.get("mr_iid", 0))
        self._publish(iid, name, str(record.get("commit") or ""), {})
        self.publisher.broker.publish_batch(
            [(self.topics.env_preview(name), None)], timeout=self.publisher.timeout
        )
        self.records.pop(name, None)
        if self.review_apps is not None:
            self.review_apps.stopped(name)
        log.info("preview %s stopped", name)

    # -- plumbing
    def _publish(self, iid: int, name: str, sha: str, rendered: Mapping[str, dict[str, Any]]) -> None:
        claim = Claim(environments=frozenset({name}), nodes=self.fleet(), reports_sync=False)
        self.publisher.publish_commit(
            ref=MR_REF.format(iid=iid), commit=sha or "0" * 40, claim=claim, rendered=rendered, errors=[]
        )

    def _save(self, record: dict[str, Any]) -> None:
        topic = self.topics.env_preview(record["preview"])
        self.publisher.broker.publish_batch([(topic, canonical_json(record))], timeout=self.publisher.timeout)
        self.records[record["preview"]] = record

    def _load(self, sha: str) -> ConfigRepo:
        repo, problems = self.git.load(sha, cache=self.read_cache)
        validate(repo, problems, cache=self.read_cache)
        return repo


def _waiting(with_gitlab: bool) -> str:
    if with_gitlab:
        return "from a fork: the preview deploys once the merge request has an approval in GitLab"
    return (
        "from a fork: the preview deploys once the merge request has an approval, which only "
        "GitLab records (PHRAME_GIT_HOST=gitlab); the local git host holds it"
    )


def _snapshot(published: Mapping[str, bytes] | None) -> list[tuple[str, bytes]]:
    """The published topics, copied while another worker's publication may change them."""
    for _ in range(5):
        try:
            return list((published or {}).items())
        except RuntimeError:  # changed size during the copy: copy again
            continue
    return []
