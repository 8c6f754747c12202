"""The watcher from its settings: the clone cache (a ``GitWriter``, with the watcher's
author), the target for ``PHRAME_GIT_HOST`` and the registry credentials. Builds without
touching the network. Called by ``phrame image-watch``."""

from __future__ import annotations

from image_watch.proposal import AUTHOR
from image_watch.settings import WatchSettings
from image_watch.targets import GitLabTarget, LocalTarget, Target
from image_watch.watcher import ImageWatcher
from phrame.git.writing import GitWriter
from phrame.gitlab import GitLabProject


def build_watcher(settings: WatchSettings) -> ImageWatcher:
    git = GitWriter(
        settings.repo_url,
        settings.clone_cache,
        ca_file=settings.git_ca_file,
        timeout_s=settings.git_timeout_s,
    )
    git.author = AUTHOR
    target: Target
    if settings.git_host == "gitlab":
        assert settings.gitlab_url and settings.gitlab_project
        project = GitLabProject(
            settings.gitlab_url,
            settings.gitlab_token,
            settings.gitlab_project,
            timeout=settings.git_timeout_s,
        )
        target = GitLabTarget(project, settings.track_ref)
    else:
        target = LocalTarget(git)
    return ImageWatcher(
        git,
        target,
        track=settings.track_ref,
        credentials=settings.credentials(),
        plain_http=settings.plain_http,
        platform=settings.platform,
    )
