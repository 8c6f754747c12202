"""compute_plan: desired + actual -> the ordered action list (pure, no I/O)."""

from __future__ import annotations

from typing import Any

from node_agent.models import (
    DIGEST,
    MANAGED,
    NODE,
    ActualState,
    ObservedContainer,
    ObservedNetwork,
    ObservedProcess,
    Op,
)
from node_agent.plan import compute_plan, dependency_levels
from tests.support.agent_support import container, desired, item_labels, network, process

NODE_A = "node-a"


def seen(spec: dict[str, Any] | str, state: str = "running", *, node: str = NODE_A, **kw: Any):
    name = spec if isinstance(spec, str) else spec["name"]
    dig = kw.pop("digest", None if isinstance(spec, str) else spec["digest"])
    labels = {MANAGED: "true", NODE: node, **item_labels(name)}
    if dig:
        labels[DIGEST] = dig
    return ObservedContainer(id=kw.pop("id", "c0ffee" + name), name=name, state=state, labels=labels)


def actual(*containers: ObservedContainer, networks=(), processes=()) -> ActualState:
    return ActualState(
        containers={c.name: c for c in containers},
        networks={n: ObservedNetwork(id="n" + n, name=n, labels=net_labels(NODE_A)) for n in networks},
        processes={p.item_id: p for p in processes},
    )


def net_labels(node: str) -> dict[str, str]:
    return {MANAGED: "true", NODE: node}


def ops(plan) -> list[tuple[str, str]]:
    return [(a.op.value, a.target) for a in plan.actions]


def plan_of(d, a, **kw):
    return compute_plan(d, a, node=NODE_A, **kw)


def test_converge_from_empty_creates_networks_pulls_then_containers():
    net = network("prod", "back")
    web = container("prod", "web", image="web:1", networks=["prod.back"])
    db = container("prod", "db", image="db:1")
    plan = plan_of(desired([net, web, db], with_manifest=True), actual())
    assert ops(plan) == [
        ("create_network", "prod.back"),
        ("pull_image", "db:1"),
        ("pull_image", "web:1"),
        ("create", "prod.db.0"),
        ("create", "prod.web.0"),
    ]
    assert plan.errors == ()


def test_nothing_to_do_when_everything_runs_with_the_same_digest():
    web = container("prod", "web")
    assert ops(plan_of(desired([web], with_manifest=True), actual(seen(web)))) == []


def test_digest_change_recreates_and_pulls_the_image():
    old = container("prod", "web", image="web:1")
    new = container("prod", "web", image="web:2")
    plan = plan_of(desired([new]), actual(seen(old)))
    assert ops(plan) == [("pull_image", "web:2"), ("recreate", "prod.web.0")]
    assert old["digest"] in plan.actions[1].reason


def test_exited_and_created_containers_are_started_dead_ones_recreated():
    a, b, c = container("e", "a"), container("e", "b"), container("e", "c")
    plan = plan_of(desired([a, b, c]), actual(seen(a, "exited"), seen(b, "created"), seen(c, "dead")))
    assert ops(plan) == [
        ("pull_image", "img:1"),
        ("start", "e.a.0"),
        ("start", "e.b.0"),
        ("recreate", "e.c.0"),
    ]


def test_pull_always_is_marked_and_images_are_pulled_once():
    a = container("e", "a", image="x:1", pull="always")
    b = container("e", "b", image="x:1")
    plan = plan_of(desired([a, b]), actual())
    pulls = [x for x in plan.actions if x.op is Op.PULL_IMAGE]
    assert [(p.target, p.always) for p in pulls] == [("x:1", True)]


def test_no_manifest_removes_nothing():
    web = container("prod", "web")
    stray = seen("prod.old.0", digest="sha256:" + "1" * 64)
    plan = plan_of(desired([web]), actual(seen(web), stray, networks=["prod.gone"]))
    assert ops(plan) == []


def test_broker_lost_everything_leaves_every_container_running():
    plan = plan_of(desired([]), actual(seen("prod.a.0"), seen("prod.b.0"), networks=["prod.n"]))
    assert ops(plan) == []


def test_complete_manifest_prunes_containers_processes_then_networks():
    web = container("prod", "web")
    gone_proc = ObservedProcess("prod.job.0", pid=10, state="running", digest="sha256:x")
    plan = plan_of(
        desired([web], with_manifest=True),
        actual(seen(web), seen("prod.old.0"), networks=["prod.gone"], processes=[gone_proc]),
    )
    assert ops(plan) == [
        ("remove", "prod.old.0"),
        ("stop_process", "prod.job.0"),
        ("remove_network", "prod.gone"),
    ]


def test_incomplete_manifest_missing_item_prunes_nothing():
    web, api = container("prod", "web"), container("prod", "api")
    d = desired([web], with_manifest=[web, api])  # api listed but not received yet
    assert not d.is_complete
    plan = plan_of(d, actual(seen(web), seen("prod.old.0")))
    assert ops(plan) == []


