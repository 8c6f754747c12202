"""``detect_own_container_id``: the cgroup path wins over borrowed /etc bind mounts.

Under ``--network container:<other>`` Docker bind-mounts the other container's
/etc/hostname, hosts and resolv.conf, so mountinfo names the wrong container (seen on a
real dockerd: tests/integration/test_agent_own_container.py). The texts below are copied
from real /proc/self files.
"""

from __future__ import annotations

from pathlib import Path

from node_agent.docker_refs import detect_own_container_id, root_upperdir

OWN, OTHER = "7a" * 32, "2c" * 32


def proc(tmp_path: Path, *, cgroup: str | None, mounts_of: str | None) -> Path:
    if cgroup is not None:
        (tmp_path / "cgroup").write_text(cgroup)
    lines = ["72 1 0:50 / / rw - overlay overlay rw,upperdir=/var/lib/docker/overlay2/x/diff\n"]
    if mounts_of:
        for f in ("resolv.conf", "hostname", "hosts"):
            root = f"/var/lib/docker/containers/{mounts_of}/{f}"
            lines.append(f"89 72 254:0 {root} /etc/{f} rw,relatime - ext4 /dev/vda rw\n")
    (tmp_path / "mountinfo").write_text("".join(lines))
    return tmp_path


def v1(path: str) -> str:
    return "".join(f"{i}:{c}:{path}\n" for i, c in ((9, "name=systemd"), (8, "pids"), (7, "blkio")))


def test_sharing_another_containers_network_still_names_itself(tmp_path: Path):
    root = proc(tmp_path, cgroup=v1(f"/docker/{OWN}"), mounts_of=OTHER)
    assert detect_own_container_id(root) == OWN


def test_systemd_cgroup_driver_scope(tmp_path: Path):
    root = proc(tmp_path, cgroup=f"0::/system.slice/docker-{OWN}.scope\n", mounts_of=OTHER)
    assert detect_own_container_id(root) == OWN


def test_nested_containers_give_the_innermost(tmp_path: Path):
    root = proc(tmp_path, cgroup=v1(f"/docker/{OTHER}/docker/{OWN}"), mounts_of=None)
    assert detect_own_container_id(root) == OWN


def test_a_sub_cgroup_inside_the_container_still_names_it(tmp_path: Path):
    root = proc(tmp_path, cgroup=v1(f"/docker/{OWN}/init.scope"), mounts_of=None)
    assert detect_own_container_id(root) == OWN


def test_private_cgroup_namespace_falls_back_to_the_mounts(tmp_path: Path):
    assert detect_own_container_id(proc(tmp_path, cgroup="0::/\n", mounts_of=OWN)) == OWN
    other = tmp_path / "v1ns"
    other.mkdir()
    assert detect_own_container_id(proc(other, cgroup=v1("/"), mounts_of=OWN)) == OWN


def test_no_cgroup_file_falls_back_to_the_mounts(tmp_path: Path):
    assert detect_own_container_id(proc(tmp_path, cgroup=None, mounts_of=OWN)) == OWN


def test_bare_hosts_are_no_container(tmp_path: Path):
    # dockerd's own unit, a user session, a 64-hex not under docker: none is a container id
    for i, path in enumerate(
        ("/system.slice/docker.service", "/user.slice/user-0.slice/session-1.scope", f"/kubepods/{OWN}")
    ):
        root = tmp_path / str(i)
        root.mkdir()
        assert detect_own_container_id(proc(root, cgroup=v1(path), mounts_of=None)) is None


def test_root_upperdir_is_the_overlay_of_the_last_mount_on_root(tmp_path: Path):
    upper = "/var/lib/docker/overlay2/4f1c/diff"
    (tmp_path / "mountinfo").write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "72 27 0:50 / / rw,relatime master:1 - overlay overlay "
        f"rw,lowerdir=/var/lib/docker/overlay2/l/AB:/var/lib/docker/overlay2/l/CD,upperdir={upper},"
        "workdir=/var/lib/docker/overlay2/4f1c/work\n"
        "89 72 254:0 /var/lib/docker/containers/x/hostname /etc/hostname rw - ext4 /dev/vda rw\n"
    )
    assert root_upperdir(tmp_path) == upper


def test_root_upperdir_is_none_on_a_bare_host_or_without_mountinfo(tmp_path: Path):
    assert root_upperdir(tmp_path) is None
    (tmp_path / "mountinfo").write_text("27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n")
    assert root_upperdir(tmp_path) is None


def test_a_relative_upperdir_matches_the_daemons_absolute_one():
    from node_agent.docker_port import _same_upper

    absolute = "/var/lib/docker/overlay2/f515aa/diff"
    assert _same_upper(absolute, absolute)
    assert _same_upper(absolute, "f515aa/diff")  # overlay2's short form for long option lists
    assert not _same_upper(absolute, "515aa/diff")
    assert not _same_upper(absolute, "/other/overlay2/f515aa/diff")
