"""The whole loop through ``phrame dev``: real mosquitto, config-sync, placement, two agents
on the one Docker daemon, git pushes to the local git host. One stack for the module; the
scenarios run in order and each prints its push → converged time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from dev_stack.credentials import PERSON_ACCOUNT
from node_agent.sops_secrets import SopsSecrets
from phrame.sops import keys as age_keys
from phrame.sops import tool as sops_tool
from tests.support.dev_stack import DevStackProcess
from tests.support.services import free_port, require_binary
from tests.support.webhook_receiver import WebhookReceiver, webhook_receiver

pytestmark = [pytest.mark.docker, pytest.mark.mqtt, pytest.mark.slow]
TIMES: dict[str, float] = {}


@pytest.fixture(scope="module")
def pager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WebhookReceiver, Path]]:
    """A webhook receiver on 127.0.0.1 and the secrets folder holding its URL (``pager.url``)."""
    secrets = tmp_path_factory.mktemp("notify-secrets")
    with webhook_receiver() as receiver:
        receiver.listen()
        (secrets / "pager.url").write_text(receiver.url + "\n")
        yield receiver, secrets


@pytest.fixture(scope="module")
def stack(
    client: docker.DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
    pager: tuple[WebhookReceiver, Path],
) -> Iterator[DevStackProcess]:
    require_binary("mosquitto", "mosquitto")
    # a tuning setting: the dev stack passes it through to config-sync
    env = {"PHRAME_NOTIFY_SECRETS_DIR": str(pager[1])}
    s = DevStackProcess(tmp_path_factory.mktemp("e2e"), env=env)
    try:
        ready = s.wait_ready()
        print(f"\nphrame dev ready after {ready:.1f} s")
        # and placement done with it: its commit of the sample's node.json comes after the
        # nodes are up, and a test that pushed meanwhile would see its own commit superseded
        s.wait_settled(120)
        yield s
    finally:
        down = s.close()
        left = containers(client, s.nodes) + [n.name for n in networks(client, s.nodes)]
        for name, seconds in TIMES.items():
            print(f"{name}: {seconds:.2f} s")
        assert not left, f"phrame dev --down --purge left {left}:\n{down}"
        assert not s.state.exists()


def containers(client: docker.DockerClient, nodes: list[str], service: str | None = None) -> list[Any]:
    found = client.containers.list(all=True, filters={"label": "io.phrame.managed=true"}, ignore_removed=True)
    return [
        c
        for c in found
        if c.labels.get("io.phrame.node") in nodes and service in (None, c.labels.get("io.phrame.service"))
    ]


def networks(client: docker.DockerClient, nodes: list[str]) -> list[Any]:
    found = client.networks.list(filters={"label": "io.phrame.managed=true"})
    return [n for n in found if (n.attrs.get("Labels") or {}).get("io.phrame.node") in nodes]


def running(client: docker.DockerClient, stack: DevStackProcess, service: str) -> dict[str, str]:
    """node -> container id of ``service``'s running containers."""
    return {
        c.labels["io.phrame.node"]: c.id
        for c in containers(client, stack.nodes, service)
        if c.status == "running"
    }


def deployed(stack: DevStackProcess, sha: str, name: str, at: float, nodes: list[str] | None = None) -> float:
    """Wait for ``phrame/deploy`` success of ``sha`` and the nodes converged; records the time."""

    def done() -> bool:
        state = stack.commit_status(sha)
        if state == "canceled":  # superseded by a later commit (placement's, say): the head's counts
            head = stack.remote_head()
            return head != sha and stack.commit_status(head) == "success"
        return state == "success"

    stack.wait(done, f"phrame/deploy success of {sha[:12]} (or of the head that superseded it)", 90)
    stack.wait(
        lambda: all(stack.is_converged(n) for n in (nodes or stack.nodes)),
        "the nodes to report converged",
        30,
    )
    TIMES[name] = time.monotonic() - at
    print(f"{name}: push → converged {TIMES[name]:.2f} s")
    return TIMES[name]


