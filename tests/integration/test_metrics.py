"""Every service's metrics after real activity: a git push synced by config-sync
(served by uvicorn), applied by a real ``phrame node-agent`` on the real daemon, placement
and a mirror and the topic API as processes, one mosquitto. Each ``/metrics`` is scraped over HTTP and the
counters are seen to move; every metric the Grafana dashboard and the alert rules name is
one a service really exports; with ``PHRAME_METRICS_LISTEN`` unset nothing listens."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from tests.integration.test_deploy_records_agent import repo_files
from tests.integration.test_sync_app import serving
from tests.support.agent_support import AgentEnv, AgentProcess
from tests.support.mosquitto import Mosquitto
from tests.support.services import free_port
from tests.support.sync_support import SECRET, ConfigRemote, settings_for
from tests.support.topic_api import ApiStack
from tests.support.waiting import wait_for
from tests.unit.test_metrics_files import used_metrics

ROOT = Path(__file__).resolve().parents[2]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Scrape:
    """One scrape of a ``/metrics`` URL: the families it declares and every sample."""

    def __init__(self, url: str) -> None:
        answer = httpx.get(url, timeout=5)
        answer.raise_for_status()
        self.families: set[str] = set()
        self.samples: Samples = {}
        for fam in text_string_to_metric_families(answer.text):
            self.families.add(fam.name)
            for s in fam.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def value(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)


def scrape(url: str) -> Scrape | None:
    try:
        return Scrape(url)
    except httpx.HTTPError:
        return None


def wait_metric(url: str, name: str, at_least: float, timeout: float = 60, **labels: str) -> Scrape:
    """Scrape ``url`` until ``name{labels}`` reaches ``at_least``; the last scrape."""
    last: list[Scrape | None] = [None]

    def reached() -> bool:
        last[0] = scrape(url)
        return last[0] is not None and last[0].value(name, **labels) >= at_least

    wait_for(reached, f"{name}{labels} >= {at_least} at {url}", timeout)
    assert last[0] is not None
    return last[0]


@contextmanager
def phrame(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "phrame", *args], env=env, cwd=ROOT, stdout=out, stderr=out
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def listens(pid: int) -> list[tuple[str, int]]:
    """The TCP addresses process ``pid`` listens on."""
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return sorted((c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN)


def connected_to(pid: int, port: int) -> bool:
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return any(c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port == port for c in conns)


def base_env(state: Path, broker: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")}
    return env | {"PHRAME_DESIRED_MQTT_URL": broker, "PHRAME_STATE_DIR": str(state)} | extra


@pytest.mark.slow
def test_every_service_counts_real_activity(tmp_path: Path, mosquitto: Mosquitto, env: AgentEnv) -> None:
    remote = ConfigRemote(tmp_path / "git")
    remote.commit("web: first", files=repo_files(env, image=env.image, version=1))
    agent_port, placement_port, mirror_port = free_port(), free_port(), free_port()
    agent = AgentProcess(
        env.process_env(
            str(tmp_path / "agent"),
            PHRAME_DESIRED_MQTT_URL=mosquitto.url,
            PHRAME_METRICS_LISTEN=f"127.0.0.1:{agent_port}",
        ),
        str(tmp_path / "agent.log"),
    )
    placement_env = base_env(
        tmp_path / "placement",
        mosquitto.url,
        PHRAME_REPO_URL=str(remote.bare_path),
        PHRAME_PLACEMENT_INTERVAL_S="0.2",
        PHRAME_METRICS_LISTEN=f"127.0.0.1:{placement_port}",
    )
    mirror_env = base_env(
        tmp_path / "mirror", mosquitto.url, PHRAME_METRICS_LISTEN=f"127.0.0.1:{mirror_port}"
    ) | {"PHRAME_ACTUAL_MQTT_URL": mosquitto.url, "PHRAME_MIRROR_DEBOUNCE_MS": "50"}
    settings = settings_for(
        remote,
        tmp_path / "sync",
        mosquitto.url,
        webhook_secret=SECRET,
        poll_s=3600,
        debounce_s=0,
        deploy_timeout_s=30,
    )
    service = ConfigSync(settings, reporter=LocalReporter())
    # the topic API reads the snapshots the mirror below writes
    api = ApiStack(mosquitto.url, tmp_path / "api", PHRAME_MIRROR_DIR=str(tmp_path / "mirror" / "mirror"))
    try:
        api.start(mirrors=False)
        with (
            phrame(["placement"], placement_env, tmp_path / "placement.log"),
            phrame(["mirror", "--plane", "actual"], mirror_env, tmp_path / "mirror.log") as mirror,
            serving(service) as sync_url,
        ):
            sync = wait_metric(
                f"{sync_url}/metrics", "phrame_config_sync_deploys_total", 1, result="converged"
            )
            assert sync.value("phrame_config_sync_deploy_seconds_count", result="converged") >= 1
            assert sync.value("phrame_config_sync_syncs_total", ref="main", result="applied") >= 1
            assert sync.value("phrame_config_sync_messages_published_total") > 0
            assert sync.value("phrame_config_sync_sync_failing", ref="main") == 0
            before = sync.value("phrame_config_sync_webhooks_total", result="unauthorized")
            answer = httpx.post(
                f"{sync_url}/webhooks/gitlab", content=b"{}", headers={"X-Gitlab-Token": "no"}
            )
            assert answer.status_code == 401
            sync = Scrape(f"{sync_url}/metrics")
            assert sync.value("phrame_config_sync_webhooks_total", result="unauthorized") == before + 1

            agent_url = f"http://127.0.0.1:{agent_port}/metrics"
            agent_m = wait_metric(agent_url, "phrame_node_agent_passes_total", 1, result="converged")
            assert agent_m.value("phrame_node_agent_actions_total", kind="create", result="ok") >= 1, (
                agent.log()
            )
            assert agent_m.value("phrame_node_agent_pass_seconds_count") >= 1
            assert agent_m.value("phrame_node_agent_drift_items") == 0
            assert agent_m.value("phrame_node_agent_info", node=env.node) == 1
            assert listens(agent.proc.pid) == [("127.0.0.1", agent_port)]

            placement_url = f"http://127.0.0.1:{placement_port}/metrics"
            wait_metric(placement_url, "phrame_placement_passes_total", 1, result="ok")  # a pass finished
            placed = wait_metric(placement_url, "phrame_placement_node_alive", 1, node=env.node)
            age = placed.value("phrame_placement_heartbeat_age_seconds", node=env.node)
            assert 0 <= age < 10, age  # the agent beats every 0.5 s

            mirror_url = f"http://127.0.0.1:{mirror_port}/metrics"
            mirrored = wait_metric(mirror_url, "phrame_mirror_snapshot_writes_total", 1, plane="actual")
            assert mirrored.value("phrame_mirror_messages_total", plane="actual") > 0
            assert mirrored.value("phrame_mirror_snapshot_bytes", plane="actual") > 0
            assert mirrored.value("phrame_mirror_snapshot_failures_total", plane="actual") == 0
            assert listens(mirror.pid) == [("127.0.0.1", mirror_port)]

            exported = set().union(
                *(Scrape(u).families for u in (sync_url + "/metrics", agent_url, placement_url, mirror_url))
            )
            api_m = wait_metric(
                f"{api.url}/metrics", "phrame_topic_api_snapshot_reads_total", 1, plane="actual"
            )
            exported |= api_m.families
            missing = {name: where for name, where in used_metrics().items() if name not in exported}
            assert not missing, f"the dashboard or the alerts use metrics no service exports: {missing}"
    finally:
        agent.terminate()
        api.stop()
        remote.work.close()  # gitpython's cat-file helpers


@pytest.mark.slow
def test_no_listener_without_the_setting(tmp_path: Path, mosquitto: Mosquitto) -> None:
    remote = ConfigRemote(tmp_path / "git")
    remote.commit("empty", files={"README": "x\n"})
    remote.work.close()  # gitpython's cat-file helpers: the placement process reads the bare repo
    mirror_env = base_env(tmp_path / "mirror", mosquitto.url) | {"PHRAME_MIRROR_DEBOUNCE_MS": "50"}
    placement_env = base_env(tmp_path / "placement", mosquitto.url, PHRAME_REPO_URL=str(remote.bare_path))
    with (
        phrame(["mirror", "--plane", "desired"], mirror_env, tmp_path / "mirror.log") as mirror,
        phrame(["placement"], placement_env, tmp_path / "placement.log") as placement,
    ):
        for proc in (mirror, placement):  # both are up: each holds its broker connection
            wait_for(lambda p=proc: connected_to(p.pid, mosquitto.port), f"pid {proc.pid} on the broker", 30)
        assert listens(mirror.pid) == []
        assert listens(placement.pid) == []


def test_a_bad_listen_setting_is_refused_with_exit_2(tmp_path: Path) -> None:
    env = base_env(tmp_path, "mqtt://127.0.0.1:1", PHRAME_METRICS_LISTEN="9310")
    done = subprocess.run(
        [sys.executable, "-m", "phrame", "mirror", "--plane", "desired"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "PHRAME_METRICS_LISTEN='9310': expected host:port" in done.stderr
