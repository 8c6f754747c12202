"""Compose imports into a local bare repository (``PHRAME_GIT_HOST=local`` with
``PHRAME_REPO_URL``, as ``phrame dev`` runs it): one commit on the tracked branch's head,
pushed to a new ``phrame-import/...`` branch through the one git adapter, ``phrame.git``.

Called by :mod:`topic_api.compose_routes` in a worker thread (git blocks); one import at a
time. It never pushes to the tracked branch, never writes a tag and never forces: a branch
that exists already is refused (409), and a push that finds it meanwhile is rejected.
"""

from __future__ import annotations

import logging
import threading

from phrame.config_repo import ConfigError
from phrame.config_repo.sources import GitSource
from phrame.git import GitError, PushRejected, RefMissing
from phrame.git.writing import GitWriter
from topic_api.imports.check import problems_on
from topic_api.imports.proposal import AUTHOR, Draft, ImportRefused, Proposal
from topic_api.imports.settings import ImportSettings

log = logging.getLogger(__name__)


class LocalImports:
    def __init__(self, settings: ImportSettings) -> None:
        assert settings.repo_url is not None
        self.track = settings.track_ref
        self.git = GitWriter(
            settings.repo_url,
            settings.clone_cache,
            ca_file=settings.git_ca_file,
            timeout_s=settings.git_timeout_s,
        )
        self.git.author = AUTHOR
        self._lock = threading.Lock()  # fetch, check and push of one import at a time

    def propose(self, draft: Draft, *, dry_run: bool) -> Proposal:
        with self._lock:
            try:
                return self._propose(draft, dry_run=dry_run)
            except PushRejected as e:
                raise ImportRefused(409, f"branch {draft.branch} appeared meanwhile: {e}") from e
            except RefMissing as e:
                raise ImportRefused(409, f"cannot import: {e}") from e
            except GitError as e:
                raise ImportRefused(503, f"the config repository is unavailable: {e}") from e

    def _propose(self, draft: Draft, *, dry_run: bool) -> Proposal:
        self.git.fetch()
        if self.git.is_tag(self.track):
            raise ImportRefused(409, f"PHRAME_TRACK_REF {self.track!r} is a tag: an import needs a branch")
        head = self.git.head(self.track)
        if not dry_run and self.git.has_branch(draft.branch):
            raise ImportRefused(
                409,
                f"branch {draft.branch} exists: this import was proposed already (merge or delete it first)",
            )
        files, kept = self._changes(draft, head)
        try:
            source = GitSource(self.git.path, head)
        except ConfigError as e:
            raise GitError(str(e)) from e
        try:
            new, old = problems_on(source, files)
        finally:
            source.repo.close()
        if new:
            raise ImportRefused(
                422, f"the import does not validate on {self.track} at {head[:12]}: {new[0].format()}", new
            )
        proposal = Proposal(draft, files, kept, scope="repository", base=head, problems=old)
        if dry_run or not files:
            return proposal
        message = draft.commit_message(list(files))
        sha = self.git.commit_files(head, {p: t.encode() for p, t in files.items()}, message)
        self.git.push(sha, draft.branch)
        log.info("import into %s: pushed %s to %s for review", draft.env, sha[:12], draft.branch)
        proposal.branch, proposal.commit = draft.branch, sha
        return proposal

    def _changes(self, draft: Draft, head: str) -> tuple[dict[str, str], list[str]]:
        """(files that differ from the head, files left as they are): an existing
        ``environment.yaml`` is kept, as ``phrame import-compose`` keeps it."""
        files, kept = {}, []
        for path, text in draft.result.files.items():
            old = self.git.read_file(head, path)
            if old is not None and (path.endswith("/environment.yaml") or old == text.encode()):
                kept.append(path)
            else:
                files[path] = text
        return files, kept
