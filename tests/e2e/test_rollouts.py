"""Staged rollouts through ``phrame dev``: real mosquitto, config-sync, placement, two agents
on the one Docker daemon and git pushes. One service ``roll`` with 4 replicas over the two
nodes and a healthcheck; a watcher thread samples Docker all along and counts, at every
instant, the replicas off the old spec or not healthy. The scenarios run in order; the last
ones have services of their own (``slowstop``: old replicas that take their whole stop grace;
``fixme`` and ``slowstart``: paused rollouts a later commit supersedes) and restart
config-sync or the whole stack on its state folder."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from schemas.container_exits import docker_time
from tests.support.dev_stack import DevStackProcess
from tests.support.services import require_binary

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
SERVICE = "roll"
REPLICAS = 4
LOOP = "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"


def spec(round_: str, *, healthy: bool = True, update: str = "", min_healthy_s: int = 1) -> str:
    check = "exit 0" if healthy else "exit 1"  # a string test runs in the image's sh
    # retries 3: on a loaded machine one probe of a fresh container can take over its 1 s
    # timeout, and with retries 1 Docker then calls a healthy replica unhealthy (a real
    # verdict, which pauses the rollout); a failing check still pauses within ~3 s
    return (
        f'name: {SERVICE}\nimage: phrame-quickstart/busybox:1\ncommand: [sh, -c, "{LOOP}"]\n'
        f"replicas: {REPLICAS}\nenv:\n  ROUND: '{round_}'\nplacement:\n  labels:\n    pool: dev\n"
        f"healthcheck:\n  test: '{check}'\n  interval: 1s\n  timeout: 1s\n  retries: 3\n"
        f"update:\n  max_parallel: 1\n  min_healthy_s: {min_healthy_s}\n  healthy_deadline_s: 25\n{update}"
    )


class Sampler:
    """Samples the service's containers every 0.1 s: replica -> (container id, digest, health)."""

    def __init__(self, client: docker.DockerClient, stack: DevStackProcess) -> None:
        self.client, self.stack = client, stack
        self.worst = 0
        self.old: dict[str, str] = {}  # replica -> the digest it ran when watching began
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def now(self) -> dict[str, tuple[str, str, str]]:
        found = self.client.containers.list(
            all=True, filters={"label": f"io.phrame.service={SERVICE}"}, ignore_removed=True
        )
        out = {}
        for c in found:
            if c.labels.get("io.phrame.node") not in self.stack.nodes:
                continue
            health = (c.attrs.get("State", {}).get("Health") or {}).get("Status", "")
            running = c.attrs.get("State", {}).get("Running")
            out[c.labels["io.phrame.replica"]] = (
                c.id,
                c.labels["io.phrame.digest"],
                health if running else "down",
            )
        return out

    def off(self, sample: dict[str, tuple[str, str, str]]) -> int:
        """Replicas off the old spec or not healthy (a missing one counts)."""
        return sum(
            1
            for r in map(str, range(REPLICAS))
            if r not in sample or sample[r][1] != self.old.get(r) or sample[r][2] != "healthy"
        )

    def start(self) -> None:
        self.old = {r: v[1] for r, v in self.now().items()}
        self.worst = 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(10)
        return self.worst

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            try:
                sample = self.now()
            except docker.errors.APIError:
                continue
            # a replica already on the new spec and healthy counts as done, not off
            done = sum(1 for r, v in sample.items() if v[1] != self.old.get(r) and v[2] == "healthy")
            self.worst = max(self.worst, self.off(sample) - done)