def settle(stack: DevStackProcess) -> None:
    """Wait until the head of main is deployed everywhere (placement may still be committing)."""
    stack.wait(
        lambda: (
            stack.commit_status(stack.remote_head()) == "success"
            and all(stack.is_converged(n) for n in stack.nodes)
        ),
        "the head of main deployed and every node converged",
        90,
    )


def test_0_the_topic_api_shows_both_nodes_online_and_converged(stack: DevStackProcess):
    assert f"dashboard:    http://127.0.0.1:{stack.api_port}/" in stack.console()  # the banner

    def both() -> bool:
        nodes = {n["node"]: n for n in stack.api("api/nodes")["nodes"]}
        return sorted(nodes) == sorted(stack.nodes) and all(
            n["online"] and n["converged"] and n["drift"] == 0 and n["generation"]["applied"]
            for n in nodes.values()
        )

    stack.wait(both, "both nodes online, converged and without drift in /api/nodes", 30)
    # the desired plane reaches the API through its own mirror: waited for, not read once
    stack.wait(
        lambda: stack.api(f"api/environments/{stack.environment}")["commit"] == stack.remote_head(),
        "the topic API on the head of main",
        30,
    )
    assert stack.api(f"api/environments/{stack.environment}")["ok"] is True
    token = stack.state / "api-token"
    assert token.stat().st_mode & 0o777 == 0o600 and len(stack.api_token()) >= 32


def test_1_a_page_change_recreates_the_container_and_serves_the_new_page(client, stack: DevStackProcess):
    web_node = stack.nodes[0]
    before = running(client, stack, "web")
    assert "Hello from Phrame" in stack.page()
    web = stack.env_file("services/web.yaml")
    web.write_text(web.read_text().replace("PAGE_TEXT: Hello from Phrame", "PAGE_TEXT: Hello from e2e"))
    sha, at = stack.commit_and_push("e2e: new page text")
    deployed(stack, sha, "1 page change", at, [web_node])
    assert stack.page().startswith(f"Hello from e2e (commit {sha[:12]} on node {web_node})")
    assert stack.node_status(web_node)["commit"] == sha
    after = running(client, stack, "web")
    assert after.keys() == {web_node} and after[web_node] != before[web_node]  # recreated


def _page_token(stack: DevStackProcess, node: str) -> str:
    """The sample's SOPS secret as the node's agent decrypts it (with that node's key)."""
    doc = yaml.safe_load(stack.env_file("secrets/page.sops.yaml").read_text())
    entry = {"age": doc["sops"]["age"], "values": {"token": doc["token"]}}
    sops = SopsSecrets(age_keys.load(stack.state / "age" / f"{node}.key"))
    return sops.value({"page": entry}, "page/token")


def test_1b_the_page_token_is_a_sops_secret_only_the_node_decrypts(client, stack: DevStackProcess):
    web_node = stack.nodes[0]
    key = stack.state / "age" / f"{web_node}.key"
    assert key.stat().st_mode & 0o777 == 0o600
    token = _page_token(stack, web_node)
    assert f"secret PAGE_TOKEN injected: {len(token)} characters" in stack.page()
    assert token not in stack.page()
    snapshot = stack.state / "mirror" / "desired.json"
    stack.wait(lambda: '"page/token"' in snapshot.read_text(), "the desired mirror to hold the web item", 30)
    for where in (snapshot, stack.state / "mirror" / "actual.json", stack.output):
        assert token not in where.read_text(errors="replace"), where
    for log in (stack.state / "logs").glob("*.log"):
        assert token not in log.read_text(errors="replace"), log

    # rotate: a new value, encrypted for the same nodes; only web (its one user) is recreated
    recipients = [
        yaml.safe_load(f.read_text())["age_recipient"] for f in (stack.clone / "nodes").glob("*.yaml")
    ]
    plain = stack.root / "page-plain.yaml"
    plain.write_text("token: rotated\n")
    stack.env_file("secrets/page.sops.yaml").write_text(sops_tool.encrypt(plain, recipients))
    plain.unlink()
    before = {svc: running(client, stack, svc) for svc in ("web", "cache", "worker")}
    sha, at = stack.commit_and_push("e2e: rotate the page token")
    deployed(stack, sha, "1b secret rotation", at)
    stack.wait(lambda: "injected: 7 characters" in stack.page(), "the page with the rotated token", 30)
    after = {svc: running(client, stack, svc) for svc in ("web", "cache", "worker")}
    assert after["web"][web_node] != before["web"][web_node]  # recreated
    assert after["cache"] == before["cache"] and after["worker"] == before["worker"]  # untouched


