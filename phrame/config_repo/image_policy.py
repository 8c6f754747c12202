"""An environment's ``images:`` policy: which tags of a service's image the image watcher may
propose (a semver range or a tag pattern) and how old an image must be (``min_age``).

Pure. Called by :func:`phrame.config_repo.rules.semantic_problems` (the rules
``image-policy`` and ``unknown-service``, each at the value's file:line) and by the image
watcher (``image_watch``), which asks :meth:`ImagePolicy.newer` for the tags it may propose,
best first. Never reads a registry or a clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from phrame.config_repo.model import ConfigRepo, Document, PathPart
from phrame.config_repo.problems import Problem
from phrame.config_repo.semver_range import Range, RangeError, parse_range, parse_version
from schemas.registry import pointer

AGE = re.compile(r"(\d+)([smhd])")
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
IMAGE = re.compile(
    r"^(?P<name>[^@\s]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


class PolicyError(ValueError):
    """A policy that cannot be read; the message says which part, ``key`` which field."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def age_seconds(text: str) -> int:
    """``1h``, ``30m``, ``7d``, ``1d12h`` in seconds; ``PolicyError`` for anything else."""
    if not text or AGE.sub("", text) != "":
        raise PolicyError(f"min_age {text!r} is not a duration such as 30m, 1h, 7d or 1d12h", "min_age")
    return sum(int(n) * AGE_UNITS[u] for n, u in AGE.findall(text))


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """``repo[:tag][@digest]`` as (repository, tag, digest); ``PolicyError`` when unreadable."""
    m = IMAGE.match(image)
    if m is None or m["name"].endswith("/"):
        raise PolicyError(f"image {image!r} is not repository[:tag][@sha256:digest]")
    return m["name"], m["tag"], m["digest"]


@dataclass(frozen=True)
class ImagePolicy:
    service: str
    semver: Range | None = None
    pattern: re.Pattern[str] | None = None
    min_age_s: int = 0

    @classmethod
    def read(cls, service: str, spec: dict[str, Any]) -> ImagePolicy:
        """``PolicyError`` naming the bad part (a range, a regex, an age)."""
        semver = pattern = None
        if "semver" in spec:
            try:
                semver = parse_range(str(spec["semver"]))
            except RangeError as e:
                raise PolicyError(f"semver {spec['semver']!r}: {e}", "semver") from e
        if "pattern" in spec:
            try:
                pattern = re.compile(str(spec["pattern"]))
            except re.error as e:
                raise PolicyError(
                    f"pattern {spec['pattern']!r} is not a regular expression: {e}", "pattern"
                ) from e
            if pattern.groups > 1:
                raise PolicyError(
                    f"pattern {spec['pattern']!r} has {pattern.groups} groups: at most one (the order)",
                    "pattern",
                )
        if (semver is None) == (pattern is None):
            raise PolicyError("a policy has exactly one of semver or pattern")
        return cls(service, semver, pattern, age_seconds(str(spec.get("min_age", "0s"))))

    def order(self, tag: str) -> tuple[Any, ...] | None:
        """The tag's place in this policy's order, or None when the policy does not allow it.

        semver: the version. pattern (matched in full): its one group, or the whole tag,
        as a number when it is all digits (numbers sort before text)."""
        if self.semver is not None:
            v = parse_version(tag)
            return (v,) if v is not None and self.semver.allows(v) else None
        assert self.pattern is not None
        m = self.pattern.fullmatch(tag)
        if m is None:
            return None
        key = m.group(1) if self.pattern.groups else tag
        return (0, int(key), "") if key is not None and key.isdigit() else (1, 0, key or "")

    def newer(self, current: str | None, tags: Iterable[str]) -> list[str]:
        """The allowed tags past ``current``, highest first. A current tag the policy does not
        order (``latest``, outside the range) is passed by every allowed tag."""
        now = self.order(current) if current is not None else None
        if self.semver is not None and current is not None and now is None:
            v = parse_version(current)
            now = (v,) if v is not None else None  # outside the range: newer still means newer
        ranked = [(key, tag) for tag in set(tags) if (key := self.order(tag)) is not None]
        return [tag for key, tag in sorted(ranked, reverse=True) if now is None or key > now]


def policies(data: dict[str, Any]) -> dict[str, ImagePolicy]:
    """The readable policies of an environment's data (unreadable ones are left out: the
    rules report them)."""
    out: dict[str, ImagePolicy] = {}
    images = data.get("images")
    if not isinstance(images, dict):
        return out
    for service, spec in images.items():
        if not isinstance(service, str) or not isinstance(spec, dict):
            continue
        try:
            out[service] = ImagePolicy.read(service, spec)
        except PolicyError:
            continue
    return out


def _at(doc: Document, path: list[PathPart], rule: str, message: str) -> Problem:
    line, col = doc.position(path)
    return Problem(doc.file, line, col, rule, message, pointer(path))


def image_policy_problems(repo: ConfigRepo) -> Iterator[Problem]:
    for env in repo.environments.values():
        doc = env.doc
        if doc is None or not isinstance(doc.data, dict) or "images" not in doc.data:
            continue
        if not doc.is_sound("images"):
            continue  # the schema reported it
        for service, spec in doc.data["images"].items():
            where: list[PathPart] = ["images", service]
            if service not in env.services:
                msg = f"images policy for {service!r}: no such service in {env.dir}/services/"
                yield _at(doc, where, "unknown-service", msg)
                continue
            try:
                ImagePolicy.read(service, spec)
            except PolicyError as e:
                at: list[PathPart] = [*where, e.key] if e.key is not None and e.key in spec else where
                yield _at(doc, at, "image-policy", f"{service}: {e}")
                continue
            sdoc = env.services[service]
            image = sdoc.data.get("image") if isinstance(sdoc.data, dict) else None
            if not isinstance(image, str):
                yield _at(doc, where, "image-policy", f"{service}: the service has no image to update")
