"""The fault suite's harness: one dev stack with 12 managed and 2 unmanaged containers.

Used by ``tests/faults/test_*.py`` through the fixtures of ``conftest.py``. It extends the
quickstart sample by a push (eight more services pinned four per node, a ``depends_on``
chain among them), records every container's id and StartedAt before a fault, and checks
after it that nothing was lost or restarted, that the stack converged again within the
case's bound, and that what it reports (``/api/nodes``, ``phrame status --json``, the
deploys record) is true again. It writes one record per case to ``out/faults.json``.
A node on a Docker daemon of its own (fault 2's) is read from that daemon (``daemons``).
It never touches a Docker object it did not create (the stack's nodes, or RUN_ID labels).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import docker

from tests.faults.disks import StateDisks
from tests.support.dev_stack import DevStackProcess
from tests.support.docker import busybox_image, labels

OUT = Path(__file__).resolve().parents[2] / "out" / "faults.json"
LOOP = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"
#: the chain of case 10: chain-c waits for chain-b, which waits for chain-a (all on node 2)
CHAIN = ("chain-a", "chain-b", "chain-c")
#: the stack's grace periods: long enough that no fault here is a node loss to placement
#: (moving replicas after a node loss is placement's own tested behaviour, not this suite's)
NODE_TIMEOUT_S = "20"
REPORTS_S = 15.0
#: config-sync's production debounce (the dev stack's is 0.1 s): a webhook burst folds per window
DEBOUNCE_S = 0.5
STACK_ENV = {
    "PHRAME_NODE_TIMEOUT_S": NODE_TIMEOUT_S,
    "PHRAME_RESCHEDULE_AFTER_S": "300",
    "PHRAME_DEBOUNCE_S": str(DEBOUNCE_S),
}
Snapshot = dict[str, tuple[str, str]]  # container id -> (service@node, StartedAt)


def service(
    name: str, node: str, *, env: str = "1", depends: str | None = None, healthcheck: bool = False
) -> str:
    text = (
        f"name: {name}\nimage: phrame-quickstart/busybox:1\n"
        f'command: [sh, -c, "{LOOP}"]\nenv:\n  ROUND: "{env}"\n'
        f"placement:\n  node: {node}\n"
    )
    if depends:  # a healthcheck, so depends_on waits for a started, healthy container
        text += f"depends_on:\n  - {depends}\n"
    if healthcheck or name.startswith("chain-"):
        text += "healthcheck:\n  test: [CMD, 'true']\n  interval: 1s\n  timeout: 1s\n  retries: 3\n"
    return text


@dataclass
class FaultRecord:
    fault: str
    bound_s: float
    recovery_s: float
    containers_lost: int
    unmanaged_touched: int

    def line(self) -> str:
        return (
            f"FAULT {self.fault}: bound {self.bound_s:g} s, recovered in {self.recovery_s:.2f} s, "
            f"containers lost {self.containers_lost}, unmanaged touched {self.unmanaged_touched}"
        )


class FaultStack:
    def __init__(
        self, stack: DevStackProcess, client: docker.DockerClient, run: str, disks: StateDisks | None = None
    ) -> None:
        self.stack, self.client, self.run = stack, client, run
        self.disks = disks  # the agents' and mirrors' small disks (case 8), when mounted
        self.unmanaged: list[str] = []
        #: nodes on a Docker daemon of their own (fault 2's), with a client of that daemon
        self.daemons: dict[str, docker.DockerClient] = {}

    @property
    def nodes(self) -> list[str]:
        """The stack's nodes, then those on a daemon of their own."""
        return [*self.stack.nodes, *self.daemons]

    # -- setup
    def extend(self) -> None:
        """Push eight more services (four per node, the chain on the second) and two of our own."""
        s = self.stack
        first, second = s.nodes
        for i in range(1, 6):
            s.env_file(f"services/fa{i}.yaml").write_text(service(f"fa{i}", first))
        for name, dep in zip(CHAIN, (None, *CHAIN[:-1]), strict=True):
            s.env_file(f"services/{name}.yaml").write_text(service(name, second, depends=dep))
        sha, _ = s.commit_and_push("faults: ten more containers")
        self.settle(f"the extension {sha[:12]} deployed", 120)
        image = busybox_image(self.client)
        for i in (1, 2):
            c = self.client.containers.run(
                image,
                ["sleep", "3600"],
                detach=True,
                labels=labels(self.run),
                name=f"faults-unmanaged-{self.run[-8:]}-{i}",
            )
            self.unmanaged.append(c.id)
        assert len(self.managed()) >= 10, self.managed()

    def kill(self, child: str) -> int:
        """SIGKILL the stack's ``child`` by pid, held (not restarted) until :meth:`release`."""
        s = self.stack
        s.hold(child)
        pid = s.pid_of(child)
        os.kill(pid, signal.SIGKILL)
        s.wait(lambda: not Path(f"/proc/{pid}").exists(), f"{child} (pid {pid}) to die", 30)
        return pid

    def release(self, child: str) -> None:
        self.stack.hold(child, held=False)  # the supervisor restarts it (after its backoff)

    # -- reading Docker
    def managed(self) -> list[Any]:
        """The managed containers of every node, each read from its node's daemon."""
        found = []
        for client, nodes in [(self.client, self.stack.nodes), *((c, [n]) for n, c in self.daemons.items())]:
            listed = client.containers.list(
                all=True, filters={"label": "io.phrame.managed=true"}, ignore_removed=True
            )
            found += [c for c in listed if c.labels.get("io.phrame.node") in nodes]
        return found

    def snapshot(self) -> Snapshot:
        return {
            c.id: (
                f"{c.labels.get('io.phrame.service')}@{c.labels.get('io.phrame.node')}",
                c.attrs["State"]["StartedAt"],
            )
            for c in self.managed()
            if c.status == "running"
        }

    def services(self) -> dict[str, int]:
        """service@node -> how many containers (any state): a duplicate or an orphan shows here."""
        out: dict[str, int] = {}
        for c in self.managed():
            key = f"{c.labels.get('io.phrame.service')}@{c.labels.get('io.phrame.node')}"
            out[key] = out.get(key, 0) + 1
        return out

    def unmanaged_state(self) -> Snapshot:
        out: Snapshot = {}
        for cid in self.unmanaged:
            c = self.client.containers.get(cid)
            out[cid] = (c.status, c.attrs["State"]["StartedAt"])
        return out

    # -- convergence and what is reported
    def not_converged(self) -> str:
        """Why the stack is not converged on the head of main ("" when it is)."""
        s = self.stack
        head = s.remote_head()
        if s.commit_status(head) != "success":
            return f"phrame/deploy of {head[:12]}: {s.commit_status(head)}"
        for n in self.nodes:
            if not s.is_converged(n):  # its status names its manifest's commit, not the head
                st = s.node_status(n)
                return f"{n} status: {st.get('state')} converged={st.get('converged')} {st.get('commit')}"
        nodes = {n["node"]: n for n in s.api("api/nodes")["nodes"]}
        for n in self.nodes:
            row = nodes.get(n) or {}
            if not (row.get("online") and row.get("converged") and row.get("drift") == 0):
                return f"/api/nodes {n}: {row}"
        return ""

    def converged(self) -> bool:
        try:
            return not self.not_converged()
        except OSError:  # config-sync or the topic API restarting: not converged yet
            return False

    def settle(self, what: str, timeout: float) -> float:
        return self.stack.wait(self.converged, what, timeout)

    def status_json(self, timeout: float = 5) -> tuple[int, dict[str, Any]]:
        """``phrame status --json --timeout <timeout>`` (also the most it listens for heartbeats)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
        env |= self.stack.login_env("observer")  # as phrame status finds it beside the stack
        env["PHRAME_NODE_TIMEOUT_S"] = NODE_TIMEOUT_S
        done = subprocess.run(
            [sys.executable, "-m", "phrame", "status", "--json", "--timeout", str(timeout)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}

    def reported_true(self) -> None:
        """(d): /api/nodes, ``phrame status --json`` and the deploys record agree with the head."""
        s = self.stack
        head = s.remote_head()
        # a report may lag the first converged observation by a publication (a deploy record
        # rewritten after a republish): give it a short bounded wait, naming what is off
        try:
            s.wait(self.converged, "the reports to agree again", REPORTS_S)
        except AssertionError as e:
            raise AssertionError(f"{self.not_converged()}\n{e}") from None
        code, doc = self.status_json()
        rows = {n["node"]: n for n in doc.get("nodes", [])}
        assert code == 0, doc
        assert all(rows[n]["state"] == "online" and rows[n]["converged"] for n in self.nodes), rows
        env = s.api(f"api/environments/{s.environment}")
        assert env["commit"] == head, env
        (mine,) = [e for e in doc["environments"] if e["environment"] == s.environment]
        assert mine["last_applied"] == head and mine["deploys"], mine

    def manifests_held(self) -> bool:
        """Every node's manifest retained on the broker (config-sync published it)."""
        mqtt = self.stack.mqtt
        if mqtt is None or not mqtt.is_connected:
            return False
        held = mqtt.collect_retained("phrame/desired/nodes/+/manifest", timeout=5)
        return {t.split("/")[3] for t in held} >= set(self.stack.nodes)

    # -- the verdict of one case
    def verdict(
        self,
        fault: str,
        bound: float,
        at: float,
        before: Snapshot,
        unmanaged: Snapshot,
        *,
        expect_changed: Collection[str] = (),
        also: Callable[[], bool] | None = None,
        daemon_restarted: Collection[str] = (),
        touched: Callable[[], set[str]] | None = None,
    ) -> FaultRecord:
        """Wait for convergence (and ``also``) within ``bound`` from ``at``; check (a)-(d); record.

        The containers of the ``daemon_restarted`` nodes were restarted by their daemon: they
        must keep their ids and run again, a new StartedAt is no fault. ``touched`` names more
        unmanaged containers the fault touched (beyond :meth:`unmanaged_state`'s)."""
        try:
            self.stack.wait(
                lambda: self.converged() and (also is None or also()),
                f"converged again after {fault}",
                bound + 30,
            )
        except AssertionError as e:
            try:
                why = self.not_converged() or "the case's own condition"
            except OSError as api:
                why = f"an API not answering: {api}"
            raise AssertionError(f"not converged: {why}\n{e}") from None
        recovery = time.monotonic() - at
        after = self.snapshot()
        gone = {before[i][0] for i in before if i not in after}
        lost = {k for k in gone if k.split("@")[0] not in expect_changed}
        missing = {v[0] for v in before.values() if v[0].split("@")[0] not in expect_changed}
        missing -= {v[0] for v in after.values()}
        restarted = {
            after[i][0]
            for i in after
            if i in before
            and after[i][1] != before[i][1]
            and after[i][0].split("@")[0] not in expect_changed
            and after[i][0].split("@")[1] not in daemon_restarted
        }
        assert not lost and not restarted and not missing, (
            f"lost {lost}, restarted {restarted}, not running {missing}\n{self.stack.log_tails()}"
        )
        record = self.record(fault, bound, recovery, len(lost | restarted | missing), unmanaged, touched)
        self.reported_true()
        return record

    def record(
        self,
        fault: str,
        bound: float,
        recovery: float,
        lost: int,
        unmanaged: Snapshot,
        more_touched: Callable[[], set[str]] | None = None,
    ) -> FaultRecord:
        """Print and write the case's line; (b) and (c) checked here, (a) by the caller first."""
        touched = {i for i, v in self.unmanaged_state().items() if unmanaged.get(i) != v or v[0] != "running"}
        touched |= more_touched() if more_touched else set()
        rec = FaultRecord(fault, bound, round(recovery, 2), lost, len(touched))
        print("\n" + rec.line())
        write_record(rec)
        assert not touched, f"unmanaged containers touched: {touched}"
        assert recovery <= bound, f"{fault}: recovered in {recovery:.1f} s, bound {bound} s"
        return rec


def write_record(record: FaultRecord) -> None:
    """Merge into ``out/faults.json``: one record per fault, this run's replacing older ones."""
    OUT.parent.mkdir(exist_ok=True)
    try:
        old = [r for r in json.loads(OUT.read_text()) if isinstance(r, dict)]
    except (OSError, ValueError):
        old = []
    merged = {r.get("fault"): r for r in old} | {record.fault: asdict(record)}
    OUT.write_text(json.dumps(list(merged.values()), indent=2) + "\n")
