"""The dev stack's pure parts: the quickstart sample, settings and ports, children's
settings, the console's lines and the banner."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dev_stack import sample
from dev_stack.banner import banner
from dev_stack.children import Child
from dev_stack.console import LogFollower, event_line
from dev_stack.errors import DevError
from dev_stack.parts import build_children
from dev_stack.settings import DevSettings, taken_ports
from phrame.config_repo import load_directory, render, validate
from schemas import Topics

T = Topics()


def write(files: dict[str, str], root: Path) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_quickstart_sample_is_valid_and_renders_what_the_readme_promises(tmp_path: Path):
    settings = DevSettings(tmp_path / "state", nodes=("dev-1", "dev-2"), web_port=18081)
    repo, problems = load_directory(write(sample.files(settings), tmp_path / "repo"))
    assert [p.format() for p in validate(repo, problems)] == []
    topics = render(repo, commit="c" * 40).topics()
    web = topics[T.desired_item("dev-1", "containers", "quickstart.web.0")]
    assert web["image"] == "phrame-quickstart/busybox:1"
    assert web["ports"] == [
        {"host_ip": "127.0.0.1", "host_port": 18081, "container_port": 8080, "protocol": "tcp"}
    ]
    assert web["env"]["PAGE_TEXT"] == "Hello from Phrame"
    assert "$PHRAME_COMMIT" in " ".join(web["command"])
    assert web["depends_on"] == ["quickstart.cache.0"]
    cache = topics[T.desired_item("dev-1", "containers", "quickstart.cache.0")]
    assert cache["healthcheck"]["test"] == ["CMD", "test", "-f", "/tmp/ready"]
    assert T.desired_item("dev-1", "networks", "quickstart.backend") in topics
    ticker = topics[T.desired_item("dev-1", "processes", "quickstart.ticker.0")]
    assert ticker["workdir"] == str(settings.workdir("dev-1"))
    declared = topics[T.env_service("quickstart", "worker")]["declared"]
    assert declared["replicas"] == 2 and declared["placement"] == {"labels": {"pool": "dev"}, "spread": True}
    # worker has no node.json yet: placement decides, so nothing of it is rendered to a node
    assert not any(".worker." in t for t in topics if "/nodes/" in t)


def test_the_quickstart_sample_opts_into_previews_of_the_page_on_the_second_node(tmp_path: Path):
    settings = DevSettings(tmp_path / "state", nodes=("dev-1", "dev-2"), web_port=18081)
    repo, problems = load_directory(write(sample.files(settings), tmp_path / "repo"))
    assert [p.format() for p in validate(repo, problems)] == []
    preview = repo.environments["quickstart"].settings["preview"]
    assert preview == {"nodes": {"node": "dev-2"}, "services": ["web"], "auto_stop_h": 48}
    one = DevSettings(tmp_path / "one", nodes=("dev-1",))
    files = sample.files(one)
    assert "node: dev-1" in files["environments/quickstart/environment.yaml"]


def test_sample_uses_the_chosen_node_names_and_environment(tmp_path: Path):
    settings = DevSettings(tmp_path, nodes=("e2e-1", "e2e-2", "e2e-3"), environment="e2e-x")
    files = sample.files(settings)
    assert sorted(f for f in files if f.startswith("nodes/")) == [
        "nodes/e2e-1.yaml",
        "nodes/e2e-2.yaml",
        "nodes/e2e-3.yaml",
    ]
    assert "node: e2e-1" in files["environments/e2e-x/services/web.yaml"]
    assert "name: e2e-x" in files["environments/e2e-x/environment.yaml"]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"nodes": ("Dev_1",)}, "not a valid name"),
        ({"nodes": ()}, "at least 1"),
        ({"listen": "8080"}, "host:port"),
    ],
)
def test_bad_options_are_refused_before_anything_starts(tmp_path: Path, kw, message):
    with pytest.raises(DevError, match=message):
        DevSettings(tmp_path, **kw)


def test_a_taken_port_is_named_with_its_option(tmp_path: Path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        settings = DevSettings(tmp_path, listen=f"127.0.0.1:{port}", broker_port=1, web_port=2)
        problems = taken_ports(settings, skip=(1, 2))
    assert problems == [f"port {port} on 127.0.0.1 is already in use: --listen (config-sync)"]


def test_settings_are_saved_for_down(tmp_path: Path):
    settings = DevSettings(tmp_path, nodes=("a-1", "a-2"), broker_port=2000)
    settings.save()
    assert DevSettings.load(tmp_path) == settings
    assert DevSettings.load(tmp_path / "nothing") is None


def test_children_get_the_stack_settings_whatever_the_callers_environment(tmp_path: Path):
    settings = DevSettings(
        tmp_path, nodes=("dev-1", "dev-2"), broker_port=2883, listen="127.0.0.1:9080", api_port=9090
    )
    caller = {
        "PATH": "/bin",
        "PHRAME_DESIRED_MQTT_URL": "mqtts://prod:8883",
        "PHRAME_MQTT_PASSWORD_FILE": "/etc/prod",
        "PHRAME_GIT_HOST": "gitlab",
        "PHRAME_NODE_TIMEOUT_S": "3",
        "PHRAME_API_TOKEN": "the caller's",
        "PHRAME_MIRROR_DIR": "/elsewhere",
        "PHRAME_METRICS_LISTEN": "127.0.0.1:9310",  # one port for every child would collide
    }
    _which, children = build_children(settings, caller)
    assert not [c.name for c in children if "PHRAME_METRICS_LISTEN" in c.env]
    names = [c.name for c in children]
    assert names == [
        "broker",
        "config-sync",
        "placement",
        "mirror-desired",
        "mirror-actual",
        "topic-api",
        "agent-dev-1",
        "agent-dev-2",
    ]
    by_name = {c.name: c for c in children}
    sync = by_name["config-sync"].env
    assert sync["PHRAME_DESIRED_MQTT_URL"] == "mqtt://127.0.0.1:2883"
    # the caller's password is dropped; each part logs in with its own account of this start
    assert sync["PHRAME_MQTT_PASSWORD_FILE"] == str(settings.credentials_dir / "config-sync")
    logins = {c.name: c.env.get("PHRAME_MQTT_USERNAME") for c in children}
    assert logins == {
        "broker": None,
        "config-sync": "config-sync",
        "placement": "placement",
        "mirror-desired": "mirror-desired",
        "mirror-actual": "mirror-actual",
        "topic-api": "topic-api",
        "agent-dev-1": "node-dev-1",
        "agent-dev-2": "node-dev-2",
    }
    assert (sync["PHRAME_GIT_HOST"], sync["PHRAME_REPO_URL"]) == ("local", str(settings.repo))
    assert sync["PHRAME_LISTEN"] == "127.0.0.1:9080"
    assert sync["PHRAME_WEBHOOK_SECRET_FILE"] == str(settings.secret_file)
    assert by_name["placement"].env["PHRAME_NODE_TIMEOUT_S"] == "3"  # tuning passes through
    assert by_name["placement"].env["PHRAME_PLACEMENT_INTERVAL_S"] == "2"
    agent = by_name["agent-dev-2"].env
    assert agent["PHRAME_NODE_NAME"] == "dev-2" and agent["PHRAME_SHARED_DAEMON"] == "true"
    assert agent["PHRAME_STATE_DIR"] == str(settings.agent_state("dev-2"))
    assert by_name["mirror-actual"].argv[-2:] == ["--plane", "actual"]
    for name in ("mirror-desired", "mirror-actual", "topic-api"):
        assert by_name[name].env["PHRAME_MIRROR_DIR"] == str(tmp_path / "mirror")
    api = by_name["topic-api"].env
    assert api["PHRAME_LISTEN"] == "127.0.0.1:9090" and "PHRAME_API_TOKEN" not in api
    assert api["PHRAME_API_TOKEN_FILE"] == str(tmp_path / "api-token")
    assert api["PHRAME_CONFIG_SYNC_URL"] == "http://127.0.0.1:9080"  # the dashboard's promote and rollback


def test_console_lines_for_statuses_and_placements():
    sha = "0123456789abcdef" * 2 + "01234567"
    status = f"2026-12-01 14:00:00,000 INFO config_sync.reporting: status phrame/deploy of {sha}: success (converged on dev-1)"
    assert event_line(status) == "phrame/deploy 0123456789ab: success (converged on dev-1)"
    placed = f"x INFO placement.reconcile: environment quickstart: committed {sha} onto main: placement quickstart: 2 replica moves"
    assert (
        event_line(placed)
        == "placement 0123456789ab on main (quickstart): placement quickstart: 2 replica moves"
    )
    assert event_line("INFO uvicorn: GET /readyz 200") is None


def test_log_follower_returns_only_new_complete_lines(tmp_path: Path):
    log = tmp_path / "x.log"
    log.write_text("old\n")
    follower = LogFollower(log)
    with open(log, "a") as f:
        f.write("one\ntw")
    assert follower.lines() == ["one"]
    with open(log, "a") as f:
        f.write("o\n")
    assert follower.lines() == ["two"]
    assert follower.lines() == []


def test_banner_names_the_clone_line_the_urls_and_three_things_to_try(tmp_path: Path):
    settings = DevSettings(tmp_path, web_port=8081)
    text = "\n".join(banner(settings, 3.2, has_docker=True))
    assert f"git clone {tmp_path / 'config.git'} phrame-config" in text
    assert "http://127.0.0.1:8080/status" in text and "curl http://127.0.0.1:8081/" in text
    assert "git revert --no-edit HEAD HEAD~1 && git push" in text
    assert "  dashboard:    http://127.0.0.1:8090/\n" in text and "http://127.0.0.1:8090/docs" in text
    assert str(tmp_path / "api-token") in text
    # the broker takes passwords: where a person's read-only one is
    assert f"user operator, password in {tmp_path / 'credentials' / 'operator'}" in text
    # another state folder than ./.phrame-dev: how other commands find the stack
    assert f"PHRAME_DEV_STATE_DIR={tmp_path} phrame status" in text
    other = "\n".join(banner(DevSettings(tmp_path, broker_port=2883), 1, has_docker=False))
    assert "mqtt://127.0.0.1:2883" in other and "(needs Docker)" in other


class ExitedProcess:
    """Stands in for a Popen whose child has already exited with ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def poll(self) -> int:
        return self.code