def test_2_placement_commits_a_new_service_and_a_delete_removes_it(client, stack: DevStackProcess):
    extra = stack.env_file("services/extra.yaml")
    extra.write_text(
        "name: extra\nimage: phrame-quickstart/busybox:1\n"
        "command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 3600 & wait; done\"]\n"
        "placement:\n  labels:\n    pool: dev\n"
    )
    sha, at = stack.commit_and_push("e2e: add extra")
    stack.wait(lambda: stack.remote_head() != sha, "placement's node.json commit on main", 30)
    placed, placed_at = stack.remote_head(), time.monotonic()
    message = stack.git("--git-dir", str(stack.state / "config.git"), "log", "-1", "--format=%s", placed)
    assert "extra" in message
    deployed(stack, placed, "2 add a label-placed service", at)
    # config-sync polls every 600 s here: placement's own push reached it through the hook
    assert time.monotonic() - placed_at < 30
    stack.wait(lambda: len(running(client, stack, "extra")) == 1, "extra running on one node", 30)
    stack.git("pull", "--quiet", "--rebase", "origin", "main")
    extra.unlink()
    sha, at = stack.commit_and_push("e2e: remove extra")
    stack.wait(lambda: not containers(client, stack.nodes, "extra"), "extra removed", 60)
    head = stack.remote_head()
    deployed(stack, head, "2 delete it", at)

    # placement drops extra from node.json in a commit of its own: let it land (and deploy)
    # before the next scenario, whose deploy it would otherwise supersede
    def node_json_forgot_extra() -> bool:
        bare = str(stack.state / "config.git")
        path = f"main:environments/{stack.environment}/node.json"
        return "extra" not in json.loads(stack.git("--git-dir", bare, "show", path)).get("assignments", {})

    stack.wait(node_json_forgot_extra, "placement to drop extra from node.json", 30)
    settle(stack)


