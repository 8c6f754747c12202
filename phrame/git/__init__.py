"""The git adapter of every phrame part: a bare clone cache, one ref policy, safe writes.

``cache.GitCache`` fetches and reads (config-sync, placement, ``phrame plan``);
``writing.GitWriter`` adds commit and a never-forced push (placement, config-sync's rollback);
``refs`` is the pure policy of branches and tags. The only package that imports gitpython
besides ``phrame.config_repo.sources`` (which reads trees).
"""

from __future__ import annotations

from phrame.git.errors import GitError, PushRejected, RefMissing, TagTargetError

__all__ = ["GitError", "PushRejected", "RefMissing", "TagTargetError"]