@pytest.fixture(scope="module")
def stack(client: docker.DockerClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStackProcess]:
    require_binary("mosquitto", "mosquitto")
    s = DevStackProcess(tmp_path_factory.mktemp("rollouts"))
    try:
        s.wait_ready()
        s.wait(lambda: all(s.is_converged(n) for n in s.nodes), "both nodes converged on the sample", 120)
        s.env_file(f"services/{SERVICE}.yaml").write_text(spec("1"))
        s.commit_and_push("rollouts: add roll")
        s.wait(lambda: SERVICE in s.placement.get("assignments", {}), "placement to place roll", 60)
        # two replicas on each node (placement keeps a valid placement: it moves none without cause)
        s.git("pull", "--quiet", "--rebase", "origin", "main")
        node_json = s.env_file("node.json")
        doc = json.loads(node_json.read_text())
        doc["assignments"][SERVICE] = [s.nodes[i % 2] for i in range(REPLICAS)]
        node_json.write_text(json.dumps(doc, indent=2) + "\n")
        s.commit_and_push("rollouts: roll over both nodes")
        yield s
    finally:
        s.stop()
        # slowstop's replicas ignore SIGTERM: killed here rather than waited for 10 s each
        for c in client.containers.list(filters={"label": f"io.phrame.service={SLOW}"}, ignore_removed=True):
            if c.labels.get("io.phrame.node") in s.nodes:
                with contextlib.suppress(docker.errors.APIError):  # stopped or gone meanwhile
                    c.kill()
        down = s.close()
        left = client.containers.list(
            all=True, filters={"label": "io.phrame.managed=true"}, ignore_removed=True
        )
        left = [c.name for c in left if c.labels.get("io.phrame.node") in s.nodes]
        assert not left, f"phrame dev --down --purge left {left}:\n{down}"


@pytest.fixture(scope="module")
def sampler(client: docker.DockerClient, stack: DevStackProcess) -> Iterator[Sampler]:
    s = Sampler(client, stack)
    yield s
    # A case that failed before its stop() left the thread sampling Docker; under xdist the
    # worker goes on to other modules' tests (one mocks `requests`, and saw these calls).
    if s._thread is not None:
        s.stop()


def rollout(stack: DevStackProcess) -> dict[str, Any]:
    return dict(stack.sync_status().get("rollouts", {}).get(f"{stack.environment}/{SERVICE}") or {})


def all_healthy(sampler: Sampler) -> bool:
    sample = sampler.now()
    return len(sample) == REPLICAS and all(v[2] == "healthy" for v in sample.values())


def push(stack: DevStackProcess, text: str, message: str, service: str = SERVICE) -> str:
    stack.env_file(f"services/{service}.yaml").write_text(text)
    sha, _at = stack.commit_and_push(message)
    return sha


def deploy_text(stack: DevStackProcess, sha: str) -> tuple[str | None, str]:
    for s in stack.sync_status()["reports"]["statuses"]:
        if s["sha"] == sha and s["name"] == "phrame/deploy":
            return s["state"], s["description"]
    return None, ""


def held(stack: DevStackProcess, sha: str, state: str, deploy: str, says: str, timeout: float = 90) -> str:
    """Wait until ``sha``'s rollout is in ``state`` and its ``phrame/deploy`` is ``deploy``
    saying ``says``; that status's text. config-sync shows a rollout's new state before it
    reports it (the report is a call to GitLab, made after), so the one is no proof of the
    other: both are waited for."""
    seen: list[tuple[dict[str, Any], tuple[str | None, str]]] = []

    def both() -> bool:
        seen[:] = [(rollout(stack), deploy_text(stack, sha))]
        now, (found, text) = seen[0]
        return now.get("commit") == sha and now.get("state") == state and found == deploy and says in text

    stack.wait(
        both,
        f"the rollout {state} and phrame/deploy {deploy} saying {says!r}",
        timeout,
        observe=lambda: seen and (seen[0][0].get("state"), seen[0][1]),
    )
    return seen[0][1][1]


def restarted(stack: DevStackProcess, pid: int) -> bool:
    """config-sync runs again, as another process than ``pid``, and answers."""
    try:
        return stack.pid_of("config-sync") != pid and bool(stack.sync_status())
    except (OSError, ValueError):
        return False