def test_a_crashing_child_is_restarted_with_doubling_backoff_unless_held(tmp_path: Path):
    now = [100.0]
    child = Child("placement", ["true"], {}, tmp_path, tmp_path, clock=lambda: now[0])
    delays = []
    for _ in range(7):
        child.proc, child.restart_at = ExitedProcess(1), None  # type: ignore[assignment]
        assert child.poll() == 1
        delays.append(child.backoff)
        assert not child.due_for_restart()
        now[0] += child.backoff
        assert child.due_for_restart()
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    child.hold_file.touch()
    assert not child.due_for_restart()  # a held child stays down (a lost node, on purpose)


def test_the_topic_api_proposes_compose_imports_to_the_dev_repository(tmp_path: Path):
    """``POST /api/import/compose`` on ``make up`` pushes a branch into .phrame-dev/config.git:
    the API gets the repository, host and tracked branch config-sync and placement get."""
    settings = DevSettings(tmp_path, nodes=("dev-1",), broker_port=2883, api_port=9090)
    caller = {"PATH": "/bin", "PHRAME_GIT_HOST": "gitlab", "PHRAME_REPO_URL": "https://prod/x.git"}
    _which, children = build_children(settings, caller)
    by_name = {c.name: c.env for c in children}
    keys = ("PHRAME_GIT_HOST", "PHRAME_REPO_URL", "PHRAME_TRACK_REF")
    api = [by_name["topic-api"].get(k) for k in keys]
    assert api == ["local", str(settings.repo), "main"]
    assert [by_name["config-sync"].get(k) for k in keys] == api
    assert [by_name["placement"].get(k) for k in keys] == api
    assert by_name["topic-api"]["PHRAME_STATE_DIR"] == str(settings.state_dir)