def test_manifest_with_other_digest_is_incomplete():
    old = container("prod", "web", image="web:1")
    new = container("prod", "web", image="web:2")
    d = desired([new], with_manifest=[old])
    assert not d.is_complete
    plan = plan_of(d, actual(seen(old), seen("prod.stray.0")))
    assert ops(plan) == [("pull_image", "web:2"), ("recreate", "prod.web.0")]


def test_an_item_published_before_its_manifest_waits_for_the_manifest():
    web, extra = container("prod", "web"), container("prod", "extra")
    d = desired([web, extra], with_manifest=[web])
    assert d.is_complete
    assert ops(plan_of(d, actual(seen(web)))) == []  # not listed yet: not created
    listed = desired([web, extra], with_manifest=[web, extra])
    assert ops(plan_of(listed, actual(seen(web)))) == [("pull_image", "img:1"), ("create", "prod.extra.0")]


def test_a_stale_item_not_in_the_manifest_is_pruned_not_kept():
    # cleared while the agent was away: its payload is still in the store, the manifest
    # no longer lists it
    web, stale = container("prod", "web"), container("prod", "stale")
    gone_net = network("prod", "gone")
    d = desired([web, stale, gone_net], with_manifest=[web])
    plan = plan_of(d, actual(seen(web), seen(stale), networks=["prod.gone"]))
    assert ops(plan) == [("remove", "prod.stale.0"), ("remove_network", "prod.gone")]
    # not complete yet (web missing): the stale item is neither created nor removed
    waiting = desired([stale], with_manifest=[web])
    assert ops(plan_of(waiting, actual())) == []


def test_own_container_is_never_recreated_or_removed():
    me = seen("ops.agent.0", id="abc123def456" + "0" * 52, digest="sha256:" + "2" * 64)
    spec = container("ops", "agent")
    plan = plan_of(desired([spec]), actual(me), own_container_id="abc123def456")
    assert ops(plan) == []
    assert "agent itself" in plan.errors[0]
    pruned = plan_of(desired([], with_manifest=True), actual(me), own_container_id="abc123def456")
    assert ops(pruned) == []


def test_other_nodes_containers_are_never_touched_and_a_name_clash_is_an_error():
    theirs = seen("prod.web.0", node="node-b", digest="sha256:" + "3" * 64)
    other = seen("prod.db.0", node="node-b", state="exited")
    web = container("prod", "web")
    plan = plan_of(desired([web], with_manifest=True), actual(theirs, other))
    assert ops(plan) == []
    assert "node node-b" in plan.errors[0]


def test_depends_on_orders_dependants_after_dependencies():
    db = container("e", "db")
    api = container("e", "api", depends_on=["e.db.0"])
    web = container("e", "web", depends_on=["e.api.0", "e.unknown.0"])
    plan = plan_of(desired([web, api, db]), actual())
    assert ops(plan)[1:] == [("create", "e.db.0"), ("create", "e.api.0"), ("create", "e.web.0")]
    levels = dependency_levels(a for a in plan.actions if a.op is Op.CREATE)
    assert [[a.target for a in lv] for lv in levels] == [["e.db.0"], ["e.api.0"], ["e.web.0"]]


def test_dependency_already_running_does_not_delay_the_dependant():
    db = container("e", "db")
    api = container("e", "api", depends_on=["e.db.0"])
    cache = container("e", "cache")
    levels = dependency_levels(
        a for a in plan_of(desired([db, api, cache]), actual(seen(db))).actions if a.op is Op.CREATE
    )
    assert [[a.target for a in lv] for lv in levels] == [["e.api.0", "e.cache.0"]]


def test_dependency_cycle_still_yields_every_action_once():
    a = container("e", "a", depends_on=["e.b.0"])
    b = container("e", "b", depends_on=["e.a.0"])
    levels = dependency_levels(x for x in plan_of(desired([a, b]), actual()).actions)
    flat = [x.target for lv in levels for x in lv]
    assert sorted(flat) == ["e.a.0", "e.b.0", "img:1"]


def test_process_started_restarted_on_digest_change():
    p1 = process("e", "job", ["sleep", "1"])
    p2 = process("e", "job2", ["sleep", "2"])
    running = ObservedProcess("e.job2.0", pid=5, state="running", digest="sha256:" + "9" * 64)
    plan = plan_of(desired([p1, p2]), actual(processes=[running]))
    assert ops(plan) == [("start_process", "e.job.0"), ("restart_process", "e.job2.0")]


def handover(**proc_kw: Any):
    """What render publishes for ``replaces``: the container X *and* the process replacing
    it, both in the manifest (validation requires that X's service still exists)."""
    old = container("e", "legacy")
    proc = process("e", "mon", ["sleep", "100"], replaces=[old["name"]], **proc_kw)
    return old, proc, desired([old, proc], with_manifest=True)


def proc_seen(proc: dict[str, Any], *, stable: bool, state: str = "running") -> ObservedProcess:
    pid = 7 if state == "running" else None
    return ObservedProcess(proc["name"], pid=pid, state=state, digest=proc["digest"], is_stable=stable)