def test_2b_a_service_no_node_can_take_is_degraded_never_converged(client, stack: DevStackProcess):
    """Real placement decides: a label-placed service whose label no node has is published
    unassigned, and the deployment wanting it is degraded, never converged: ``phrame/deploy``
    failed, and its record, the topic API and ``phrame status`` name the replica and why."""
    settle(stack)
    gpu = stack.env_file("services/gpu.yaml")
    gpu.write_text(
        "name: gpu\nimage: phrame-quickstart/busybox:1\n"
        "command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 3600 & wait; done\"]\n"
        'placement:\n  labels:\n    gpu: "true"\n'
    )
    sha, _at = stack.commit_and_push("e2e: a service for a node with a GPU")
    replica, why = f"{stack.environment}.gpu.0", "no node matches gpu=true"

    def unassigned() -> list[dict[str, Any]]:
        return [u for u in stack.placement.get("unassigned") or () if u.get("replica") == "gpu.0"]

    stack.wait(unassigned, "placement to publish gpu.0 unassigned", 60)
    assert unassigned()[0]["reason"] == why
    seen: dict[str, set[str | None]] = {}

    def degraded() -> dict[str, Any] | None:
        # placement may commit its node.json (gpu: no node, and why) after the push: the head counts
        head = stack.remote_head()
        for commit in (sha, head):
            seen.setdefault(commit, set()).add(stack.commit_status(commit))
        deploys = stack.api(f"api/environments/{stack.environment}")["deploys"]
        record = next((d for d in deploys if d["commit"] == head), None)
        done = record is not None and record["state"] == "degraded" and stack.commit_status(head) == "failed"
        return record if done else None

    stack.wait(degraded, "the head's deployment degraded and phrame/deploy failed", 60)
    record = degraded()
    assert record is not None
    head = record["commit"]
    assert record["health"] == "degraded"
    assert {"node": "", "replica": replica, "reason": f"unassigned: {why}"} in record["reasons"]
    assert record["failed"] == {"node": "", "reason": f"{replica}: unassigned: {why}"}
    assert record["replicas"][replica] is None
    # never converged: no record of either commit, no phrame/deploy of either, said success
    deploys = stack.api(f"api/environments/{stack.environment}")["deploys"]
    assert {d["state"] for d in deploys if d["commit"] in (sha, head)} <= {"degraded", "superseded"}
    assert all("success" not in states for states in seen.values()), seen
    logs = "".join(f.read_text(errors="replace") for f in (stack.state / "logs").glob("*.log"))
    assert not [c for c in {sha, head} if f"deploy of {c[:12]} on main: success" in logs]
    status = subprocess.run(
        [sys.executable, "-m", "phrame", "status", "--timeout", "5"],
        env=stack.child_env | stack.login_env(PERSON_ACCOUNT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode in (0, 1), status.stderr
    assert f"deploy {head[:10]} degraded" in status.stdout, status.stdout
    assert f"{replica}: unassigned: {why}" in status.stdout, status.stdout

    # the service goes again, and placement forgets it, before the next scenario
    stack.git("pull", "--quiet", "--rebase", "origin", "main")
    gpu.unlink()
    stack.commit_and_push("e2e: remove gpu")

    def node_json_forgot_gpu() -> bool:
        bare = str(stack.state / "config.git")
        path = f"main:environments/{stack.environment}/node.json"
        return "gpu" not in json.loads(stack.git("--git-dir", bare, "show", path)).get("assignments", {})

    stack.wait(lambda: not unassigned() and node_json_forgot_gpu(), "placement to forget gpu", 60)
    settle(stack)


def test_2c_an_image_that_does_not_exist_fails_in_seconds_and_notifies_once(
    client, stack: DevStackProcess, pager: tuple[WebhookReceiver, Path]
):
    """The node reports the pull error at once: ``phrame/deploy`` fails with it within the
    settle hold and a tick (about 6 s), not at the deploy timeout (600 s). The environment's
    ``notify:`` pager gets one ``failed`` and, once the service is gone, one ``recovered``."""
    receiver, _ = pager
    settle(stack)
    node = stack.nodes[0]
    image = f"127.0.0.1:{free_port()}/phrame-e2e/missing:1"  # nothing listens there: refused
    environment = stack.env_file("environment.yaml")
    without_notify = environment.read_text()
    environment.write_text(
        without_notify + "notify:\n  - name: pager\n    format: json\n    url_file: pager.url\n"
    )
    missing = stack.env_file("services/missing.yaml")
    missing.write_text(f"name: missing\nimage: {image}\nplacement:\n  node: {node}\n")
    sha, at = stack.commit_and_push("e2e: a service whose image does not exist, and a pager")
    stack.wait(lambda: stack.commit_status(sha) == "failed", "phrame/deploy of the missing image failed", 60)
    took = time.monotonic() - at
    text = next(
        s["description"]
        for s in stack.sync_status()["reports"]["statuses"]
        if s["sha"] == sha and s["name"] == "phrame/deploy" and s["state"] == "failed"
    )
    assert node in text and image in text and "connection refused" in text, text
    assert took < 30, f"failed only after {took:.1f} s"
    print(f"\nE2E 2c missing image: phrame/deploy failed {took:.1f} s after the push")
    stack.wait(lambda: receiver.events() == ["failed"], "the pager's failed", 30)
    assert receiver.received[0]["commit"] == sha and image in json.dumps(receiver.received[0]["reasons"])

    stack.git("pull", "--quiet", "--rebase", "origin", "main")
    missing.unlink()
    fixed, _ = stack.commit_and_push("e2e: remove missing")
    settle(stack)
    stack.wait(lambda: receiver.events() == ["failed", "recovered"], "the pager's recovered", 30)
    assert receiver.received[1]["commit"] in (fixed, stack.remote_head()), receiver.received[1]
    stack.git("pull", "--quiet", "--rebase", "origin", "main")
    environment.write_text(without_notify)
    stack.commit_and_push("e2e: no pager")
    settle(stack)
    assert receiver.events() == ["failed", "recovered"], receiver.events()  # one per transition


def test_3_an_invalid_commit_changes_nothing_and_the_next_valid_one_deploys(client, stack: DevStackProcess):
    before = {c.id for c in containers(client, stack.nodes)}
    web = stack.env_file("services/web.yaml")
    good = web.read_text()
    web.write_text(good.replace("networks:", "replicas: two\nnetworks:", 1))
    worker = stack.env_file("services/worker.yaml")
    worker.write_text(worker.read_text() + "depends_on:\n  - nosuch\n")
    bad, _at = stack.commit_and_push("e2e: two mistakes")

    def errors() -> list[dict[str, Any]]:
        last = stack.sync_status()["last_sync"].get("main") or {}
        return list(last.get("errors") or []) if last.get("commit") == bad else []

    stack.wait(errors, "config-sync to report the invalid commit", 30)
    where = {(e["file"], e["rule"]) for e in errors()}
    env = f"environments/{stack.environment}/services"
    assert (f"{env}/web.yaml", "schema") in where and (f"{env}/worker.yaml", "unknown-dependency") in where
    assert all(isinstance(e["line"], int) and e["line"] > 0 for e in errors())
    assert stack.commit_status(bad, "phrame/validate") == "failed"
    # and the console (the local host has no GitLab page) prints each error with file:line
    stack.wait(
        lambda: f"{env}/worker.yaml:" in stack.console() and "unknown-dependency" in stack.console(),
        "the console to print the errors",
        15,
    )
    assert {c.id for c in containers(client, stack.nodes)} == before  # nothing changed on the host
    stack.git("revert", "--no-edit", "HEAD")
    worker.write_text(worker.read_text() + "env:\n  ROUND: '3'\n")  # a change, so there is a deploy
    sha, at = stack.commit_and_push("e2e: fixed, and the worker changed")
    stack.wait(lambda: stack.commit_status(sha, "phrame/validate") == "success", "the fix to validate", 30)
    deployed(stack, sha, "3 the valid push after an invalid one", at)


def test_4_reverting_the_page_commit_rolls_the_host_back(client, stack: DevStackProcess):
    page_commit = stack.git("log", "--format=%H", "--grep=e2e: new page text").split()[0]
    stack.git("revert", "--no-edit", page_commit)
    at = stack.push()
    sha = stack.head()
    deployed(stack, sha, "4 git revert", at, [stack.nodes[0]])
    assert stack.page().startswith(f"Hello from Phrame (commit {sha[:12]}")


def test_4b_phrame_rollback_makes_a_revert_commit_and_the_page_returns(client, stack: DevStackProcess):
    before = stack.head()
    web = stack.env_file("services/web.yaml")
    web.write_text(web.read_text().replace("PAGE_TEXT: Hello from Phrame", "PAGE_TEXT: Hello to roll back"))
    sha, at = stack.commit_and_push("e2e: a page to roll back")
    deployed(stack, sha, "4b page change", at, [stack.nodes[0]])
    assert stack.page().startswith("Hello to roll back")
    secret = (stack.state / "webhook-secret").read_text().strip()  # no tokens file: its secret
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRAME_")} | {"PHRAME_TOKEN": secret}
    url = f"http://127.0.0.1:{stack.sync_port}"
    at = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "phrame", "rollback", stack.environment, "--to", before, "--url", url],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout.split(" ", 1)[1])
    revert = answer["commit"]
    assert answer["status"] == "pushed" and stack.remote_head() == revert  # config-sync pushed it
    assert (
        stack.git("--git-dir", str(stack.state / "config.git"), "log", "-1", "--format=%P", revert).strip()
        == sha
    )
    deployed(stack, revert, "4b phrame rollback", at, [stack.nodes[0]])
    assert stack.page().startswith(f"Hello from Phrame (commit {revert[:12]}")