def test_the_agents_take_the_stacks_policy_which_lets_the_sample_run_and_nothing_more(tmp_path: Path):
    """Without a policy file, host processes are off: the stack writes its own, allowing the
    quickstart's host process as the user who started it, and no host mounts."""
    from dev_stack.node_policy import policy_text, write_policy
    from node_agent.policy import read_policy

    settings = DevSettings(
        tmp_path, nodes=("dev-1",), broker_port=2883, listen="127.0.0.1:9080", api_port=9090
    )
    written = write_policy(settings)
    assert written.stat().st_mode & 0o777 == 0o600
    _which, children = build_children(settings, {"PATH": "/bin"})
    (agent,) = [c for c in children if c.name == "agent-dev-1"]
    assert agent.env["PHRAME_POLICY_FILE"] == str(written)
    policy = read_policy(written)
    assert policy.processes and policy.allow == () and not policy.all_interfaces
    assert policy.users is not None and len(policy.users) == 1  # its starter alone
    _which, children = build_children(settings, {"PATH": "/bin", "PHRAME_POLICY_FILE": "/etc/mine.yaml"})
    (agent,) = [c for c in children if c.name == "agent-dev-1"]
    assert agent.env["PHRAME_POLICY_FILE"] == "/etc/mine.yaml"  # the caller's own wins
    assert "users: [alice]" in policy_text("alice")