def test_1_a_good_change_goes_in_waves_of_one(stack: DevStackProcess, sampler: Sampler) -> None:
    stack.wait(lambda: all_healthy(sampler), "4 healthy replicas of roll", 90)
    nodes = {
        c.labels["io.phrame.node"]
        for c in sampler.client.containers.list(filters={"label": f"io.phrame.service={SERVICE}"})
        if c.labels.get("io.phrame.node") in stack.nodes
    }
    assert nodes == set(stack.nodes)  # 4 replicas over the 2 nodes
    sampler.start()
    sha = push(stack, spec("2"), "rollouts: round 2")
    stack.wait(lambda: rollout(stack).get("commit") == sha, "the rollout of round 2 to start", 30)
    stack.wait(
        lambda: deploy_text(stack, sha)[1].startswith(f"{SERVICE}: wave"),
        "phrame/deploy to name the wave",
        30,
    )
    stack.wait(lambda: rollout(stack).get("state") == "complete", "the rollout to complete", 120)
    stack.wait(lambda: all_healthy(sampler), "every replica healthy", 30)
    worst = sampler.stop()
    assert worst <= 1, f"{worst} replicas were off the old spec or unhealthy at once"
    assert all(v[1] != sampler.old[r] for r, v in sampler.now().items())  # every one changed

    def deployed() -> bool:  # or the head that took the rollout over (placement's commit, say)
        if stack.commit_status(sha) == "canceled":
            return stack.commit_status(stack.remote_head()) == "success"
        return stack.commit_status(sha) == "success"

    stack.wait(deployed, "phrame/deploy success", 60)


def test_2_a_failing_healthcheck_stops_after_the_first_wave(stack: DevStackProcess, sampler: Sampler) -> None:
    before = sampler.now()
    sha = push(stack, spec("bad", healthy=False), "rollouts: a healthcheck that fails")
    text = held(stack, sha, "paused", "failed", f"{SERVICE}: paused at wave 1/")
    assert f"{stack.environment}.{SERVICE}.0" in text and "unhealthy" in text, text
    reason = rollout(stack)["reasons"][0]
    assert reason["replica"] == f"{stack.environment}.{SERVICE}.0" and reason["node"] in stack.nodes
    after = sampler.now()
    for r in ("1", "2", "3"):
        assert after[r][:2] == before[r][:2], f"replica {r} was restarted"
    sync = stack.sync_status()["environments"][stack.environment]["sync"]
    assert sync["rollouts"][0]["state"] == "paused" and sync["last_applied"]["commit"] != sha


def test_3_rollback_returns_the_first_replica_to_the_old_spec(
    stack: DevStackProcess, sampler: Sampler
) -> None:
    good = push(stack, spec("3"), "rollouts: fixed")  # a new rollout from what runs
    stack.wait(
        lambda: rollout(stack).get("commit") == good and rollout(stack).get("state") == "complete", "fix", 120
    )
    stack.wait(lambda: all_healthy(sampler), "every replica healthy", 30)
    before = sampler.now()
    sha = push(
        stack, spec("bad2", healthy=False, update="  on_failure: rollback\n"), "rollouts: bad, rollback"
    )
    held(stack, sha, "rolled-back", "failed", f"{SERVICE}: rolled-back at wave 1/")
    stack.wait(
        lambda: sampler.now().get("0", ("", "", ""))[1] == before["0"][1], "replica 0 back on its spec", 60
    )
    stack.wait(lambda: all_healthy(sampler), "every replica healthy again", 60)
    after = sampler.now()
    for r in ("1", "2", "3"):
        assert after[r][:2] == before[r][:2], f"replica {r} was restarted"
    assert deploy_text(stack, sha)[0] == "failed"


def test_4_a_canary_waits_for_a_promotion(stack: DevStackProcess, sampler: Sampler) -> None:
    before = sampler.now()
    sha = push(stack, spec("4", update="  canary: 1\n"), "rollouts: canary")
    held(stack, sha, "waiting-promotion", "running", "waiting for promotion")
    assert all(sampler.now()[r][:2] == before[r][:2] for r in ("1", "2", "3"))


