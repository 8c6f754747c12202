"""``phrame status``'s summary of retained topics: what is healthy and what needs attention."""

from __future__ import annotations

import json

from phrame.cli.status_text import deploy_line, render_text
from phrame.cli.status_view import summarize
from schemas import Topics

T = Topics()
NOW = 1_000_000.0


def raw(doc: object) -> bytes:
    return json.dumps(doc).encode()


def beat(ts: float) -> bytes:
    host = dict.fromkeys(["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)
    return raw({"ts": ts, "seq": 9, "interval_s": 5, "host": host})


def healthy() -> dict[str, bytes]:
    return {
        T.status("edge-01"): raw({"state": "online", "converged": True, "generation": 3, "commit": "a" * 40}),
        T.heartbeat("edge-01"): raw({"ts": NOW - 4, "seq": 9, "interval_s": 5, "host": dict.fromkeys(
            ["cpu_percent", "load1", "mem_total", "mem_used", "disk_total", "disk_used"], 1)}),
        T.env_sync("studio-a"): raw({"environment": "studio-a", "ref": "main", "ok": True,
                                      "last_applied": {"commit": "a" * 40}, "last_attempted": {"commit": "a" * 40}}),
        T.env_service("studio-a", "tams"): b"{}",  # not a status topic: ignored
    }  # fmt: skip


def test_all_online_converged_and_synced_is_healthy() -> None:
    s = summarize(healthy(), NOW, T)
    assert s.is_healthy
    (node,) = s.nodes
    assert (node.node, node.generation, node.heartbeat_age_s) == ("edge-01", 3, 4.0)
    assert "healthy" in render_text(s).splitlines()[-1]


def test_offline_node_failed_sync_unassigned_and_gc_need_attention() -> None:
    topics = healthy()
    topics[T.status("edge-02")] = raw({"state": "offline"})
    topics[T.env_sync("studio-a")] = raw({"environment": "studio-a", "ref": "main", "ok": False,
        "errors": [{"file": "nodes/x.yaml", "line": 3, "message": "bad"}]})  # fmt: skip
    topics[T.env_placement("studio-a")] = raw({"environment": "studio-a", "gc_candidates": ["edge-09"],
        "unassigned": [{"replica": "mixer.1", "reason": "no node with role=edge has 3 CPUs free"}]})  # fmt: skip
    s = summarize(topics, NOW, T)
    assert not s.is_healthy
    text = render_text(s)
    assert "nodes/x.yaml:3: bad" in text
    assert "mixer.1: no node with role=edge has 3 CPUs free" in text
    assert "node edge-09 has been offline past PHRAME_NODE_GC_S" in text
    assert text.splitlines()[-1] == "needs attention"


def test_invalid_payload_is_reported_not_trusted() -> None:
    topics = {T.status("edge-01"): b'{"state": "sleeping"}', T.heartbeat("edge-01"): b"not json"}
    (node,) = summarize(topics, NOW, T).nodes
    assert node.state == "unknown" and len(node.errors) == 2
    assert all("invalid payload" in e for e in node.errors)


A, B = "a" * 40, "b" * 40


def manifest(generation: int, commit: str, *items: str) -> bytes:
    return raw(
        {"generation": generation, "commit": commit, "items": {i: "sha256:" + "0" * 64 for i in items}}
    )


def two_nodes_one_commit() -> dict[str, bytes]:
    """Commit B changed only edge-02: edge-01's manifest still names A, and is up to date."""
    status = {"state": "online", "converged": True}
    return {
        T.manifest("edge-01"): manifest(3, A, "containers/studio-a.tams.0", "networks/studio-a.media"),
        T.manifest("edge-02"): manifest(5, B, "containers/studio-a.mixer.0"),
        T.manifest("edge-03"): manifest(1, A),  # in the inventory, nothing to run, no agent yet
        T.status("edge-01"): raw({**status, "generation": 3, "commit": A}),
        T.status("edge-02"): raw({**status, "generation": 4, "commit": A}),
        T.heartbeat("edge-01"): beat(NOW - 3),
        T.heartbeat("edge-02"): beat(NOW - 3),
        T.env_sync("studio-a"): raw({"environment": "studio-a", "ref": "main", "ok": True,
                                      "last_applied": {"commit": B}, "last_attempted": {"commit": B}}),
    }  # fmt: skip


def test_the_environment_shows_its_commit_and_each_node_whether_it_applied_it() -> None:
    """A node whose items a commit did not touch keeps an older manifest
    commit but is up to date; one converged on an older generation has not applied it."""
    s = summarize(two_nodes_one_commit(), NOW, T)
    rows = {n.node: n for n in s.nodes}
    assert (rows["edge-01"].applied, rows["edge-02"].applied, rows["edge-03"].applied) == (True, False, None)
    assert (rows["edge-02"].generation, rows["edge-02"].desired_generation) == (4, 5)
    (env,) = s.environments
    assert (env.commit, env.nodes, env.not_applied) == (B, ["edge-01", "edge-02"], ["edge-02"])
    assert not s.is_healthy  # edge-02 is behind
    text = render_text(s)
    assert A[:12] not in text  # no node row names the commit that last changed it
    lines = text.splitlines()
    assert any(line.startswith("studio-a") and B[:12] in line and "1 of 2 nodes" in line for line in lines)
    assert "    not applied yet on: edge-02" in lines
    edge_02 = next(line for line in lines if line.startswith("edge-02")).split()
    assert edge_02[:5] == ["edge-02", "online", "yes", "no", "4/5"]

    done = two_nodes_one_commit()
    done[T.status("edge-02")] = raw({"state": "online", "converged": True, "generation": 5, "commit": B})
    s = summarize(done, NOW, T)
    assert s.is_healthy and s.environments[0].not_applied == []  # edge-03 has nothing to run
    assert "2 of 2 nodes" in render_text(s)


def test_a_stale_heartbeat_makes_a_node_offline_whatever_its_status_says() -> None:
    """The shared rule. Status online, heartbeat older than the timeout: offline."""
    topics = healthy()
    topics[T.heartbeat("edge-01")] = beat(NOW - 45)
    s = summarize(topics, NOW, T, timeout_s=20)
    (node,) = s.nodes
    assert (node.state, node.reason, node.heartbeat_age_s) == ("offline", "no heartbeat for 45 s", 45.0)
    assert not s.is_healthy
    text = render_text(s)
    assert "    offline: no heartbeat for 45 s" in text.splitlines()
    assert summarize(topics, NOW, T, timeout_s=60).nodes[0].state == "online"


def test_a_status_without_any_heartbeat_is_unknown() -> None:
    topics = healthy()
    del topics[T.heartbeat("edge-01")]
    (node,) = summarize(topics, NOW, T).nodes
    assert (node.state, node.reason) == ("unknown", "no heartbeat heard yet")


def _deploy(n: int, state: str, **kw: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "commit": f"{n:x}" * 40, "ref": "main", "author": "Ada <ada@x>", "message": f"change {n}",
        "published_at": NOW - 100 * n, "state": state, "finished_at": None, "duration_s": None,
        "nodes": {"edge-01": n}, "failed": None,
    }  # fmt: skip
    doc.update(kw)
    return doc


def test_the_last_deployments_of_each_environment_are_shown() -> None:
    topics = healthy()
    history = [
        _deploy(1, "pending"),
        _deploy(2, "failed", finished_at=NOW - 140, duration_s=60.0,
                failed={"node": "edge-01", "reason": "cannot pull mixer:3.1.0"}),
        _deploy(3, "superseded", finished_at=NOW - 200),
        *[_deploy(n, "converged", finished_at=NOW - 100 * n + 2.5, duration_s=2.5) for n in range(4, 10)],
    ]  # fmt: skip
    topics[T.env_deploys("studio-a")] = raw({"environment": "studio-a", "deploys": history})
    s = summarize(topics, NOW, T)
    (env,) = s.environments
    assert env.deploys == history
    assert [d["state"] for d in s.to_dict()["environments"][0]["deploys"]] == [d["state"] for d in history]
    text = render_text(s, NOW)
    assert "    deploy 1111111111 pending for 100 s: change 1 (Ada <ada@x>)" in text
    assert "    deploy 2222222222 failed after 60 s on edge-01: cannot pull mixer:3.1.0" in text
    assert "    deploy 3333333333 superseded: change 3 (Ada <ada@x>)" in text
    assert "    deploy 4444444444 converged in 2.5 s: change 4 (Ada <ada@x>)" in text
    assert "5555555555" not in text  # the text shows the last few; --json has them all
    assert s.is_healthy  # history informs; the nodes and the sync say whether all is well


def test_a_deployments_health_word_and_reasons_are_shown() -> None:
    topics = healthy()
    waiting = [{"node": "", "replica": "studio-a.web", "reason": "staged rollout waiting-promotion"}]
    unassigned = {"node": "", "reason": "studio-a.gpu.0: unassigned: no node has gpu=true"}
    history = [
        _deploy(1, "pending", health="suspended", reasons=waiting),
        _deploy(2, "degraded", finished_at=NOW - 199, duration_s=1.0, health="degraded", failed=unassigned),
        _deploy(3, "converged", finished_at=NOW - 60, duration_s=40.0, health="healthy", suspended_s=200.0,
                waves=[{"service": "web", "wave": 1, "released_at": NOW - 300, "replicas": ["studio-a.web.0"],
                        "nodes": ["edge-01"], "waited_s": 200.0, "took_s": 25.0},
                       {"service": "web", "wave": 2, "released_at": NOW - 75, "replicas": ["studio-a.web.1"],
                        "nodes": ["edge-02"], "waited_s": 0.0, "took_s": 15.0}]),
    ]  # fmt: skip
    topics[T.env_deploys("studio-a")] = raw({"environment": "studio-a", "deploys": history})
    text = render_text(summarize(topics, NOW, T), NOW)
    assert "    deploy 1111111111 pending, suspended for 100 s: change 1 (Ada <ada@x>)" in text
    assert "      suspended: studio-a.web: staged rollout waiting-promotion" in text
    assert (
        "    deploy 2222222222 degraded after 1.0 s: studio-a.gpu.0: unassigned: no node has gpu=true" in text
    )
    assert "    deploy 3333333333 converged in 40 s (and 200 s waiting for promotion): change 3" in text
    assert (
        "      waves: web 1 on edge-01 25 s (and 200 s waiting for promotion); web 2 on edge-02 15 s" in text
    )


def test_an_invalid_deploys_payload_is_reported() -> None:
    topics = healthy()
    topics[T.env_deploys("studio-a")] = raw({"environment": "studio-a", "deploys": [{"state": "done"}]})
    (env,) = summarize(topics, NOW, T).environments
    assert env.deploys == [] and any(e.startswith("deploys: invalid payload") for e in env.errors)


def test_a_container_restarted_after_an_exit_is_mentioned_but_not_unhealthy() -> None:
    from datetime import UTC, datetime

    killed = "2026-12-01T17:00:00Z"
    at = datetime(2026, 12, 1, 17, 0, tzinfo=UTC).timestamp()
    last = {"exit_code": 137, "finished_at": killed, "restarted_by": "agent"}
    topics = healthy()
    topics[T.heartbeat("edge-01")] = beat(at + 8)
    topics[T.actual_item("edge-01", "containers", "studio-a.web.0")] = raw(
        {"state": "running", "digest": None, "finished_at": killed, "last_exit": last, "agent_restarts": 1}
    )
    topics[T.actual_item("edge-01", "containers", "studio-a.db.0")] = raw(
        {"state": "running", "digest": None, "finished_at": "2026-11-30T17:00:00Z"}  # a day ago
    )
    s = summarize(topics, at + 12, T)
    (node,) = s.nodes
    assert node.recent_exits == ["studio-a.web.0: exit code 137, 12 s ago, restarted by the agent"]
    assert s.is_healthy  # it runs as desired
    assert "    recent exit: studio-a.web.0: exit code 137, 12 s ago, restarted by the agent" in render_text(
        s
    )
    assert summarize(topics, at + 700, T).nodes[0].recent_exits == []


def _rollout(state: str, wave: int, done: int, reasons: list[dict[str, str]] | None = None) -> bytes:
    replicas = [{"replica": f"studio-a.web.{i}", "node": "edge-01", "digest": "sha256:" + "b" * 64,
                 "released_at": NOW - 30 if i < wave else None} for i in range(4)]  # fmt: skip
    return raw({"environment": "studio-a", "service": "web", "commit": "c" * 40, "state": state,
                "wave": wave, "waves": 4, "done": done, "total": 4, "replicas": replicas,
                "reasons": reasons or [], "description": f"web: wave {wave}/4"})  # fmt: skip


def test_a_rollout_in_progress_is_shown_and_a_paused_one_needs_attention() -> None:
    topics = healthy()
    topics[T.env_rollout("studio-a", "web")] = _rollout("progressing", 2, 1)
    topics[T.env_sync("studio-a")] = raw({"environment": "studio-a", "ref": "main", "ok": True,
        "last_applied": {"commit": "a" * 40}, "last_attempted": {"commit": "c" * 40}})  # fmt: skip
    s = summarize(topics, NOW, T)
    assert "    head cccccccccccc rolling out (see the rollout)" in render_text(s)
    (env,) = s.environments
    assert [(r["service"], r["state"], r["wave"]) for r in env.rollouts] == [("web", "progressing", 2)]
    assert "    rollout web: progressing, wave 2/4, 1/4 healthy, commit cccccccccccc" in render_text(s)
    assert s.is_healthy and s.to_dict()["environments"][0]["rollouts"][0]["done"] == 1
    why = {"node": "edge-01", "replica": "studio-a.web.0", "reason": "healthcheck unhealthy"}
    topics[T.env_rollout("studio-a", "web")] = _rollout("paused", 1, 0, [why])
    s = summarize(topics, NOW, T)
    text = render_text(s)
    assert "    rollout web: paused, wave 1/4, 0/4 healthy, commit cccccccccccc" in text
    assert "        edge-01 studio-a.web.0: healthcheck unhealthy" in text
    assert "    head cccccccccccc not applied: its rollout stopped (see the rollout)" in text
    assert not s.is_healthy and text.splitlines()[-1] == "needs attention"
    topics[T.env_rollout("studio-a", "web")] = _rollout("complete", 4, 4)
    s = summarize(topics, NOW, T)
    assert s.is_healthy and "rollout web" not in render_text(s)  # done: the deploys lines say it


def test_a_canary_waiting_for_promotion_says_how_to_promote() -> None:
    topics = healthy()
    topics[T.env_rollout("studio-a", "web")] = _rollout("waiting-promotion", 1, 1)
    text = render_text(summarize(topics, NOW, T))
    assert "waiting for a promotion: phrame promote studio-a web, or a new commit" in text


def test_a_failing_containers_last_lines_are_pointed_at_and_shown_for_its_node() -> None:
    from phrame.cli.status_text import render_node

    retained = healthy()
    tail = {"lines": ["starting", "boom: no database"], "truncated": False}
    retained[T.actual_item("edge-01", "containers", "studio-a.db.0")] = raw(
        {"state": "exited", "exit_code": 3, "logs": tail}
    )
    retained[T.actual_item("edge-01", "containers", "studio-a.web.0")] = raw({"state": "running"})
    s = summarize(retained, NOW, T)
    (node,) = s.nodes
    assert node.logs == {"studio-a.db.0": ["starting", "boom: no database"]}
    assert "    last lines of studio-a.db.0: phrame status --node edge-01" in render_text(s).splitlines()
    detail = render_node(node, NOW).splitlines()
    assert detail[0].startswith("NODE") and detail[1].startswith("edge-01")
    assert "studio-a.db.0: its last 2 line(s)" in detail and "    boom: no database" in detail
    assert not any("phrame status --node" in line for line in detail)
    node.logs.clear()
    assert "none of its containers carries log lines" in render_node(node, NOW)


def test_a_silent_node_within_its_environments_grace_reads_disconnected() -> None:
    topics = healthy()
    topics[T.heartbeat("edge-01")] = beat(NOW - 45)
    topics[T.manifest("edge-01")] = raw(
        {"generation": 3, "commit": "a" * 40, "items": {"containers/studio-a.web.0": "sha256:" + "1" * 64}}
    )
    topics[T.env_placement("studio-a")] = raw({"environment": "studio-a", "disconnect_grace_s": 300})
    s = summarize(topics, NOW, T, timeout_s=20)
    (node,) = s.nodes
    assert (node.state, node.presence) == ("offline", "disconnected")
    (env,) = s.environments
    assert env.disconnect_grace_s == 300.0
    text = render_text(s).splitlines()
    assert any(line.startswith("    disconnected (") and "no heartbeat for 45 s" in line for line in text), (
        text
    )
    topics[T.status("edge-01")] = raw({"state": "offline", "reason": "stopped"})
    (node,) = summarize(topics, NOW, T, timeout_s=20).nodes
    assert (node.state, node.presence) == ("offline", "offline")
    topics[T.status("edge-01")] = raw({"state": "offline", "reason": "lost"})
    (node,) = summarize(topics, NOW, T, timeout_s=20).nodes
    assert (node.state, node.presence) == ("offline", "disconnected")
    del topics[T.env_placement("studio-a")]  # no grace known: offline, as before
    (node,) = summarize(topics, NOW, T, timeout_s=20).nodes
    assert (node.state, node.presence) == ("offline", "offline")


def test_a_held_head_says_why_and_what_releases_it() -> None:
    topics = healthy()
    held = {"state": "suspended", "reason": "waiting-approval", "approvals": {"needed": 2, "by": ["alice"]}}
    topics[T.env_sync("studio-a")] = raw({"environment": "studio-a", "ref": "main", "ok": True,
        "last_applied": {"commit": "a" * 40}, "last_attempted": {"commit": "b" * 40}, "hold": held})  # fmt: skip
    s = summarize(topics, NOW, T)
    assert s.is_healthy  # the environment runs what it ran: waiting for people is no fault
    text = render_text(s)
    assert (
        "    head bbbbbbbbbbbb suspended (waiting-approval): 1/2 approvals (alice): "
        "phrame approve studio-a bbbbbbbbbbbb"
    ) in text.splitlines()
    frozen = {**held, "reason": "frozen", "until": 1798329600}
    topics[T.env_sync("studio-a")] = raw({"environment": "studio-a", "ref": "main", "ok": True,
        "last_applied": {"commit": "a" * 40}, "last_attempted": {"commit": "b" * 40}, "hold": frozen})  # fmt: skip
    assert "suspended (frozen) until 2026-12-27T00:00:00Z: deploys then" in render_text(
        summarize(topics, NOW, T)
    )


def test_a_merge_whose_plan_changed_since_review_says_so() -> None:
    flagged = {"mr": 7, "reviewed": "sha256:" + "0" * 64, "merged": "sha256:" + "1" * 64}
    line = deploy_line(_deploy(4, "converged", duration_s=2.5, plan_changed=flagged), NOW)
    assert line.endswith("converged in 2.5 s: change 4 (Ada <ada@x>) [plan changed since review: !7]")
    assert "plan changed" not in deploy_line(_deploy(4, "converged", duration_s=2.5), NOW)
