"""Benchmark: 1,000 simulated nodes on one real mosquitto, with real config-sync and placement.

Each node runs the agent's real MQTT side (``node_agent.loop.Agent``: its subscription,
manifest completeness, item reports, status, a heartbeat every 5 s, last will) over a
SIMULATED Docker daemon (``sim_docker.py``), BENCH_FLEET_WORKERS worker processes of them
(``fleet_sim.py``; paho's select() allows ~300 connections per process, and 1,000
agents' threads in one process would queue on one GIL). Real:
mosquitto, the bare git repository and its post-receive hook (a push is a webhook POST),
``phrame config-sync`` and ``phrame placement`` as processes. Measured, one JSON object:
(a) a commit changing ``edge-agent`` (one replica on every node) → every node converged on
it: time from the push, messages, config-sync CPU and RSS, against a raw paho publish of the
same messages; (b) placement with every heartbeat live: CPU share and pass time against a
bare paho subscriber to the same topics, mirror-actual's CPU share in the same window, and that
losing one node moves only its replicas;
(c) ``phrame/deploy`` green (config-sync's log and its retained ``deploys`` record);
(d) the broker's message rate and RSS. Exit 0 when it measured, 2 without mosquitto.
Baselines (same run): one raw paho client publishing the same messages after the fleet
settled (a), a bare paho subscriber to the same topics (b). Targets: (a) every node
converged within 5 s of the push, config-sync RSS under 300 MB; (b) placement under 10 %
of one core, and losing one node changes only that node's replicas.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import psutil  # noqa: E402
from fleet_harness import Fleet, wait  # noqa: E402
from fleet_repo import ENV, core_nodes, fleet_change, fleet_files, node_names  # noqa: E402

NODES = int(os.environ.get("BENCH_FLEET_NODES", "1000"))
# real: fleet_sim.py, the agent's own MQTT side (paho and threads: ~1,000 nodes fit here);
# lite: fleet_lite.py, asyncio, thousands of nodes a process (the default past 1,000)
AGENTS = os.environ.get("BENCH_FLEET_AGENTS", "real" if NODES <= 1000 else "lite")
# real: 125 agents a process (see fleet_sim.MAX_AGENTS); lite: 2,500 (at least 4 processes)
WORKERS = int(os.environ.get("BENCH_FLEET_WORKERS", 8 if AGENTS == "real" else max(4, -(-NODES // 2500))))
PLACEMENT_WINDOW_S = float(os.environ.get("BENCH_FLEET_WINDOW_S", "30"))
# SIGKILL one worker and follow its nodes' wills (a quarter of the fleet with lite workers)
KILL_WORKER = os.environ.get("BENCH_FLEET_KILL_WORKER", "1" if NODES <= 1000 else "0") == "1"
if NODES <= 1000:
    TARGET_CONVERGE_S, TARGET_SYNC_RSS_MB, TARGET_PLACEMENT_CPU = 5.0, 300.0, 0.10
else:  # the targets at 10,000 nodes
    TARGET_CONVERGE_S, TARGET_SYNC_RSS_MB, TARGET_PLACEMENT_CPU = 15.0, 1000.0, 0.25
TARGET_MIRROR_CPU = 0.25  # mirror-actual, share of one core with every heartbeat live
TAGS = ("2.0", "3.0", "4.0")  # one push each: the median is reported
# BENCH_FLEET_PUSHES=0: part (b) alone, on the fleet as it first converged (no push in (a))
PUSHES = int(os.environ.get("BENCH_FLEET_PUSHES", str(len(TAGS))))
# interval, node timeout: the defaults (10 s, 20 s). Past 1,000 nodes 30 s: placement's first
# pass may come before it heard every node's retained heartbeat (it waits 5 s for them), and
# a node never heard counts as offline since placement started (the default is 60 s)
PLACEMENT_ENV = {"PHRAME_RESCHEDULE_AFTER_S": "3" if NODES <= 1000 else "30"}


# what report.py puts in the table (benchmarks/figures.py says how to read it)
FIGURES = [
    {
        "name": "(a) push → every node converged (median push)",
        "value": "a_change_every_node.median.push_to_all_converged_s",
        "unit": "s",
        "baseline": "a_change_every_node.median.paho_baseline_same_messages_s",
        "target": "targets.push_to_all_converged_s",
    },
    {
        "name": "(a) config-sync peak RSS",
        "value": "config_sync_peak_rss_mb",
        "unit": "MB",
        "baseline": None,
        "target": "targets.config_sync_rss_mb",
        "op": "<",
    },
    {
        "name": "(b) placement CPU, share of one core (bare subscriber as baseline)",
        "value": "b_placement.placement_cpu_share_of_one_core",
        "unit": "cores",
        "baseline": "b_placement.bare_paho_subscriber_cpu_share",
        "target": "targets.placement_cpu_share",
        "op": "<",
    },
    {
        "name": "(b) one node lost: replicas changed (its own as baseline)",
        "value": "b_placement.one_node_stopped.assignments_changed",
        "unit": "",
        "baseline": "b_placement.one_node_stopped.replicas_on_lost_nodes",
        "target": 1,
        "check": "ratio",
        "op": "==",
    },
    {
        "name": "(b) mirror-actual CPU, share of one core (bare subscriber as baseline)",
        "value": "b_placement.mirror_actual_cpu_share_of_one_core",
        "unit": "cores",
        "baseline": "b_placement.bare_paho_subscriber_cpu_share",
        "target": "targets.mirror_actual_cpu_share",
        "op": "<",
    },
    {
        "name": "(a) node statuses per node per change (one as baseline)",
        "value": "a_change_every_node.median.statuses_per_node",
        "unit": "",
        "baseline": None,
        "target": 1,
        "op": "<=",
    },
    {
        "name": "(b) placement pass on an unchanged head (a pass deciding again as baseline)",
        "value": "b_placement.pass_s_median",
        "unit": "s",
        "baseline": "b_placement.pass_s_median_deciding_again",
        "target": None,
    },
    {
        "name": "(c) push → `phrame/deploy` success",
        "value": "c_deploy_green_after_push_s",
        "unit": "s",
        "baseline": None,
        "target": None,
    },
    {
        "name": "(d) mosquitto peak RSS",
        "value": "d_broker.peak_rss_mb",
        "unit": "MB",
        "baseline": "d_broker.idle_rss_mb",
        "target": None,
    },
]


class Sampler:
    """CPU seconds of some processes (user + system), by name."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}

    def cpu(self, name: str) -> float:
        t = self.procs[name].cpu_times()
        return float(t.user + t.system)


