"""One image update, purely: which service, from what to which tag and digest; its branch,
the service file rewritten (only the ``image:`` value changes: comments and order stay), the
commit message and the merge request's text. Called by :mod:`image_watch.watcher` and the
targets; never does I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass

from image_watch.names import update_branch

IMAGE_LINE = re.compile(r"""^(?P<lead>\s*image\s*:\s*)(?P<q>["']?)(?P<value>[^\s"'#]+)(?P=q)(?P<rest>.*)$""")
AUTHOR = ("phrame-image-watch", "image-watch@phrame.invalid")


class RewriteError(ValueError):
    """The service file's ``image:`` is not a line this module can rewrite (flow style)."""


@dataclass(frozen=True)
class Update:
    env: str
    service: str
    path: str  # the service file, relative to the repository root
    repository: str  # as the service file names it (host/path, no tag)
    old_image: str
    tag: str
    digest: str

    @property
    def image(self) -> str:
        return f"{self.repository}:{self.tag}@{self.digest}"

    @property
    def branch(self) -> str:
        return update_branch(self.env, self.service, self.tag)

    @property
    def folder(self) -> str:
        """The branch folder of every update of this service (an older one is superseded)."""
        return self.branch.rsplit("/", 1)[0] + "/"

    @property
    def title(self) -> str:
        return f"{self.env}/{self.service}: image {self.repository}:{self.tag}"

    def message(self) -> str:
        return (
            f"{self.title}\n\n"
            f"The image watcher found tag {self.tag} allowed by the images: policy of {self.env}.\n"
            f"{self.path}: image {self.old_image} -> {self.image}\n"
        )

    def description(self) -> str:
        return (
            f"Raises `{self.service}` in `{self.env}` to `{self.repository}:{self.tag}`, pinned to "
            f"`{self.digest}`.\n\n"
            f"- before: `{self.old_image}`\n- after: `{self.image}`\n\n"
            "Proposed by `phrame image-watch` from the environment's `images:` policy; merging it "
            "deploys as any change (validation, the plan, the rollout's waves). An update to a "
            "newer tag closes this one."
        )


def rewrite(text: str, line: int, image: str) -> str:
    """``text`` with the ``image:`` value on line ``line`` (1-based) replaced by ``image``."""
    lines = text.splitlines(keepends=True)
    if not 1 <= line <= len(lines):
        raise RewriteError(f"line {line} is not in the file")
    body = lines[line - 1]
    end = body[len(body.rstrip("\r\n")) :]
    m = IMAGE_LINE.match(body.rstrip("\r\n"))
    if m is None:
        raise RewriteError(f"line {line} is not an 'image: VALUE' line: {body.strip()[:80]!r}")
    lines[line - 1] = f"{m['lead']}{m['q']}{image}{m['q']}{m['rest']}{end}"
    return "".join(lines)