def test_a_childs_exit_says_one_true_thing_and_shows_only_this_runs_lines(tmp_path: Path):
    """Held, it is not "restarting in 1 s"; killed, it names the signal; its last lines are
    of the run that ended, never of an earlier one (they read as if minutes old)."""
    now = [100.0]
    child = Child("agent-nu-2", ["true"], {}, tmp_path, tmp_path, clock=lambda: now[0])
    child.log_file.write_text("--- phrame dev: starting agent-nu-2 at 10:00:00\nold run's last words\n")
    child.mark_log_start()  # as start() does, after its own "starting" line
    with open(child.log_file, "a") as f:
        f.write("this run's line\n")
    child.proc = ExitedProcess(-9)  # type: ignore[assignment]
    child.hold_file.touch()
    code = child.poll()
    assert code == -9
    said = child.exit_line(code)
    assert said == f"agent-nu-2 was killed (SIGKILL); not restarted while {child.hold_file} exists", said
    assert child.tail() == ["this run's line"]
    child.hold_file.unlink()
    assert child.exit_line(1) == "agent-nu-2 exited with code 1; restarting in 1 s"


def test_a_superseded_deployment_is_explained():
    sha, newer = "a" * 40, "b" * 40
    line = (
        f"x INFO config_sync.reporting: status phrame/deploy of {sha}: canceled (superseded by {newer[:12]})"
    )
    subjects = {newer[:12]: "placement quickstart: 2 replica moves"}
    assert event_line(line, describe=subjects.get) == (
        f"phrame/deploy {sha[:12]}: canceled: {newer[:12]} (placement quickstart: 2 replica moves) came "
        "next before this one had converged; its own phrame/deploy line says what runs"
    )
    assert event_line(line) == (
        f"phrame/deploy {sha[:12]}: canceled: {newer[:12]} came next before this one had converged; "
        "its own phrame/deploy line says what runs"
    )


def test_with_ha_a_second_config_sync_stands_by_with_its_own_port_clone_and_account(tmp_path: Path):
    settings = DevSettings(tmp_path, listen="127.0.0.1:9080", ha=True, standby_port=9082)
    _which, children = build_children(settings, {"PATH": "/bin", "PHRAME_INSTANCE_ID": "caller's"})
    active, standby = children[1], children[2]
    assert (active.name, standby.name) == ("config-sync", "config-sync-standby")
    assert active.env["PHRAME_HA_LEASE_S"] == standby.env["PHRAME_HA_LEASE_S"] == "4"
    assert (active.env["PHRAME_INSTANCE_ID"], standby.env["PHRAME_INSTANCE_ID"]) == (
        "config-sync-a",
        "config-sync-b",
    )
    assert (active.env["PHRAME_LISTEN"], standby.env["PHRAME_LISTEN"]) == ("127.0.0.1:9080", "127.0.0.1:9082")
    assert active.env["PHRAME_STATE_DIR"] != standby.env["PHRAME_STATE_DIR"]
    assert (active.env["PHRAME_MQTT_USERNAME"], standby.env["PHRAME_MQTT_USERNAME"]) == (
        "config-sync",
        "config-sync-standby",
    )
    assert settings.config_sync_urls == ["http://127.0.0.1:9080", "http://127.0.0.1:9082"]
    said = "\n".join(banner(settings, 1.0, has_docker=True))
    assert "http://127.0.0.1:9080/status and http://127.0.0.1:9082/status" in said
    # without --ha: one config-sync and no lease
    _which, single = build_children(DevSettings(tmp_path), {"PATH": "/bin"})
    assert [c.name for c in single].count("config-sync-standby") == 0
    assert "PHRAME_HA_LEASE_S" not in single[1].env
