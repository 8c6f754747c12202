"""config-sync's lease, purely: who claims, who holds, when the holder stops publishing.

A fake clock (plain numbers for ``now``): no broker, no sleeps. ``config_sync.lease``.
"""

from __future__ import annotations

import pytest

from config_sync.errors import SettingsError
from config_sync.lease import MARGIN, Action, Lease, LeaseRecord, Role
from config_sync.settings import SyncSettings
from schemas import Topics, load_json
from schemas.registry import check_payload

LEASE_S, SETTLE_S = 6.0, 0.5


def lease(me: str = "a") -> Lease:
    return Lease(me, lease_s=LEASE_S, settle_s=SETTLE_S)


def become_active(x: Lease, now: float = 0.0) -> float:
    """Claim an empty topic and settle the claim; returns the time it became active."""
    x.listening(now)
    assert x.next_action(now) == (Action.WAIT, None)  # the retained lease may still come
    now += SETTLE_S
    action, record = x.next_action(now)
    assert action is Action.CLAIM and record is not None and record.term == 1
    x.sent(record, now)
    x.observe(record, now + 0.01)  # our own claim, as the broker delivers it back
    assert x.next_action(now + SETTLE_S) == (Action.WAIT, None) and x.role is Role.CLAIMING
    now += SETTLE_S + 0.01
    assert x.next_action(now) == (Action.WAIT, None)
    assert x.role is Role.ACTIVE
    return now


def test_an_empty_topic_is_claimed_after_the_settle_and_held():
    x = lease()
    now = become_active(x)
    assert x.may_publish(now)
    # renewed every third of the lease, from the send of the last acknowledged one
    action, record = x.next_action(SETTLE_S + LEASE_S / 3)
    assert action is Action.RENEW and record is not None and record.term == 1


def test_a_standby_never_claims_a_lease_that_is_renewed():
    holder = LeaseRecord("a", 3, LEASE_S, 0.0)
    b = lease("b")
    b.listening(0.0)
    b.observe(holder, 0.1)  # the retained lease arrives
    for t in range(1, 60):
        b.observe(holder, t * LEASE_S / 3)  # renewals
        assert b.next_action(t * LEASE_S / 3 + 0.1) == (Action.WAIT, None)
        assert not b.may_publish(t * LEASE_S / 3 + 0.1)
    assert b.role is Role.STANDBY


def test_a_standby_claims_the_next_term_a_whole_lease_after_the_last_renewal():
    b = lease("b")
    b.listening(0.0)
    b.observe(LeaseRecord("a", 3, LEASE_S, 0.0), 1.0)  # then a dies: no more renewals
    assert b.next_action(1.0 + LEASE_S - 0.01) == (Action.WAIT, None)
    action, record = b.next_action(1.0 + LEASE_S)
    assert action is Action.CLAIM and record == LeaseRecord("b", 4, LEASE_S, 0.0)


def test_a_retained_lease_counts_from_its_arrival_not_its_timestamp():
    """A restarted standby cannot tell how old a retained lease is: it waits a whole lease."""
    b = lease("b")
    b.listening(100.0)
    b.observe(LeaseRecord("a", 1, LEASE_S, ts=0.0), 100.05)
    assert b.next_action(100.05 + LEASE_S - 0.1)[0] is Action.WAIT


def test_the_holder_stops_publishing_before_any_standby_may_claim():
    a, b = lease("a"), lease("b")
    t0 = become_active(a)
    b.listening(0.0)
    # a's last acknowledged renewal was sent at t0 and reached b later
    a.sent(LeaseRecord("a", 1, LEASE_S, 0.0), t0)
    b.observe(LeaseRecord("a", 1, LEASE_S, 0.0), t0 + 0.05)
    # a is paused (or cut off) and renews no more: its fence closes first
    a_stops = t0 + LEASE_S * (1 - MARGIN)
    assert a.may_publish(a_stops - 0.01) and not a.may_publish(a_stops)
    assert b.next_action(a_stops)[0] is Action.WAIT
    assert b.next_action(t0 + 0.05 + LEASE_S)[0] is Action.CLAIM
    # a, resuming, notices its lease ran out: it is lost for good, and publishes nothing
    a.next_action(t0 + LEASE_S * 2)
    assert a.role is Role.LOST and not a.may_publish(t0 + LEASE_S * 2)