def test_replaced_container_is_desired_as_usual_until_the_process_is_stable():
    old, proc, d = handover()
    assert d.is_complete
    # from empty both are made: there is never a moment with neither
    assert ops(plan_of(d, actual())) == [
        ("pull_image", "img:1"),
        ("create", old["name"]),
        ("start_process", proc["name"]),
    ]
    young = proc_seen(proc, stable=False)
    waiting = plan_of(d, actual(seen(old), processes=[young]))
    assert ops(waiting) == []
    # nothing to do now, but not converged: the handover is still to come
    assert waiting.pending == (f"container {old['name']} waits for process {proc['name']} to stay up",)
    # kept means repaired, too: started when exited, recreated when its spec changed
    assert ops(plan_of(d, actual(seen(old, "exited"), processes=[young]))) == [("start", old["name"])]
    changed = seen(old, digest="sha256:" + "5" * 64)
    assert ops(plan_of(d, actual(changed, processes=[young])))[1:] == [("recreate", old["name"])]


def test_replaced_container_is_removed_once_the_process_is_stable_and_never_recreated():
    old, proc, d = handover()
    stable = proc_seen(proc, stable=True)
    # a stray container proves the manifest still counts as complete (X is listed in it)
    plan = plan_of(d, actual(seen(old), seen("e.stray.0"), processes=[stable]))
    assert ops(plan) == [("remove", old["name"]), ("remove", "e.stray.0")]
    assert "replaced by process" in plan.actions[0].reason and plan.pending == ()
    # after a docker rm (or the removal above) it is not created again, nor started if exited
    assert ops(plan_of(d, actual(processes=[stable]))) == []
    assert ops(plan_of(d, actual(seen(old, "exited"), processes=[stable]))) == [("remove", old["name"])]
    # without a manifest the handover still happens (it needs no prune)
    no_manifest = desired([old, proc])
    assert ops(plan_of(no_manifest, actual(seen(old), processes=[stable]))) == [("remove", old["name"])]


def test_replaced_container_comes_back_when_the_process_stops_being_stable():
    old, proc, d = handover()
    for down in (proc_seen(proc, stable=False, state="backoff"), proc_seen(proc, stable=False)):
        assert ops(plan_of(d, actual(processes=[down]))) == [
            ("pull_image", "img:1"),
            ("create", old["name"]),
        ]


def test_replaced_container_no_longer_published_waits_then_goes():
    proc = process("e", "web", ["sleep", "100"], replaces=["web"])  # by service name
    old = seen("e.web.0")
    d = desired([proc], with_manifest=True)
    young = proc_seen(proc, stable=False)
    assert ops(plan_of(d, actual(old, processes=[young]))) == []
    stable = proc_seen(proc, stable=True)
    assert ops(plan_of(desired([proc]), actual(old, processes=[stable]))) == [("remove", "e.web.0")]


def test_replaces_by_full_item_id_touches_only_that_container():
    proc = process("e", "web", ["sleep", "100"], replaces=["e.web.1"])
    stable = ObservedProcess("e.web.0", pid=7, state="running", digest=proc["digest"], is_stable=True)
    plan = plan_of(desired([proc]), actual(seen("e.web.0"), seen("e.web.1"), processes=[stable]))
    assert ops(plan) == [("remove", "e.web.1")]


def test_changed_network_is_reported_not_recreated():
    net = network("e", "n", subnet="10.9.0.0/24")
    seen_net = ObservedNetwork(
        id="x", name="e.n", labels={**net_labels(NODE_A), DIGEST: "sha256:" + "4" * 64}
    )
    plan = compute_plan(desired([net]), ActualState(networks={"e.n": seen_net}), node=NODE_A)
    assert ops(plan) == [] and "not recreated automatically" in plan.errors[0]


def test_a_managed_object_whose_name_is_not_an_item_id_is_reported_and_never_touched():
    web = container("prod", "web")
    odd = seen("prod.web_old.0")  # labelled by hand: phrame never makes such a name
    odd_net = ObservedNetwork(id="nx", name="Prod_Net", labels=net_labels(NODE_A))
    a = actual(seen(web), odd)
    a = ActualState(a.containers, {"Prod_Net": odd_net}, {})
    plan = plan_of(desired([web], with_manifest=True), a)
    assert ops(plan) == []
    assert any("'prod.web_old.0'" in e and "not an item id" in e for e in plan.errors)
    assert any("'Prod_Net'" in e for e in plan.errors)


def test_another_nodes_network_of_the_same_name_counts_as_present_and_is_never_removed():
    net = network("prod", "back")
    theirs = {
        n: ObservedNetwork(id="n" + n, name=n, labels={**net_labels("node-b"), DIGEST: "sha256:" + "9" * 64})
        for n in ("prod.back", "prod.other")
    }
    plan = plan_of(desired([net], with_manifest=True), ActualState({}, theirs, {}))
    assert ops(plan) == [] and plan.errors == ()  # no create (409), no remove, no digest error
    assert ops(plan_of(desired([net]), ActualState({}, theirs, {}))) == []
