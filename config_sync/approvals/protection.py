"""Whether a commit is held for an environment, purely: protection, approvals, freezes.

:class:`~config_sync.approvals.controller.Approvals` calls :func:`protection_of` on the
``environment.yaml`` of the commit last deployed and of the commit at hand, :func:`judging`
to pick the one in force (the last deployed one: a commit that lowers or removes
``protected:`` or ``freeze:`` still meets what it would remove; the commit's own only for
an environment's first deployment), then :func:`decide` with the approvals recorded and
``now``. No clock, no I/O; a freeze that does not read (an older commit's file, say) is
left out, never raised: validation has reported it on its own commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from phrame.config_repo.freeze import FreezeError, Window, frozen_until, window_of

WAITING_APPROVAL, FROZEN = "waiting-approval", "frozen"


@dataclass(frozen=True)
class Protection:
    approvals: int = 0  # how many distinct approvers a commit needs (0: not protected)
    windows: tuple[Window, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.approvals <= 0 and not self.windows


@dataclass(frozen=True)
class Approval:
    """One approval of ``commit`` for an environment: who (the token holder's name, or a
    GitLab user), when (wall clock), through what (``phrame`` or ``gitlab``)."""

    commit: str
    by: str
    at: float
    override_freeze: bool = False
    via: str = "phrame"

    def to_doc(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "by": self.by,
            "at": self.at,
            "override_freeze": self.override_freeze,
            "via": self.via,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Approval:
        return cls(
            str(doc["commit"]),
            str(doc["by"]),
            float(doc["at"]),
            bool(doc.get("override_freeze", False)),
            str(doc.get("via", "phrame")),
        )


@dataclass(frozen=True)
class Hold:
    """Why a commit is not published for an environment yet."""

    reason: str  # waiting-approval | frozen
    needed: int = 0
    approvers: tuple[str, ...] = ()
    until: float | None = None  # frozen: when the freeze ends
    details: dict[str, Any] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "state": "suspended",
            "reason": self.reason,
            "approvals": {"needed": self.needed, "by": list(self.approvers)},
        }
        if self.until is not None:
            doc["until"] = self.until
        return doc


def describe(doc: Mapping[str, Any]) -> str:
    """A hold's words (``phrame/deploy``, ``phrame status``), from :meth:`Hold.to_doc`:
    ``suspended (waiting-approval): 0/1 approvals``, ``suspended (frozen) until <UTC>``."""
    approvals = doc.get("approvals") or {}
    count = f"{len(approvals.get('by') or ())}/{approvals.get('needed', 0)} approvals"
    if doc.get("reason") == FROZEN:
        until = doc.get("until")
        end = "unknown" if not isinstance(until, (int, float)) else utc(float(until))
        return f"suspended (frozen) until {end}"
    return f"suspended (waiting-approval): {count}"


def utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def protection_of(settings: Mapping[str, Any] | None) -> Protection:
    """``protected:`` and ``freeze:`` of one ``environment.yaml`` (as read; None: no file)."""
    if not settings:
        return Protection()
    protected = settings.get("protected")
    needed = protected.get("approvals", 0) if isinstance(protected, Mapping) else 0
    windows = []
    for entry in settings.get("freeze") or ():
        if isinstance(entry, Mapping):
            try:
                windows.append(window_of(entry))
            except (FreezeError, KeyError, TypeError, ValueError):
                continue
    return Protection(int(needed) if isinstance(needed, int) else 0, tuple(windows))


def judging(before: Protection | None, own: Protection) -> Protection:
    """The protection that judges a commit: the environment's as last deployed; its own
    only when the environment was never deployed (``before`` is None)."""
    return own if before is None else before


def approvers(approvals: Iterable[Approval], commit: str) -> tuple[str, ...]:
    """The distinct holders who approved ``commit`` (the same one twice is one), in order."""
    seen: dict[str, None] = {}
    for a in approvals:
        if a.commit == commit:
            seen.setdefault(a.by, None)
    return tuple(seen)


def decide(protection: Protection, approvals: Sequence[Approval], commit: str, now: float) -> Hold | None:
    """Whether ``commit`` is held under ``protection`` at ``now`` (None: it may deploy).
    A freeze in force holds it unless an approval of it overrides the freeze; then it
    needs ``protection.approvals`` distinct approvers."""
    who = approvers(approvals, commit)
    needed = max(0, protection.approvals)
    overridden = any(a.commit == commit and a.override_freeze for a in approvals)
    end = frozen_until(protection.windows, now) if protection.windows else None
    if end is not None and not overridden:
        return Hold(FROZEN, needed, who, until=end)
    if len(who) < needed:
        return Hold(WAITING_APPROVAL, needed, who)
    return None