def test_5_the_dashboard_shows_the_rollout_waiting(stack: DevStackProcess, tmp_path: Path) -> None:
    from tests.support.browser import LAPTOP, launch, wait_js

    def api_rollout() -> Any:  # the topic API's view, which the page renders
        return (stack.api(f"api/environments/{stack.environment}").get("rollouts") or {}).get(SERVICE)

    # the API first: a page that shows nothing then says whether the data or the page lagged
    stack.wait(
        lambda: (api_rollout() or {}).get("state") == "waiting-promotion",
        "the topic API to show the rollout waiting for promotion",
        60,
        observe=api_rollout,
    )
    with launch(tmp_path / "chromium", LAPTOP) as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(stack.api_url)
        selector = (
            f'#env-list article[data-env="{stack.environment}"] ul.rollouts li[data-service="{SERVICE}"]'
        )
        item = page.locator(selector)
        wait_js(
            page,
            "sel => (document.querySelector(sel) || {}).textContent?.includes('waiting-promotion')",
            "the page to show the rollout waiting for promotion",
            arg=selector,
            timeout=30,
            observe="(document.getElementById('env-list') || {}).innerText?.slice(0, 800)",
        )
        text = item.text_content() or ""
        assert "wave 1/4" in text and "1/4 healthy" in text, text
        out = Path(__file__).parents[2] / "out" / "ui"
        out.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out / "dashboard-rollout.png"), full_page=True)
        page.close()


