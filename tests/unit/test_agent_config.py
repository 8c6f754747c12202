"""Spec -> Docker create parameters, settings, durations, own-container detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from node_agent.container_config import create_params, duration_ns, stop_timeout_s
from node_agent.docker_refs import auth_for, detect_own_container_id
from node_agent.errors import SettingsError, SpecError
from node_agent.models import DIGEST, MANAGED, NODE, REPLICA
from node_agent.settings import AgentSettings
from tests.support import agent_support as spec


def test_create_params_carry_labels_ports_volumes_resources_and_health(tmp_path: Path):
    (tmp_path / "pw").write_text("s3cret\n")
    web = spec.container(
        "prod",
        "web",
        2,
        image="web:1",
        command=["run"],
        env={"A": "1", "PW": {"file": "pw"}},
        ports=[
            {"host_ip": "127.0.0.1", "host_port": 8080, "container_port": 80, "protocol": "tcp"},
            {"host_ip": None, "host_port": None, "container_port": 53, "protocol": "udp"},
        ],
        volumes=["/srv/data:/data:ro", "/cache"],
        networks=["prod.front", "prod.back"],
        resources={"nano_cpus": 500_000_000, "memory": 1 << 28},
        healthcheck={"test": "wget -q localhost", "interval": "1m30s", "retries": 3},
        restart="unless-stopped",
        labels={"team": "a"},
    )
    p = create_params(web, "node-a", secrets_dir=tmp_path)
    assert p.name == "prod.web.2" and p.command == ["run"]
    assert {k: v for k, v in p.environment.items() if not k.startswith("PHRAME_")} == {
        "A": "1",
        "PW": "s3cret",
    }
    assert p.labels[MANAGED] == "true" and p.labels[NODE] == "node-a"
    assert p.labels[DIGEST] == web["digest"] and p.labels[REPLICA] == "2"
    assert p.labels["team"] == "a"
    assert p.bindings == {"80/tcp": [("127.0.0.1", 8080)], "53/udp": [("", None)]}
    assert p.exposed == [(80, "tcp"), (53, "udp")]
    assert p.binds == ["/srv/data:/data:ro"] and p.anonymous_volumes == ["/cache"]
    assert p.networks == ["prod.front", "prod.back"] and p.aliases == ["web"]
    assert (p.nano_cpus, p.memory, p.restart) == (500_000_000, 1 << 28, "unless-stopped")
    assert p.healthcheck == {
        "test": ["CMD-SHELL", "wget -q localhost"],
        "interval": 90 * 10**9,
        "retries": 3,
    }


def test_create_params_carry_the_compose_fields():
    s = spec.container(
        "prod",
        "web",
        stop_signal=3,
        stop_grace_period="1m0.5s",
        user="app",
        working_dir="/app",
        hostname="web",
        extra_hosts={"db.local": "10.0.0.5"},
        ulimits={"nproc": {"soft": 64, "hard": 64}, "memlock": {"soft": -1, "hard": -1}},
        logging={"driver": "local", "options": {"max-size": "10m"}},
    )
    p = create_params(s, "node-a")
    assert (p.stop_signal, p.stop_timeout, p.user, p.working_dir, p.hostname) == (
        "3",
        61,
        "app",
        "/app",
        "web",
    )
    assert p.extra_hosts == {"db.local": "10.0.0.5"}
    assert p.ulimits == [
        {"name": "memlock", "soft": -1, "hard": -1},
        {"name": "nproc", "soft": 64, "hard": 64},
    ]
    assert p.log_config == {"type": "local", "config": {"max-size": "10m"}}
    bare = create_params(spec.container("prod", "web"), "node-a")
    assert (bare.stop_signal, bare.stop_timeout, bare.ulimits, bare.log_config, bare.extra_hosts) == (
        None,
    ) * 5


@pytest.mark.parametrize(("grace", "seconds"), [("0s", 0), ("1ms", 1), ("1s", 1), ("1500ms", 2), ("2m", 120)])
def test_stop_grace_rounds_up_to_whole_seconds(grace: str, seconds: int):
    assert stop_timeout_s(grace) == seconds


def test_containers_learn_their_node_environment_service_replica_and_commit():
    # Nomad-like: the quickstart page prints the commit it runs. The item's commit changes
    # only when the item does, so this never recreates an unchanged container.
    web = spec.container(
        "prod", "web", 2, env={"A": "1", "PHRAME_NODE": "spoofed"}, commit="c0ffee" * 6 + "beef"
    )
    env = create_params(web, "node-a").environment
    assert env["A"] == "1"
    assert {k: v for k, v in env.items() if k.startswith("PHRAME_")} == {
        "PHRAME_NODE": "node-a",
        "PHRAME_ENVIRONMENT": "prod",
        "PHRAME_SERVICE": "web",
        "PHRAME_REPLICA": "2",
        "PHRAME_COMMIT": "c0ffee" * 6 + "beef",
    }


def test_unreadable_env_file_names_the_file_not_a_value(tmp_path: Path):
    web = spec.container("e", "web", env={"PW": {"file": "pw"}})
    with pytest.raises(SpecError, match=f"e.web.0: env PW: cannot read {tmp_path}/pw: No such file"):
        create_params(web, "n", secrets_dir=tmp_path)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("/etc/shadow", "outside PHRAME_SECRETS_DIR"),
        ("/proc/self/environ", "outside PHRAME_SECRETS_DIR"),
        ("../../etc/passwd", "outside PHRAME_SECRETS_DIR"),
        ("", "no file name"),
        (".", "a directory, not a regular file"),
        ("bin", "not UTF-8 text"),
        ("big", "65537 bytes, more than the 65536 allowed"),
    ],
)
def test_only_small_utf8_regular_files_inside_the_secrets_dir_are_read(tmp_path: Path, name, why):
    (tmp_path / "bin").write_bytes(b"\x80\x81")
    (tmp_path / "big").write_bytes(b"x" * (64 * 1024 + 1))
    web = spec.container("e", "web", env={"PW": {"file": name}})
    with pytest.raises(SpecError, match=why):
        create_params(web, "n", secrets_dir=tmp_path)


def test_a_secret_is_read_by_name_or_by_absolute_path_inside_the_dir(tmp_path: Path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "k").write_text("v\n\n")
    (tmp_path / "link").symlink_to(tmp_path / "d" / "k")  # a link that stays inside is followed
    (tmp_path / "max").write_bytes(b"y" * 64 * 1024)
    env = {"A": {"file": "d/k"}, "B": {"file": str(tmp_path / "d" / "k")}, "C": {"file": "link"}}
    web = spec.container("e", "web", env={**env, "D": {"file": "max"}})
    p = create_params(web, "n", secrets_dir=tmp_path)
    mine = {k: v for k, v in p.environment.items() if not k.startswith("PHRAME_")}
    assert mine == {"A": "v\n", "B": "v\n", "C": "v\n", "D": "y" * 64 * 1024}


@pytest.mark.parametrize(
    ("text", "ns"),
    [("10s", 10**10), ("1m30s", 9 * 10**10), ("500ms", 5 * 10**8), ("2", 2 * 10**9), (1.5, 15 * 10**8)],
)
def test_durations(text, ns):
    assert duration_ns(text) == ns


def test_bad_duration():
    with pytest.raises(SpecError, match="invalid duration"):
        duration_ns("10 parsecs")


def test_settings_from_env(tmp_path: Path):
    pw = tmp_path / "pw"
    pw.write_text("hunter2\n")
    s = AgentSettings.from_env(
        {
            "PHRAME_NODE_NAME": "n1",
            "PHRAME_RESYNC_S": "2.5",
            "PHRAME_PARALLELISM": "8",
            "PHRAME_REGISTRY_URL": "Registry.Example.com:5000",
            "PHRAME_REGISTRY_USERNAME": "u",
            "PHRAME_REGISTRY_PASSWORD_FILE": str(pw),
        }
    )
    assert (s.node, s.resync_s, s.parallelism, s.heartbeat_s) == ("n1", 2.5, 8, 5.0)
    assert s.registry_auth == {"username": "u", "password": "hunter2"}
    assert s.registry_url == "registry.example.com:5000"
    assert AgentSettings.from_env({"PHRAME_NODE_NAME": "n"}).registry_auth is None
    assert AgentSettings.from_env({"PHRAME_NODE_NAME": "n"}).secrets_dir == Path("/etc/phrame/secrets")
    assert AgentSettings.from_env({"PHRAME_SECRETS_DIR": "/run/s"}).secrets_dir == Path("/run/s")
    with pytest.raises(SettingsError, match="PHRAME_RESYNC_S"):
        AgentSettings.from_env({"PHRAME_RESYNC_S": "soon"})


def test_own_container_detection(tmp_path: Path):
    cid = "ab" * 32
    (tmp_path / "mountinfo").write_text(
        f"1 2 0:1 /var/lib/docker/containers/{cid}/hostname /etc/hostname rw - ext4 rw\n"
    )
    assert detect_own_container_id(tmp_path) == cid
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "mountinfo").write_text("1 2 0:1 / / rw - ext4 /dev/sda1 rw\n")
    (bare / "cgroup").write_text("0::/user.slice\n")
    assert detect_own_container_id(bare) is None


def test_a_bare_host_with_a_shareable_ipc_container_is_not_that_container(tmp_path: Path):
    other = "8e" * 32
    (tmp_path / "mountinfo").write_text(
        "24 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        f"47 42 0:41 / /var/lib/docker/containers/{other}/mounts/shm rw,nosuid shared:3 - tmpfs shm rw\n"
        f"48 42 0:42 / /run/docker/netns/{other[:12]} rw shared:4 - nsfs nsfs rw\n"
    )
    assert detect_own_container_id(tmp_path) is None


def test_own_container_id_comes_from_the_etc_bind_mounts_only(tmp_path: Path):
    own, other = "ee" * 32, "8e" * 32
    (tmp_path / "mountinfo").write_text(
        f"47 42 0:41 / /var/lib/docker/containers/{other}/mounts/shm rw - tmpfs shm rw\n"
        f"89 72 254:0 /var/lib/docker/containers/{own}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n"
        f"90 72 254:0 /var/lib/docker/containers/{own}/hostname /etc/hostname rw - ext4 /dev/vda rw\n"
    )
    assert detect_own_container_id(tmp_path) == own


def test_registry_credentials_without_a_registry_url_are_refused(tmp_path: Path):
    env = {"PHRAME_NODE_NAME": "n", "PHRAME_REGISTRY_USERNAME": "u", "PHRAME_REGISTRY_PASSWORD": "p"}
    with pytest.raises(SettingsError, match="PHRAME_REGISTRY_URL"):
        AgentSettings.from_env(env)
    with pytest.raises(SettingsError, match="host\\[:port\\]"):
        AgentSettings.from_env({**env, "PHRAME_REGISTRY_URL": "registry.example.com/team"})
    hub = AgentSettings.from_env({**env, "PHRAME_REGISTRY_URL": "https://index.docker.io/"})
    assert hub.registry_url == "docker.io"


def test_registry_credentials_go_only_to_their_registry():
    auth = {"username": "u", "password": "p"}
    mine = "registry.example.com:5000"
    assert auth_for(f"{mine}/team/app:1", mine, auth) == auth
    assert auth_for(f"{mine}/app@sha256:{'a' * 64}", mine, auth) == auth
    for image in (
        "busybox:1",
        "docker.io/library/busybox",
        "other.example.com/app:1",
        "registry.example.com/x",
    ):
        assert auth_for(image, mine, auth) is None, image
    assert auth_for("busybox", "docker.io", auth) == auth  # Docker Hub by any of its names
    assert auth_for("index.docker.io/library/busybox", "docker.io", auth) == auth
    assert auth_for(f"{mine}/app", None, auth) is None