def test_5_a_killed_agent_loses_its_replicas_to_the_other_node(client, stack: DevStackProcess):
    mover = stack.env_file("services/mover.yaml")
    mover.write_text(
        "name: mover\nimage: phrame-quickstart/busybox:1\n"
        "command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 3600 & wait; done\"]\n"
        "placement:\n  labels:\n    pool: dev\n"
    )
    stack.commit_and_push("e2e: add mover")
    stack.wait(lambda: len(running(client, stack, "mover")) == 1, "mover running", 60)
    (lost,) = running(client, stack, "mover")
    (other,) = [n for n in stack.nodes if n != lost]
    stack.hold(f"agent-{lost}")  # the supervisor must not bring it back during the test
    at = time.monotonic()
    os.kill(stack.pid_of(f"agent-{lost}"), signal.SIGKILL)
    stack.wait(lambda: other in running(client, stack, "mover"), f"mover to start on {other}", 60)
    TIMES["5 agent killed → replica moved"] = time.monotonic() - at
    print(f"5 agent killed → replica moved: {TIMES['5 agent killed → replica moved']:.2f} s")
    unassigned = stack.placement.get("unassigned") or []
    assert any(u["replica"].startswith("worker.") and "spread" in u["reason"] for u in unassigned), unassigned
    stack.hold(f"agent-{lost}", held=False)  # the supervisor restarts it
    stack.wait(lambda: stack.is_converged(lost), f"{lost} back and converged", 60)
    stack.wait(
        lambda: [c.labels["io.phrame.node"] for c in containers(client, stack.nodes, "mover")] == [other],
        f"{lost}'s old mover removed",
        60,
    )
    stack.wait(lambda: not stack.placement.get("unassigned"), "every worker replica placed again", 60)
    settle(stack)