def test_6_phrame_promote_releases_the_rest(stack: DevStackProcess, sampler: Sampler) -> None:
    secret = (stack.state / "webhook-secret").read_text().strip()
    env = {**os.environ, "PHRAME_WEBHOOK_SECRET": secret}
    # a promotion is taken only while the canary waits for it, naming the commit it promotes
    stack.wait(lambda: rollout(stack).get("state") == "waiting-promotion", "the canary to wait", 120)
    commit = str(rollout(stack)["commit"])
    command = [sys.executable, "-m", "phrame", "promote", stack.environment, SERVICE, "--commit", commit]
    done = subprocess.run(
        [*command, "--url", f"http://127.0.0.1:{stack.sync_port}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    stack.wait(lambda: rollout(stack).get("state") == "complete", "the promoted rollout to complete", 120)


def test_7_config_sync_killed_mid_rollout_resumes(stack: DevStackProcess, sampler: Sampler) -> None:
    stack.wait(lambda: all_healthy(sampler), "every replica healthy", 60)
    sampler.start()
    sha = push(stack, spec("5", min_healthy_s=3), "rollouts: round 5")
    stack.wait(lambda: rollout(stack).get("commit") == sha and rollout(stack).get("wave") == 2, "wave 2", 90)
    first = sampler.now()["0"]
    pid = stack.pid_of("config-sync")
    os.kill(pid, signal.SIGKILL)
    stack.wait(lambda: not Path(f"/proc/{pid}").exists(), "config-sync to die", 30)

    stack.wait(lambda: restarted(stack, pid), "the supervisor to restart config-sync", 60)
    stack.wait(
        lambda: rollout(stack).get("state") == "complete", "the rollout to complete after the restart", 120
    )
    worst = sampler.stop()
    assert worst <= 1, f"{worst} replicas off the old spec or unhealthy at once across the restart"
    assert sampler.now()["0"][:2] == first[:2]  # the first wave was not redone
    doc = json.dumps(rollout(stack))
    assert sha in doc


# -- a service whose old replicas take their whole stop grace to stop
SLOW = "slowstop"


def slow_spec(round_: str) -> str:
    # busybox sleep as PID 1 ignores SIGTERM: Docker waits the whole stop_grace_period, then kills
    return (
        f'name: {SLOW}\nimage: phrame-quickstart/busybox:1\ncommand: [sleep, "3600"]\n'
        f"replicas: {REPLICAS}\nstop_grace_period: 10s\nenv:\n  ROUND: '{round_}'\n"
        "placement:\n  labels:\n    pool: dev\n"
        "healthcheck:\n  test: 'exit 0'\n  interval: 1s\n  timeout: 1s\n  retries: 3\n"
        "update:\n  max_parallel: 1\n  min_healthy_s: 1\n  healthy_deadline_s: 12\n"
    )


def containers_of(stack: DevStackProcess, client: docker.DockerClient, service: str) -> list[Any]:
    found = client.containers.list(
        all=True, filters={"label": f"io.phrame.service={service}"}, ignore_removed=True
    )
    return [c for c in found if c.labels.get("io.phrame.node") in stack.nodes]


def healthy_replicas(stack: DevStackProcess, client: docker.DockerClient, service: str, n: int) -> bool:
    found = containers_of(stack, client, service)
    health = [(c.attrs.get("State", {}).get("Health") or {}).get("Status") for c in found]
    return len(found) == n and all(h == "healthy" for h in health)


def rollout_of(stack: DevStackProcess, service: str) -> dict[str, Any]:
    return dict(stack.sync_status().get("rollouts", {}).get(f"{stack.environment}/{service}") or {})


def never_held(stack: DevStackProcess, service: str, sha: str) -> Any:
    """A wait condition: the rollout of ``sha`` is complete; fails at once should it pause."""

    def complete() -> bool:
        doc = rollout_of(stack, service)
        if doc.get("commit") != sha:
            return False
        assert doc.get("state") not in ("paused", "rolled-back"), doc.get("description")
        return doc.get("state") == "complete"

    return complete


def test_8_old_replicas_that_take_10_s_to_stop_do_not_eat_the_deadline(
    stack: DevStackProcess, client: docker.DockerClient
) -> None:
    push(stack, slow_spec("1"), "rollouts: add slowstop", SLOW)
    stack.wait(lambda: healthy_replicas(stack, client, SLOW, REPLICAS), "4 healthy slowstop replicas", 120)
    sha = push(stack, slow_spec("2"), "rollouts: slowstop round 2", SLOW)
    stack.wait(never_held(stack, SLOW, sha), "the slowstop rollout to complete with no pause", 180)
    doc = rollout_of(stack, SLOW)
    assert doc["waves"] == REPLICAS
    # each old replica really took its grace to stop: its new one started >= 10 s after its release
    started = {
        c.labels["io.phrame.replica"]: docker_time(c.attrs["State"]["StartedAt"])
        for c in containers_of(stack, client, SLOW)
    }
    for r in doc["replicas"]:
        index = r["replica"].rsplit(".", 1)[-1]
        at = started[index]
        assert at is not None and at - float(r["released_at"]) >= 9.5, (r, started)
    stack.wait(lambda: deploy_text(stack, sha)[0] == "success", "phrame/deploy success", 60)


# -- a new commit supersedes a paused rollout, also across restarts
FIX = "fixme"


def fix_spec(round_: str, *, healthy: bool = True) -> str:
    check = "exit 0" if healthy else "exit 1"
    return (
        f'name: {FIX}\nimage: phrame-quickstart/busybox:1\ncommand: [sh, -c, "{LOOP}"]\n'
        f"replicas: 2\nenv:\n  ROUND: '{round_}'\nplacement:\n  labels:\n    pool: dev\n"
        f"healthcheck:\n  test: '{check}'\n  interval: 1s\n  timeout: 1s\n  retries: 3\n"
        "update:\n  max_parallel: 1\n  min_healthy_s: 1\n  healthy_deadline_s: 25\n"
    )


def pause_fixme(stack: DevStackProcess, round_: str) -> str:
    bad = push(stack, fix_spec(round_, healthy=False), f"rollouts: fixme {round_}, failing", FIX)
    stack.wait(
        lambda: (
            rollout_of(stack, FIX).get("commit") == bad and rollout_of(stack, FIX).get("state") == "paused"
        ),
        f"the fixme rollout of {round_} to pause",
        90,
    )
    return bad


def deploy_lines(stack: DevStackProcess, sha: str) -> list[str]:
    """What config-sync logged of ``sha``'s phrame/deploy (every report, not only the last)."""
    log = (stack.state / "logs" / "config-sync.log").read_text(errors="replace")
    return [line for line in log.splitlines() if f"of {sha[:12]} on " in line]


def supersedes(stack: DevStackProcess, good: str) -> None:
    """The good commit gets a rollout of its own that completes; its phrame/deploy never
    says failed."""
    stack.wait(never_held(stack, FIX, good), "a new rollout of the good commit to complete", 120)
    stack.wait(lambda: deploy_text(stack, good)[0] == "success", "phrame/deploy success", 60)
    failed = [line for line in deploy_lines(stack, good) if ": failed (" in line]
    assert not failed, failed


def test_9_a_new_commit_supersedes_a_paused_rollout_across_restarts(
    stack: DevStackProcess, client: docker.DockerClient
) -> None:
    push(stack, fix_spec("1"), "rollouts: add fixme", FIX)
    stack.wait(lambda: healthy_replicas(stack, client, FIX, 2), "2 healthy fixme replicas", 90)

    # config-sync killed while the rollout is paused; the fix pushed while it is down
    pause_fixme(stack, "bad1")
    pid = stack.pid_of("config-sync")
    os.kill(pid, signal.SIGKILL)
    good = push(stack, fix_spec("2"), "rollouts: fixme fixed while config-sync is down", FIX)
    stack.wait(lambda: restarted(stack, pid), "the supervisor to restart config-sync", 60)
    supersedes(stack, good)

    # the whole stack stopped while the rollout is paused; the fix pushed right as it comes up
    # again, before or after config-sync read its retained state (test_10 pushes while it is down)
    pause_fixme(stack, "bad2")
    stack.stop()
    stack.start()
    good = push(stack, fix_spec("3"), "rollouts: fixme fixed as the stack starts", FIX)
    stack.wait_ready()
    supersedes(stack, good)


SLOW_START = "slowstart"
# healthy ~6 s after its start: a healthy_deadline_s of 4 pauses its rollout, 30 lets it through
LATE = "trap 'exit 0' TERM; sleep 6 & wait; touch /tmp/ok; while true; do sleep 3600 & wait; done"


def slow_start_spec(round_: str, deadline: int) -> str:
    return (
        f'name: {SLOW_START}\nimage: phrame-quickstart/busybox:1\ncommand: [sh, -c, "{LATE}"]\n'
        f"replicas: 2\nenv:\n  ROUND: '{round_}'\nplacement:\n  labels:\n    pool: dev\n"
        "healthcheck:\n  test: 'test -f /tmp/ok'\n  interval: 1s\n  timeout: 1s\n  retries: 60\n"
        f"update:\n  max_parallel: 1\n  min_healthy_s: 1\n  healthy_deadline_s: {deadline}\n"
    )


def test_10_a_commit_that_only_tunes_update_supersedes_the_paused_rollout_after_a_restart(
    stack: DevStackProcess, client: docker.DockerClient
) -> None:
    push(stack, slow_start_spec("1", 4), "rollouts: add slowstart", SLOW_START)
    stack.wait(lambda: healthy_replicas(stack, client, SLOW_START, 2), "2 healthy slowstart replicas", 90)
    bad = push(stack, slow_start_spec("2", 4), "rollouts: slowstart round 2", SLOW_START)

    def paused() -> bool:
        doc = rollout_of(stack, SLOW_START)
        return doc.get("commit") == bad and doc.get("state") == "paused"

    stack.wait(paused, "the slowstart rollout to pause on its 4 s deadline", 90)
    assert "not healthy 4 s after it started" in str(rollout_of(stack, SLOW_START)["reasons"])
    # the whole stack stopped; the person gives it more time (only update: changes) and starts it
    stack.stop()
    good = push(stack, slow_start_spec("2", 30), "rollouts: slowstart gets 30 s", SLOW_START)
    stack.start()
    stack.wait_ready()
    stack.wait(never_held(stack, SLOW_START, good), "a new rollout of the tuned commit to complete", 120)
    stack.wait(lambda: deploy_text(stack, good)[0] == "success", "phrame/deploy success", 60)
    failed = [line for line in deploy_lines(stack, good) if ": failed (" in line]
    assert not failed, failed