def mb(n: int) -> float:
    return round(n / 1e6, 1)


def kind_of(topic: str) -> str:
    parts = topic.split("/")
    if parts[1] == "desired" and parts[2] == "nodes":
        return f"desired {parts[4]}"
    if parts[1] == "actual":
        return f"actual {parts[4]}"
    return f"{parts[1]} {parts[-1] if parts[2] == 'environments' and len(parts) <= 5 else parts[4]}"


def paho_baseline(port: int, messages: list[tuple[str, bytes]]) -> float:
    """One plain paho client publishing the same payloads (QoS 1, retained) until every PUBACK."""
    import paho.mqtt.client as paho

    done, acked, lock = threading.Event(), [0], threading.Lock()

    def on_publish(*_: Any) -> None:
        with lock:
            acked[0] += 1
            if acked[0] == len(messages):
                done.set()

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="fleet-baseline", protocol=paho.MQTTv5)
    client.on_publish = on_publish
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        start = time.perf_counter()
        for topic, payload in messages:
            client.publish("baseline/" + topic, payload, qos=1, retain=True)
        if not done.wait(120):
            raise RuntimeError("the paho baseline did not get every PUBACK")
        took = time.perf_counter() - start
        for topic, _ in messages:  # leave the broker's retained store as it was
            client.publish("baseline/" + topic, b"", qos=1, retain=True)
        return took
    finally:
        client.disconnect()
        client.loop_stop()


# the same topics at the same QoS as placement and config-sync (heartbeats at QoS 0)
BARE_SUBSCRIBER = """
import sys, time, paho.mqtt.client as paho
n = [0]
c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="fleet-bare-subscriber", protocol=paho.MQTTv5)
c.on_message = lambda *a: n.__setitem__(0, n[0] + 1)
c.connect("127.0.0.1", int(sys.argv[1]))
c.subscribe([("phrame/actual/nodes/+/heartbeat", 0), ("phrame/actual/nodes/+/status", 1)])
c.loop_start()
sys.stdin.read()
print(n[0], flush=True)
"""