def test_a_paused_holder_that_sees_a_higher_term_is_lost():
    a = lease("a")
    now = become_active(a)
    a.observe(LeaseRecord("b", 2, LEASE_S, 0.0), now + 1)
    assert a.role is Role.LOST and "b holds term 2" in a.lost_why
    assert not a.may_publish(now + 1)
    a.observe(LeaseRecord("a", 1, LEASE_S, 0.0), now + 2)  # nothing brings it back
    assert a.next_action(now + 2) == (Action.WAIT, None) and a.role is Role.LOST


def test_two_claims_of_one_term_the_later_one_the_broker_delivered_wins():
    a, b = lease("a"), lease("b")
    for x in (a, b):
        x.listening(0.0)
    ca, cb = a.next_action(SETTLE_S)[1], b.next_action(SETTLE_S)[1]
    assert ca is not None and cb is not None and ca.term == cb.term == 1
    a.sent(ca, SETTLE_S)
    b.sent(cb, SETTLE_S)
    for x in (a, b):  # the broker delivers a's claim, then b's, to both
        x.observe(ca, SETTLE_S + 0.01)
        x.observe(cb, SETTLE_S + 0.02)
    settled = 2 * SETTLE_S + 0.02
    for x in (a, b):
        x.next_action(settled)
    assert (a.role, b.role) == (Role.STANDBY, Role.ACTIVE)
    assert not a.may_publish(settled) and b.may_publish(settled)
    # a now waits a whole lease of b's silence before it claims again
    assert a.next_action(settled + LEASE_S - 0.1)[0] is Action.WAIT


def test_a_claim_that_comes_back_late_is_still_decided_by_the_broker_order():
    """Under load our claim's echo may take longer than the settle: we wait for it, rather
    than give up and wait a whole lease more."""
    b = lease("b")
    b.listening(0.0)
    b.observe(LeaseRecord("a", 1, LEASE_S, 0.0), 0.1)
    action, claim = b.next_action(0.1 + LEASE_S)
    assert action is Action.CLAIM and claim is not None
    b.sent(claim, 0.1 + LEASE_S)
    assert b.next_action(0.1 + LEASE_S + 1.5) == (Action.WAIT, None) and b.role is Role.CLAIMING
    b.observe(claim, 0.1 + LEASE_S + 1.6)  # back at last
    b.next_action(0.1 + LEASE_S + 1.6 + SETTLE_S)
    assert b.role is Role.ACTIVE and b.term == 2


def test_an_unacknowledged_claim_never_makes_an_active():
    a = lease("a")
    a.listening(0.0)
    action, claim = a.next_action(SETTLE_S)
    assert action is Action.CLAIM and claim is not None
    a.observe(claim, SETTLE_S + 0.01)  # delivered, but our PUBACK never came
    a.next_action(2 * SETTLE_S + 0.02)
    assert a.role is Role.STANDBY and not a.may_publish(2 * SETTLE_S + 0.02)


def test_not_listening_never_claims():
    a = lease("a")
    assert a.next_action(100.0) == (Action.WAIT, None)


def test_a_reconnected_standby_waits_a_whole_lease_again():
    b = lease("b")
    b.listening(0.0)
    b.observe(LeaseRecord("a", 1, LEASE_S, 0.0), 0.1)
    b.listening(50.0)  # away from the broker: it missed whatever renewals came
    assert b.next_action(50.0 + LEASE_S - 0.1)[0] is Action.WAIT
    assert b.next_action(50.0 + LEASE_S)[0] is Action.CLAIM


def test_the_payload_fits_its_schema_and_topic():
    record = LeaseRecord("host-1-42", 7, LEASE_S, 1.7e9)
    doc = load_json(record.payload())
    check_payload("desired-lease", doc)
    assert LeaseRecord.parse(doc) == record
    topics = Topics("phrame")
    topic = topics.lease("config-sync")
    assert topic == "phrame/desired/leases/config-sync"
    parsed = topics.parse(topic)
    assert (parsed.kind, parsed.service, parsed.schema_name) == ("lease", "config-sync", "desired-lease")


def test_settings_refuse_a_lease_too_short_to_renew():
    with pytest.raises(SettingsError, match="PHRAME_HA_LEASE_S=1: at least 2"):
        SyncSettings.from_env({"PHRAME_REPO_URL": "/tmp/r.git", "PHRAME_HA_LEASE_S": "1"})
    s = SyncSettings.from_env(
        {"PHRAME_REPO_URL": "/tmp/r.git", "PHRAME_HA_LEASE_S": "6", "PHRAME_INSTANCE_ID": "cs-b"}
    )
    assert (s.ha_lease_s, s.instance_id) == (6.0, "cs-b")
    assert SyncSettings.from_env({"PHRAME_REPO_URL": "/tmp/r.git"}).ha_lease_s == 0.0
