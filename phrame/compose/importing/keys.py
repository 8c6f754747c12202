"""Which compose service keys phrame leaves out, and why (the ``unsupported`` reasons)."""

from __future__ import annotations

# Read for their effect elsewhere, or harmless to drop silently.
IGNORED: frozenset[str] = frozenset()

WHY: dict[str, str] = {
    "build": "phrame runs images only: build and push the image, then set image",
    "profiles": "a service behind a profile is not started by default; not imported",
    "secrets": (
        "compose secrets are files in /run/secrets: use env {file: ...} or mount the file from the node"
    ),
    "configs": "compose configs are files in the container: mount the file from the node in volumes",
    "env_file": "the file is not read: put its variables under env (secrets as {file: ...})",
    "container_name": (
        "phrame names containers <env>.<service>.<replica>; "
        "the service name is still the host name on its networks"
    ),
    "expose": "no equivalent; containers on one network reach each other's ports without it",
    "links": "no equivalent; services reach each other by name on their networks",
    "external_links": "no equivalent",
    "volumes_from": "no equivalent: mount the same named volume or host path in both",
    "privileged": "not carried: phrame does not run privileged containers",
    "cap_add": "not carried: phrame does not change a container's capabilities",
    "cap_drop": "not carried: phrame does not change a container's capabilities",
    "devices": "not carried: phrame does not pass host devices",
    "security_opt": "not carried: phrame does not change security options",
    "sysctls": "not in phrame's service format",
    "tmpfs": "no equivalent: tmpfs mounts are not in phrame's service format",
    "shm_size": "not in phrame's service format (Docker's default 64 MiB applies)",
    "ipc": "not in phrame's service format",
    "pid": "not in phrame's service format",
    "userns_mode": "not in phrame's service format",
    "init": "not in phrame's service format",
    "tty": "not in phrame's service format",
    "stdin_open": "not in phrame's service format",
    "read_only": "not in phrame's service format",
    "dns": "not in phrame's service format",
    "dns_search": "not in phrame's service format",
    "mem_reservation": "only a limit (resources.memory) is in phrame's format",
    "memswap_limit": "only a limit (resources.memory) is in phrame's format",
    "cpu_shares": "only a limit (resources.cpus) is in phrame's format",
    "cpuset": "only a limit (resources.cpus) is in phrame's format",
    "platform": "not in phrame's service format: the node pulls its own platform",
    "stop_signal": "not in this version's service format",
    "stop_grace_period": "not in this version's service format",
    "user": "not in this version's service format",
    "working_dir": "not in this version's service format",
    "hostname": "not in this version's service format",
    "extra_hosts": "not in this version's service format",
    "ulimits": "not in this version's service format",
    "logging": "not in this version's service format",
}

NOT_SUPPORTED = frozenset(WHY) | frozenset(
    {"domainname", "mac_address", "runtime", "isolation", "cgroup_parent", "group_add", "oom_kill_disable",
     "oom_score_adj", "pids_limit", "storage_opt", "device_cgroup_rules", "blkio_config", "cpu_count",
     "cpu_percent", "cpu_period", "cpu_quota", "cpu_rt_runtime", "cpu_rt_period", "mem_swappiness",
     "annotations", "attach", "develop", "gpus", "credential_spec", "label_file", "uts", "volume_driver",
     "post_start", "pre_stop", "models", "provider", "use_api_socket", "driver_opts", "cgroup", "extends"}
)  # fmt: skip