def profile(fleet: Fleet, names: list[str], seconds: float) -> list[subprocess.Popen[bytes]]:
    """With BENCH_FLEET_PROFILE=DIR: py-spy records these processes (raw files in DIR) for
    BENCH_FLEET_PROFILE_S seconds (25) of the first push."""
    out = os.environ.get("BENCH_FLEET_PROFILE")
    if not out:
        return []
    Path(out).mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(fleet.pid(n)),
             "-d", str(int(seconds)), "-f", "raw", "-o", f"{out}/{n}.txt", "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for n in names
    ]  # fmt: skip


def measure_change(fleet: Fleet, sampler: Sampler, tag: str, *, spy: bool) -> dict[str, Any]:
    """(a) and (c): push a change of the fleet-wide service; follow it to every node."""
    obs = fleet.observer
    cpu0 = {name: sampler.cpu(name) for name in sampler.procs}
    log_mark = len(fleet.log_text("config-sync"))
    load = os.getloadavg()[0]
    obs.start_recording()
    spy_s = float(os.environ.get("BENCH_FLEET_PROFILE_S", "25"))  # from the push
    profiles = profile(fleet, ["config-sync", "nodes-0"], seconds=spy_s) if spy else []
    sha, pushed_at = fleet.commit_and_push(fleet_change(NODES, tag), f"edge-agent {tag}")
    obs.aim(sha)
    wait(lambda: len(obs.converged_at) == NODES, f"{NODES} nodes converged on {sha[:12]}", 120)
    all_converged = max(obs.converged_at.values()) - pushed_at
    first_converged = min(obs.converged_at.values()) - pushed_at
    green_line = f"status phrame/deploy of {sha[:12]}: success"
    wait(lambda: green_line in fleet.log_text("config-sync")[log_mark:], "phrame/deploy success", 60)
    green_at = time.monotonic() - pushed_at  # polled every 20 ms from the last convergence on
    deploys_topic = f"phrame/desired/environments/{ENV}/deploys"

    def record() -> dict[str, Any] | None:
        doc = obs.doc(deploys_topic) or {}
        return next(
            (r for r in doc.get("deploys", []) if r["commit"] == sha and r["state"] == "converged"), None
        )

    wait(record, "the deploys record converged", 90)  # duty-limited checks at 10,000 nodes
    cpu = {name: sampler.cpu(name) - cpu0[name] for name in sampler.procs}
    for recorder in profiles:
        recorder.wait(60)
    messages = obs.stop_recording()
    window = [(t, topic, p) for t, topic, p in messages if t <= pushed_at + all_converged]
    kinds: dict[str, int] = {}
    for _, topic, _ in window:
        kinds[kind_of(topic)] = kinds.get(kind_of(topic), 0) + 1
    carried = [(topic, p) for _, topic, p in window if not topic.endswith("/heartbeat")]
    desired = [t - pushed_at for t, topic, _ in window if "/desired/nodes/" in topic]
    baseline = paho_baseline(fleet.broker.port, carried)
    rec = record() or {}
    return {
        "commit": sha[:12],
        "push_to_all_converged_s": round(all_converged, 3),
        "push_to_first_converged_s": round(first_converged, 3),
        # where the time goes: hook + debounce + read/render, then the publication itself
        "push_to_first_desired_message_s": round(min(desired), 3) if desired else None,
        "push_to_last_desired_message_s": round(max(desired), 3) if desired else None,
        "messages": len(window),
        "messages_without_heartbeats": len(carried),
        # each agent reports its status once per change when it waits for its manifest
        "statuses_per_node": round(kinds.get("actual status", 0) / NODES, 2),
        "message_kinds": dict(sorted(kinds.items())),
        "paho_baseline_same_messages_s": round(baseline, 3),
        "ratio_to_baseline": round(all_converged / baseline, 1),
        "config_sync_cpu_s": round(cpu["config-sync"], 3),
        # the same 2 cores, from the push to the deploys record: what competes with config-sync
        "broker_cpu_s": round(cpu["broker"], 3),
        "simulated_agents_cpu_s": round(sum(v for k, v in cpu.items() if k.startswith("nodes-")), 3),
        "load1_before_push": round(load, 1),
        "deploy_green_after_push_s": round(green_at, 3),
        "deploy_green_after_last_converged_s": round(green_at - all_converged, 3),
        "deploys_record": {k: rec.get(k) for k in ("state", "duration_s")}
        | {"nodes": len(rec.get("nodes") or {})},
    }


