"""Active and standby: which config-sync may publish, decided by a lease on the broker, purely.

The lease is one retained topic, ``<prefix>/desired/leases/config-sync`` (schema
``desired-lease``): the holder's id, a term and the lease's length. The active renews it
every third of the lease; a standby that has seen no renewal for a whole lease (on its own
monotonic clock, counted from when the last one arrived) claims the next term. The holder
counts its lease from when it *sent* its last acknowledged renewal, minus a margin, so it
stops publishing before any standby may take over (the fence: ``may_publish``). Two claims
of one term are decided by the broker's order: both claimants see both, the later wins; a
claim is decided ``settle_s`` after it came back from the broker, however slowly it did.
No I/O and no clock here (``config_sync.lease_client`` runs it); ``now`` is monotonic.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

MARGIN = 0.2  # of the lease: the holder stops publishing this much before a standby may claim


class Role(enum.Enum):
    STANDBY = "standby"
    CLAIMING = "claiming"  # a claim sent; waiting for the broker's order to settle
    ACTIVE = "active"
    LOST = "lost"  # was active and is no longer: publishes nothing again (the process exits)


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    term: int
    lease_s: float
    ts: float  # the writer's wall clock: for people, never for the decision

    def payload(self) -> bytes:
        doc = {"holder": self.holder, "term": self.term, "lease_s": self.lease_s, "ts": round(self.ts, 3)}
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def parse(cls, doc: dict[str, object]) -> LeaseRecord:
        """From a payload already checked against ``desired-lease``."""
        holder, term, lease_s, ts = doc["holder"], doc["term"], doc["lease_s"], doc["ts"]
        assert isinstance(holder, str) and isinstance(term, int)
        assert isinstance(lease_s, int | float) and isinstance(ts, int | float)
        return cls(holder, term, float(lease_s), float(ts))


class Action(enum.Enum):
    WAIT = "wait"
    CLAIM = "claim"
    RENEW = "renew"


class Lease:
    """One instance's view of the lease and what it does next.

    ``observe`` each lease message, ``decide`` on a timer (``next_action``), report sends with
    ``sent``; ``settle`` ends a claim once the broker's order had time to reach everyone.
    """

    def __init__(self, me: str, *, lease_s: float, settle_s: float) -> None:
        self.me = me
        self.lease_s = lease_s
        self.settle_s = settle_s
        self.role = Role.STANDBY
        self.seen: LeaseRecord | None = None  # the last lease message, whoever wrote it
        self.seen_at: float | None = None  # when it arrived (a renewal counts as one)
        self.listening_since: float | None = None  # subscribed (again) at: the retained one may come
        self.term = 0  # the term this instance claimed or holds
        self.claimed_at: float | None = None
        self.echo_at: float | None = None  # our claim came back from the broker at
        self.acked_at: float | None = None  # when the last acknowledged claim or renewal was sent
        self.lost_why = ""

    # -- inputs
    def listening(self, now: float) -> None:
        """Subscribed (first time or after a reconnect): a silence counts from now."""
        self.listening_since = now
        if self.seen is not None and self.role is not Role.ACTIVE:
            self.seen_at = now

    def observe(self, record: LeaseRecord | None, now: float) -> None:
        """A lease message (None: the topic was cleared)."""
        if record is None:
            return
        self.seen, self.seen_at = record, now
        mine = (record.term, record.holder) == (self.term, self.me)
        if self.role is Role.CLAIMING and mine and self.echo_at is None:
            self.echo_at = now
        if self.role is Role.ACTIVE and not mine and record.term >= self.term:
            self._lose(f"{record.holder} holds term {record.term}")

    def sent(self, record: LeaseRecord, sent_at: float) -> None:
        """Our claim or renewal, sent at ``sent_at``, was acknowledged by the broker."""
        if record.term != self.term or self.role in (Role.LOST, Role.STANDBY):
            return
        self.acked_at = sent_at

    # -- decisions
    def next_action(self, now: float) -> tuple[Action, LeaseRecord | None]:
        """What to send now (a claim or a renewal, and its record), after settling a claim
        and noticing an expired lease of our own."""
        if self.role is Role.CLAIMING and self._is_settled(now):
            self._settle(now)
        if self.role is Role.ACTIVE and not self.may_publish(now):
            self._lose("the lease was not renewed in time (no broker?)")
        if self.role is Role.ACTIVE:
            assert self.acked_at is not None
            if now - self.acked_at >= self.lease_s / 3:
                return Action.RENEW, LeaseRecord(self.me, self.term, self.lease_s, 0.0)
            return Action.WAIT, None
        if self.role is Role.STANDBY and self._is_free(now):
            self.term = (self.seen.term if self.seen else 0) + 1
            self.role, self.claimed_at, self.acked_at, self.echo_at = Role.CLAIMING, now, None, None
            return Action.CLAIM, LeaseRecord(self.me, self.term, self.lease_s, 0.0)
        return Action.WAIT, None

    def may_publish(self, now: float) -> bool:
        """The fence: only the active, and only well inside its last acknowledged lease."""
        if self.role is not Role.ACTIVE or self.acked_at is None:
            return False
        return now < self.acked_at + self.lease_s * (1 - MARGIN)

    def wait_s(self, now: float) -> float:
        """How long until the next decision could differ."""
        if self.role is Role.CLAIMING and self.echo_at is not None:
            return max(0.0, self.echo_at + self.settle_s - now)
        if self.role is Role.ACTIVE and self.acked_at is not None:
            return max(0.0, self.acked_at + self.lease_s / 3 - now)
        return min(self.lease_s / 10, 0.5)

    def _is_free(self, now: float) -> bool:
        if self.listening_since is None:
            return False  # not subscribed: we cannot know
        if self.seen is None or self.seen_at is None:
            # no retained lease: the topic is free once it had time to arrive
            return now - self.listening_since >= self.settle_s
        return now - self.seen_at >= self.seen.lease_s

    def _is_settled(self, now: float) -> bool:
        """A claim is decided ``settle_s`` after it came back (a rival's claim delivered after
        ours reaches us within that), or given up when it never came back within a lease."""
        if self.echo_at is not None:
            return now - self.echo_at >= self.settle_s
        return self.claimed_at is not None and now - self.claimed_at >= self.lease_s

    def _settle(self, now: float) -> None:
        seen = self.seen
        ours = seen is not None and (seen.holder, seen.term) == (self.me, self.term)
        # a claim that took most of a lease to settle is not held long enough to publish
        if ours and self.acked_at is not None and now < self.acked_at + self.lease_s * (1 - MARGIN):
            self.role = Role.ACTIVE
            return
        # another claim came after ours (or ours was never acknowledged): stand by behind it
        self.role, self.claimed_at, self.acked_at, self.echo_at = Role.STANDBY, None, None, None
        self.seen_at = now  # a whole lease of silence again before the next claim

    def _lose(self, why: str) -> None:
        self.role, self.lost_why = Role.LOST, why
