"""What the agent, placement and config-sync record per pass or deployment, and how
``PHRAME_METRICS_LISTEN`` is read (pure: no broker, no daemon, no socket)."""

from __future__ import annotations

import pytest

from config_sync.deploys.records import DeployRecord, finish
from config_sync.metrics import Metrics
from mirror.settings import MirrorSettings
from node_agent.metrics import AgentMetrics
from node_agent.models import Action, ActionOutcome, ActualState, Op, Plan
from node_agent.reconcile import PassResult
from node_agent.settings import AgentSettings
from phrame.placement_rules.models import Decision, Move
from phrame.settings import SettingsError
from phrame.settings.metrics_listen import Listen, parse_listen
from placement.metrics import PlacementMetrics
from placement.reconcile import EnvResult
from tests.support.actual import heartbeat, placement_health


def test_the_listener_setting_is_host_port_or_empty() -> None:
    assert parse_listen(None) is None and parse_listen("  ") is None
    assert parse_listen("127.0.0.1:9310") == Listen("127.0.0.1", 9310)
    assert parse_listen("[::1]:9310") == Listen("::1", 9310)
    for bad in ("9310", "127.0.0.1:", ":9310", "host:0", "host:70000", "host:x"):
        with pytest.raises(SettingsError, match="PHRAME_METRICS_LISTEN"):
            parse_listen(bad)


def test_off_by_default_in_every_service_settings() -> None:
    assert AgentSettings.from_env({"PHRAME_NODE_NAME": "n1"}).metrics_listen is None
    assert MirrorSettings.from_env("actual", {}).metrics_listen is None
    on = AgentSettings.from_env({"PHRAME_NODE_NAME": "n1", "PHRAME_METRICS_LISTEN": "127.0.0.1:9"})
    assert on.metrics_listen == Listen("127.0.0.1", 9)


def test_an_agent_pass_counts_actions_pulls_and_what_still_differs() -> None:
    m = AgentMetrics("n1")
    pull, create, start = Action(Op.PULL_IMAGE, "img"), Action(Op.CREATE, "a"), Action(Op.START, "b")
    plan = Plan(actions=(pull, create, start), pending=("c",))
    outcomes = (ActionOutcome(pull, seconds=3.0), ActionOutcome(create, error="boom"))  # start not reached
    m.record_pass(0.5, PassResult(plan, outcomes, ActualState()), converged=False, failed=False)
    assert m.actions.labels("pull_image", "ok")._value.get() == 1
    assert m.actions.labels("create", "error")._value.get() == 1
    assert m.drift._value.get() == 3  # create failed, start not reached, c pending
    assert m.passes.labels("pending")._value.get() == 1
    text = m.render().decode()
    assert "phrame_node_agent_pull_seconds_sum 3.0" in text
    m.record_pass(0.1, None, converged=False, failed=True)
    assert m.passes.labels("failed")._value.get() == 1
    assert m.drift._value.get() == 3  # a failed pass says nothing new about drift


def test_placement_counts_moves_held_decisions_and_heartbeat_age() -> None:
    liveness = placement_health(timeout_s=20, started_at=1000.0)
    heartbeat(liveness, "n1", 1000.0, received_at=1000.0, is_retained=False)
    m = PlacementMetrics(liveness, clock=lambda: 1005.0)
    held = EnvResult("a", decision=Decision({}, held="no node alive"))
    moved = Move("web", 0, "n2", "n1", "n2 offline")
    m.record_pass(0.2, [EnvResult("c", decision=Decision({}, moves=(moved, moved), is_changed=True))])
    assert m.moves.labels("c")._value.get() == 2
    m.record_pass(0.2, [held, EnvResult("b", error="git failed")])
    m.record_pass(0.2, None)
    m.record_pass(0.2, [])
    assert m.held.labels("a")._value.get() == 1
    assert m.errors.labels("b")._value.get() == 1
    assert [m.passes.labels(r)._value.get() for r in ("ok", "error", "deaf")] == [2, 1, 1]
    text = m.render().decode()
    assert 'phrame_placement_heartbeat_age_seconds{node="n1"} 5.0' in text
    assert 'phrame_placement_node_alive{node="n1"} 1.0' in text


def test_config_sync_records_deploy_time_and_failing_syncs() -> None:
    m = Metrics()
    record = DeployRecord("c1", "main", "a", "m", published_at=100.0, nodes={"n1": 1})
    m.deploy_finished("prod", finish(record, "converged", 104.5))
    m.record_sync("main", "invalid")
    assert m.deploys.labels("prod", "converged")._value.get() == 1
    assert (
        'phrame_config_sync_deploy_seconds_sum{environment="prod",result="converged"} 4.5'
        in m.render().decode()
    )
    assert m.sync_failing.labels("main")._value.get() == 1
    m.record_sync("main", "applied")
    assert m.sync_failing.labels("main")._value.get() == 0