def peak_rss(pid: int) -> int:
    """The kernel's high-water mark of a process's RSS (VmHWM), over its whole life."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def summarise(pushes: list[dict[str, Any]]) -> dict[str, Any]:
    """The median push of the run (by push → every node converged), and every push's figures."""
    if not pushes:  # BENCH_FLEET_PUSHES=0
        return {"median": {}, "all_pushes_converged_s": [], "skipped": "BENCH_FLEET_PUSHES=0"}
    ranked = sorted(pushes, key=lambda p: p["push_to_all_converged_s"])
    median = ranked[len(ranked) // 2]
    return {"median": median, "all_pushes_converged_s": [p["push_to_all_converged_s"] for p in pushes],
            "all_pushes_ratio": [p["ratio_to_baseline"] for p in pushes],
            "all_pushes_load1": [p["load1_before_push"] for p in pushes]}  # fmt: skip


def pass_seconds(fleet: Fleet, runs: int = 5 if NODES <= 1000 else 2) -> dict[str, float]:
    """placement's pass as the process runs it (``PlacementReconciler.run_pass``: fetch, read,
    validate, decide) on a clone of the same repository with every node alive, timed here:
    the first pass (cold) and the median of the next ``runs`` on the unchanged head (which
    decide nothing: their inputs are the last decision's), against the same pass made to
    decide again (the baseline: every interval pass decided, before)."""
    from phrame.actual import ActualView
    from placement.git_repo import PlacementRepo
    from placement.health import PlacementHealth
    from placement.reconcile import PlacementReconciler
    from schemas import Topics

    now = time.time()
    live = PlacementHealth(ActualView(Topics(), timeout_s=20, started_at=now))
    for node in fleet.nodes:
        live.view.heartbeat(node, {"ts": now, "interval_s": 5}, retained=False, received_at=now)
    repo = PlacementRepo(str(fleet.bare), fleet.root / "pass-timing" / "repo.git")
    rec = PlacementReconciler(repo, live, clock=time.time, reschedule_after_s=60, node_gc_s=86400)
    t0 = time.perf_counter()
    rec.run_pass()
    cold = time.perf_counter() - t0
    warm, deciding = [], []
    for _ in range(runs):  # interleaved with the baseline: a pass that decides every time, as before
        t0 = time.perf_counter()
        rec.run_pass()
        warm.append(time.perf_counter() - t0)
        rec._decided.clear()
        t0 = time.perf_counter()
        rec.run_pass()
        deciding.append(time.perf_counter() - t0)
    return {"first_pass_s": round(cold, 3), "pass_s_median": round(statistics.median(warm), 3),
            "pass_s_median_deciding_again": round(statistics.median(deciding), 3),
            "decisions_skipped": rec.decisions_skipped}  # fmt: skip


def measure_placement(fleet: Fleet, sampler: Sampler) -> dict[str, Any]:
    """(b): placement's CPU with every heartbeat live, against a bare subscriber; then lose a node."""
    bare = subprocess.Popen(
        [sys.executable, "-c", BARE_SUBSCRIBER, str(fleet.broker.port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        bare_ps = psutil.Process(bare.pid)
        time.sleep(2)  # its connect and the retained replay are not the steady state
        start = time.monotonic()
        p0, b0 = sampler.cpu("placement"), sum(bare_ps.cpu_times()[:2])
        m0 = sampler.cpu("mirror-actual")
        time.sleep(PLACEMENT_WINDOW_S)  # the window measured: nothing to wait for but time
        elapsed = time.monotonic() - start
        placement_cpu = sampler.cpu("placement") - p0
        mirror_cpu = sampler.cpu("mirror-actual") - m0
        bare_cpu = sum(bare_ps.cpu_times()[:2]) - b0
    finally:
        assert bare.stdin is not None
        bare.stdin.close()
        bare.wait(10)
        received = int((bare.stdout.read() if bare.stdout else "0").strip() or 0)
        if bare.stdout:
            bare.stdout.close()

    def stop_one() -> list[str]:  # as on SIGTERM: the agent says offline itself
        node = core_nodes(NODES)[1]
        fleet.stop_node(node)
        return [node]

    single = lose(fleet, stop_one)
    many = lose(fleet, lambda: fleet.kill_worker("nodes-0")) if KILL_WORKER and fleet.workers_n > 1 else None
    return {
        "window_s": round(elapsed, 1),
        "placement_cpu_share_of_one_core": round(placement_cpu / elapsed, 4),
        "bare_paho_subscriber_cpu_share": round(bare_cpu / elapsed, 4),
        "mirror_actual_cpu_share_of_one_core": round(mirror_cpu / elapsed, 4),
        "bare_subscriber_messages": received,
        "ratio_to_bare_subscriber": round(placement_cpu / bare_cpu, 1) if bare_cpu else None,
        "placement_peak_rss_mb": mb(peak_rss(fleet.pid("placement"))),
        "one_node_stopped": single,
        "one_worker_killed": many,
    }


def lose(fleet: Fleet, losing: Callable[[], list[str]]) -> dict[str, Any]:
    """Lose nodes (``losing`` returns them), wait for placement's commit without them, and
    compare ``node.json`` before and after: only their replicas may have changed."""
    node_json = f"environments/{ENV}/node.json"

    def assignments() -> dict[str, list[str | None]]:
        doc: dict[str, list[str | None]] = json.loads(fleet.file_at(fleet.head(), node_json))["assignments"]
        return doc

    old = assignments()
    t0 = time.monotonic()
    lost = set(losing())
    try:
        wait(lambda: not lost & {n for row in assignments().values() for n in row if n},
             f"placement's commit moving the replicas of {len(lost)} lost node(s)", 120)  # fmt: skip
    except TimeoutError as e:  # said in the result: the figures measured before it stay
        return {"lost_nodes": len(lost), "error": str(e), "only_lost_nodes_replicas_changed": False}
    took = time.monotonic() - t0
    new = assignments()
    changed = sorted(
        (s, i) for s in old for i, n in enumerate(old[s]) if i >= len(new.get(s, [])) or new[s][i] != n
    )
    on_lost = sorted((s, i) for s in old for i, n in enumerate(old[s]) if n in lost)
    wills = sum(
        1 for n in lost if (fleet.observer.statuses.get(n) or {}).get("agent") == "node-agent"
    )  # the will names no version: ``{"state": "offline", "agent": "node-agent", "reason": "lost"}``
    return {
        "lost_nodes": len(lost) if len(lost) > 1 else sorted(lost)[0],
        "last_wills_seen": wills,
        "replicas_on_lost_nodes": len(on_lost),
        "assignments_changed": len(changed),
        "only_lost_nodes_replicas_changed": changed == on_lost,
        "moved": sum(1 for s, i in on_lost if new[s][i] is not None),
        "unassigned": sum(1 for s, i in on_lost if new[s][i] is None),
        "lost_to_commit_s": round(took, 2),
    }


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists()):
        print(json.dumps({"benchmark": "fleet_scale", "error": "no mosquitto (Debian package mosquitto)"}))
        return 2
    raise_fd_limit()  # before mosquitto starts: it inherits the limit (a socket per node)
    root = Path(tempfile.mkdtemp(prefix="phrame-bench-fleet-"))
    fleet = Fleet(root, fleet_files(NODES), node_names(NODES), workers=WORKERS, agents=AGENTS)
    steps: dict[str, float] = {}
    try:
        try:
            fleet.start_broker()
        except Exception as e:  # the skip of a benchmark: mosquitto missing
            print(json.dumps({"benchmark": "fleet_scale", "error": f"no mosquitto: {e}"}))
            return 2
        broker = psutil.Process(fleet.broker.proc.pid)  # type: ignore[union-attr]
        broker_idle_rss = broker.memory_info().rss
        say(f"{NODES} nodes; starting config-sync (its first full sync)")
        steps["config_sync_first_sync_s"] = fleet.start_config_sync()
        sync_rss_first = peak_rss(fleet.pid("config-sync"))
        say(f"starting {NODES} agents in {WORKERS} processes")
        steps["agents_connected_s"] = fleet.start_nodes()
        fleet.observer.aim(fleet.head())
        steps["all_converged_after_start_s"] = wait(
            lambda: len(fleet.observer.converged_at) == NODES, "every node converged on the first commit", 180
        )
        broker_connected_rss = broker.memory_info().rss
        say("starting placement and mirror-actual")
        fleet.start_mirror("actual")
        fleet.start_placement(PLACEMENT_ENV)
        state = f"phrame/desired/environments/{ENV}/placement"
        steps["placement_first_state_s"] = wait(
            lambda: fleet.observer.doc(state), "placement's first state", 120 if NODES <= 1000 else 400
        )
        pids = {
            "config-sync": fleet.pid("config-sync"),
            "placement": fleet.pid("placement"),
            "mirror-actual": fleet.pid("mirror-actual"),
            "broker": broker.pid,
        }
        sampler = Sampler(pids | {n: fleet.pid(n) for n in fleet.procs if n.startswith("nodes-")})
        sys0, t0 = dict(fleet.observer.sys), time.monotonic()
        pushes = []
        for i, tag in enumerate(TAGS[:PUSHES]):
            say(f"(a) push {i + 1}/{PUSHES}: a change of every node (edge-agent {tag})")
            pushes.append(measure_change(fleet, sampler, tag, spy=i == 0))
        workers_rss = sum(
            psutil.Process(fleet.pid(n)).memory_info().rss for n in fleet.procs if n.startswith("nodes-")
        )
        say(f"(b) placement for {PLACEMENT_WINDOW_S:.0f} s with every heartbeat live, then nodes lost")
        placement = measure_placement(fleet, sampler)
        placement |= pass_seconds(fleet)
        sys1, t1 = dict(fleet.observer.sys), time.monotonic()
        sync_rss = peak_rss(fleet.pid("config-sync"))
        broker_peak = peak_rss(broker.pid)
    finally:
        say("stopping everything it started")
        fleet.close()
        if os.environ.get("BENCH_FLEET_KEEP") == "1":  # the processes' logs, to read after a failure
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    change = summarise(pushes)
    median = change["median"]
    received = _delta(sys0, sys1, "$SYS/broker/messages/received")
    report = {
        "benchmark": "fleet_scale",
        "nodes": NODES,
        "worker_processes": WORKERS,
        "simulated_agents": AGENTS,
        "docker": "simulated (benchmarks/sim_docker.py)",
        "real": "mosquitto, git and its hook, config-sync, placement, each agent's MQTT side",
        "startup": {k: round(v, 2) for k, v in steps.items()},
        "a_change_every_node": change,
        "config_sync_peak_rss_mb": mb(sync_rss),
        "config_sync_peak_rss_after_first_sync_mb": mb(sync_rss_first),
        "b_placement": placement,
        "c_deploy_green_after_push_s": median.get("deploy_green_after_push_s"),
        "c_deploy_green_after_last_converged_s": median.get("deploy_green_after_last_converged_s"),
        "d_broker": {
            "idle_rss_mb": mb(broker_idle_rss),
            "rss_with_fleet_connected_mb": mb(broker_connected_rss),
            "peak_rss_mb": mb(broker_peak),
            "connections": sys1.get("$SYS/broker/clients/connected"),
            "messages_received_per_s_during_run": round(received / (t1 - t0)) if received else None,
            # mosquitto's own: MQTT packets of every kind (PUBACKs too) per minute
            "load_messages_received_1min": sys1.get("$SYS/broker/load/messages/received/1min"),
            "load_messages_sent_1min": sys1.get("$SYS/broker/load/messages/sent/1min"),
        },
        "agents_rss_mb_total": mb(workers_rss),
        "targets": {
            "push_to_all_converged_s": TARGET_CONVERGE_S,
            "config_sync_rss_mb": TARGET_SYNC_RSS_MB,
            "placement_cpu_share": TARGET_PLACEMENT_CPU,
            "mirror_actual_cpu_share": TARGET_MIRROR_CPU,
        },
        # BENCH_FLEET_PUSHES=0 measured no push: (a) is left out
        "meets_targets": median.get("push_to_all_converged_s", 0.0) <= TARGET_CONVERGE_S
        and sync_rss / 1e6 < TARGET_SYNC_RSS_MB
        and placement["placement_cpu_share_of_one_core"] < TARGET_PLACEMENT_CPU
        and placement["mirror_actual_cpu_share_of_one_core"] < TARGET_MIRROR_CPU
        and placement["one_node_stopped"]["only_lost_nodes_replicas_changed"]
        and (placement["one_worker_killed"] or {"only_lost_nodes_replicas_changed": True})[
            "only_lost_nodes_replicas_changed"
        ],
    }
    print(json.dumps(report, indent=2))
    return 0


def raise_fd_limit() -> None:
    """Lift the soft open-file limit to the hard one (it must hold one socket per node)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < NODES + 1000:
        say(f"the open-file limit ({hard}) is below {NODES} nodes' sockets: connections will fail")


def say(text: str) -> None:
    print(f"fleet_scale: {text}", file=sys.stderr, flush=True)


def _delta(before: dict[str, str], after: dict[str, str], key: str) -> int | None:
    try:
        return int(after[key]) - int(before[key])
    except (KeyError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