def test_6_a_broker_restart_without_persistence_removes_nothing(client, stack: DevStackProcess):
    settle(stack)
    before = {c.id: c.attrs["State"]["StartedAt"] for c in containers(client, stack.nodes)}
    names = {c.id: c.name for c in containers(client, stack.nodes)}
    stack.hold("broker")
    pid = stack.pid_of("broker")
    os.kill(pid, signal.SIGTERM)
    stack.wait(lambda: not Path(f"/proc/{pid}").exists(), "the broker to stop", 30)
    for f in (stack.state / "broker").glob("*.db"):
        f.unlink()  # restarted without its retained messages
    with stack._lock:
        stack.statuses.clear()
    at = time.monotonic()
    stack.hold("broker", held=False)

    def manifests() -> set[str]:
        if stack.mqtt is None or not stack.mqtt.is_connected:
            return set()
        held = stack.mqtt.collect_retained("phrame/desired/nodes/+/manifest", timeout=5)
        return {t.split("/")[3] for t in held}

    stack.wait(lambda: manifests() == set(stack.nodes), "config-sync to republish every manifest", 90)
    stack.wait(lambda: all(stack.is_converged(n) for n in stack.nodes), "nodes converged again", 90)
    TIMES["6 broker restart → converged"] = time.monotonic() - at
    print(f"6 broker restart → converged: {TIMES['6 broker restart → converged']:.2f} s")
    after = {c.id: c.attrs["State"]["StartedAt"] for c in containers(client, stack.nodes)}
    names |= {c.id: c.name for c in containers(client, stack.nodes)}
    changed = {names[i] for i in set(before.items()) ^ set(after.items()) for i in [i[0]]}
    assert after == before, f"removed, recreated or restarted: {changed}\n{stack.log_tails()}"


def test_7_a_second_start_reuses_the_state_and_converges_at_once(client, stack: DevStackProcess):
    settle(stack)
    before = {c.id: c.attrs["State"]["StartedAt"] for c in containers(client, stack.nodes)}
    head = stack.remote_head()
    stack.stop()  # Ctrl-C's path: containers keep running
    assert {c.id for c in containers(client, stack.nodes) if c.status == "running"} == set(before)
    stack.start()
    ready = stack.wait_ready()
    assert "reusing" in stack.console()[stack.console_from :]
    took = stack.wait(lambda: all(stack.is_converged(n, None) for n in stack.nodes), "converged again", 60)
    TIMES["7 second start → ready"] = ready
    print(f"7 second start: ready {ready:.2f} s, converged {took:.2f} s later")
    assert stack.remote_head() == head  # nothing new to place
    after = {c.id: c.attrs["State"]["StartedAt"] for c in containers(client, stack.nodes)}
    assert after == before  # nothing recreated or restarted
