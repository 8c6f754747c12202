"""The Docker adapter: list, create, start, remove, pull, watch events (networks: ``docker_networks``).

The executor and the loop call it; it converts every SDK error into ``node_agent.errors``
and retries the temporary ones (tenacity around the SDK call, waiting the one backoff). It
lists with a label filter, one call per kind, and never acts on a name it was not given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import docker
import docker.errors
import requests
import tenacity
from docker.utils import parse_repository_tag

from node_agent.container_config import create_params
from node_agent.docker_networks import NetworkCalls
from node_agent.docker_refs import auth_for, detect_own_container_id, observed_container, root_upperdir
from node_agent.errors import DockerBusy, DockerError, DockerUnreachable, NameConflict, NotFound
from node_agent.models import MANAGED, NODE, STOP_TIMEOUT, ObservedContainer, Spec
from node_agent.secret_files import DEFAULT_SECRETS_DIR
from node_agent.sops_secrets import NO_SOPS, SopsSecrets
from phrame.runtime import backoff, is_temporary

log = logging.getLogger(__name__)
T = TypeVar("T")
EVENTS = ("die", "destroy", "oom", "health_status")
FALLBACK_API_VERSION = "1.41"  # used only when no daemon answered at start-up (Docker 20.10+)
_PERMANENT_500 = ("port is already allocated", "address already in use", "no such image")
# what the SDK and its HTTP transport raise for Docker's answers and for a lost connection
_SDK_ERRORS = (DockerError, docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def _convert(what: str, e: Exception) -> DockerError:
    if isinstance(e, DockerError):
        return e
    if isinstance(e, docker.errors.NotFound):
        return NotFound(f"{what}: not found ({e.explanation or e})")
    if isinstance(e, docker.errors.APIError):
        status = e.status_code or 0
        text = str(e.explanation or e)
        if status >= 500 and not any(p in text.lower() for p in _PERMANENT_500):
            return DockerBusy(f"{what}: {text}", status=status)
        return DockerError(f"{what}: {text}", status=status)
    if isinstance(e, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return DockerUnreachable(f"{what}: Docker unreachable: {e}")
    return DockerError(f"{what}: {e}")


class DockerPort(NetworkCalls):
    """Docker for one node. ``calls`` counts API calls by name (used by the benchmarks)."""

    def __init__(
        self,
        node: str,
        *,
        client: docker.DockerClient | None = None,
        registry_auth: dict[str, str] | None = None,
        registry: str | None = None,
        stop_timeout: int = 10,
        attempts: int = 4,
        secrets_dir: Path = DEFAULT_SECRETS_DIR,
        sops: SopsSecrets = NO_SOPS,
    ) -> None:
        self.node = node
        self.secrets_dir = secrets_dir  # where ``env: {X: {file: name}}`` values are read
        self.sops = sops  # decrypts ``env: {X: {secret: file/key}}`` (PHRAME_AGE_KEY_FILE)
        # Why Docker cannot be used (no daemon at start-up), else None. The agent keeps
        # running its host processes and reports each container as an error meanwhile.
        self.unavailable: str | None = None
        if client is None:
            try:
                client = docker.from_env(timeout=120)
            except docker.errors.DockerException as e:
                self.unavailable = f"no Docker daemon answers ({e})"
                log.warning("node %s: %s; running host processes only", node, self.unavailable)
                client = docker.from_env(timeout=120, version=FALLBACK_API_VERSION)  # no connection yet
        self.client = client
        self.api = self.client.api
        self.registry_auth = registry_auth  # sent only for images from ``registry``
        self.registry = registry
        self.stop_timeout = stop_timeout
        self.calls: Counter[str] = Counter()
        # container id -> its own StopTimeout (None: none of its own), from the label the
        # agent sets at creation, as the last list gave it: a container's labels never change
        self._own_stop_timeouts: dict[str, int | None] = {}
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        # the last call found no daemon (a restart): the next are tried once each, not with
        # backoff, so a pass cut short reports the outage at once; any answer ends it
        self._away = False
        self._retry = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_temporary),
            stop=tenacity.stop_after_attempt(attempts),
            wait=lambda state: backoff(state.attempt_number, base=0.2, cap=3.0),
            sleep=self._backoff,
            reraise=True,
        )

    def _backoff(self, seconds: float) -> None:
        self._cancelled.wait(seconds)  # a stopping agent does not sit out the backoff

    def cancel(self) -> None:
        """The agent is stopping: waits (``wait_ready``, retry backoff) end early."""
        self._cancelled.set()

    def _check_available(self, what: str) -> None:
        """Raise a permanent error while there is no daemon; notice one that appeared."""
        if self.unavailable is None:
            return
        try:
            self.api.ping()
        except Exception:
            raise DockerError(f"{what}: {self.unavailable}") from None
        log.info("node %s: the Docker daemon answers now", self.node)
        self.unavailable = None

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        self._check_available(what)

        def once() -> T:
            with self._lock:
                self.calls[fn.__name__] += 1
            try:
                result = fn(*args, **kw)
            # every SDK or transport error leaves as a DockerError; anything else (a
            # TypeError, a KeyError) is a bug and leaves as itself, traceback and all
            except _SDK_ERRORS as e:
                error = _convert(what, e)
                self._away = isinstance(error, DockerUnreachable)
                raise error from e
            self._away = False
            return result

        return once() if self._away else self._retry(once)

    # -- reading
    def list_containers(self) -> list[ObservedContainer]:
        """Every managed container on this daemon (any node): one API call."""
        rows = self._call(
            "list containers", self.api.containers, all=True, filters={"label": f"{MANAGED}=true"}
        )
        found = [observed_container(r) for r in rows]
        self._own_stop_timeouts = {
            c.id: _whole_seconds(c.labels[STOP_TIMEOUT]) for c in found if STOP_TIMEOUT in c.labels
        }
        return found

    def inspect_container(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(f"inspect {name}", self.api.inspect_container, name)
        return result

    def logs_tail(self, ref: str, lines: int) -> bytes:
        """The last ``lines`` lines of ``ref``'s output, stdout and stderr (for its report)."""
        out: bytes = self._call(
            f"read the logs of {ref}", self.api.logs, ref, stdout=True, stderr=True, tail=lines, stream=False
        )
        return out

    def settle(self, ids: Iterable[str], *, timeout: float = 2.0, poll: float = 0.02) -> None:
        """Wait until the container list agrees that these containers stopped.

        Docker sends ``die`` (and ``destroy``) before its list, which every pass reads,
        stops saying ``running`` (tens of ms; inspect is right at once). A pass run in
        between would find nothing to do and report a dead container running until the
        next resync. A container inspect calls running again (Docker restarted it by its
        restart policy) or gone is settled too. Bounded: a pass runs after ``timeout``.
        """
        pending = set(ids)
        deadline = time.monotonic() + timeout
        while pending:
            rows = self._call("list containers", self.api.containers, all=True, filters={"id": list(pending)})
            listed = {r["Id"]: r.get("State") for r in rows}
            for cid in list(pending):
                if listed.get(cid, "gone") != "running" or self._really_running(cid):
                    pending.discard(cid)
            if not pending or time.monotonic() > deadline or self._cancelled.wait(poll):
                return

    def _really_running(self, cid: str) -> bool:
        try:
            state = self.inspect_container(cid).get("State") or {}
        except NotFound:
            return False
        return bool(state.get("Running")) and not state.get("Restarting")

    def find_own_container(self, proc: Path = Path("/proc/self")) -> str | None:
        """The managed container this process runs in, if any (called once, at start-up).

        With an overlay root it is the managed container whose upper directory is ours, an
        exact match. When none matches (or the daemon gives no GraphDriver data, as with the
        containerd image store, or cannot be asked) it is the cgroup and mount guess of
        :func:`detect_own_container_id`: wrongly taking another container for our own only
        leaves that one alone, while missing our own would be the unsafe mistake.
        """
        upper = root_upperdir(proc)
        if upper is not None:
            try:
                for c in self.list_containers():
                    graph = self.inspect_container(c.id).get("GraphDriver") or {}
                    theirs = (graph.get("Data") or {}).get("UpperDir")
                    if theirs and _same_upper(theirs, upper):
                        return c.id
            except DockerError as e:
                log.warning("cannot match this process's root with a container (%s); guessing", e)
        return detect_own_container_id(proc)

    # -- images
    def ensure_image(self, image: str, *, always: bool = False) -> None:
        if not always:
            try:
                self._call(f"inspect image {image}", self.api.inspect_image, image)
                return
            except NotFound:
                pass
        repo, tag = parse_repository_tag(image)
        auth = auth_for(image, self.registry, self.registry_auth)
        log.info("pulling %s%s", image, " with the configured credentials" if auth else "")

        def pull() -> None:
            stream = self.api.pull(repo, tag=tag or "latest", stream=True, decode=True, auth_config=auth)
            for line in stream:
                if "error" in line:
                    raise DockerError(f"pull {image}: {line['error']}")

        self._call(f"pull {image}", pull)

    # -- containers
    def create_container(self, spec: Spec, *, name: str | None = None) -> str:
        """Create and start the container of ``spec`` as ``name`` (default: the item id),
        which must be free."""
        p = create_params(spec, self.node, name=name, secrets_dir=self.secrets_dir, sops=self.sops)
        api = self.api
        net_config = None
        if p.networks:
            endpoint = api.create_endpoint_config(aliases=p.aliases)
            net_config = api.create_networking_config({p.networks[0]: endpoint})
        host_config = api.create_host_config(
            port_bindings=p.bindings or None,
            binds=p.binds or None,
            restart_policy={"Name": p.restart} if p.restart else None,
            nano_cpus=p.nano_cpus,
            mem_limit=p.memory,
            network_mode=p.networks[0] if p.networks else None,
            extra_hosts=p.extra_hosts,
            ulimits=p.ulimits,
            log_config=p.log_config,
        )
        try:
            created = self._call(
                f"create {p.name}",
                api.create_container,
                p.image,
                command=p.command,
                entrypoint=p.entrypoint,
                name=p.name,
                environment=p.environment,
                labels=p.labels,
                ports=p.exposed or None,
                volumes=p.anonymous_volumes or None,
                host_config=host_config,
                networking_config=net_config,
                healthcheck=p.healthcheck,
                stop_signal=p.stop_signal,
                # only the service's own: without one, stops by the agent take its current
                # PHRAME_STOP_TIMEOUT_S (see _grace), not a value frozen at creation
                stop_timeout=p.stop_timeout,
                user=p.user,
                working_dir=p.working_dir,
                hostname=p.hostname,
            )
        except DockerError as e:
            if e.status == 409:
                raise NameConflict(
                    f"container {p.name}: the name is taken by a container phrame does not "
                    f"manage on node {self.node}; it is left untouched - rename or remove it"
                ) from e
            raise
        cid: str = created["Id"]
        self._own_stop_timeouts[cid] = p.stop_timeout
        for net in p.networks[1:]:
            self._call(
                f"connect {p.name} to {net}",
                api.connect_container_to_network,
                cid,
                net,
                aliases=p.aliases,
            )
        self.start(cid, name=p.name)
        return cid

    def start(self, ref: str, *, name: str | None = None) -> None:
        self._call(f"start {name or ref}", self.api.start, ref)

    def restart(self, name: str) -> None:
        self._call(f"restart {name}", self.api.restart, name, timeout=self._grace(name))

    def _grace(self, ref: str) -> int:
        """How long a stop of ``ref`` waits before SIGKILL: its own StopTimeout (the
        service's ``stop_grace_period``), else ``stop_timeout`` (containers created before
        phrame set one). Passing a timeout to stop would override the container's. Read
        from its label in the last list (no inspect), or by an inspect of a container listed
        without it (created by an older agent) or named by its name."""
        if ref in self._own_stop_timeouts:
            own: Any = self._own_stop_timeouts[ref]
        else:
            config = self._call(f"inspect {ref}", self.api.inspect_container, ref).get("Config") or {}
            own = config.get("StopTimeout")
        return int(own) if isinstance(own, int) and own >= 0 else self.stop_timeout

    def remove_container(self, ref: str) -> None:
        """Stop (the container's stop signal, then SIGKILL after its grace) and remove;
        absent is fine."""
        try:
            self._call(f"stop {ref}", self.api.stop, ref, timeout=self._grace(ref))
            self._call(f"remove {ref}", self.api.remove_container, ref, force=True)
        except NotFound:
            return

    def wait_ready(self, name: str, *, timeout: float = 120.0, poll: float = 0.2) -> None:
        """Return once ``name`` runs (and is healthy if it has a healthcheck)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.inspect_container(name)["State"]
            health = (state.get("Health") or {}).get("Status")
            # a restarting container also reports Running: it is between two crashes
            if state.get("Running") and not state.get("Restarting") and health in (None, "healthy"):
                return
            if not state.get("Running") and state.get("Status") in ("exited", "dead"):
                raise DockerError(f"{name} is {state.get('Status')} (exit {state.get('ExitCode')})")
            if health == "unhealthy":  # settled: its health_status event triggers the next pass
                raise DockerError(f"{name} is unhealthy")
            if state.get("Restarting"):  # crash-looping: its next start or die brings a pass
                raise DockerError(f"{name} is restarting (exit {state.get('ExitCode')})")
            if time.monotonic() > deadline:
                raise DockerError(f"{name} not ready after {timeout:.0f}s (health {health})")
            if self._cancelled.wait(poll):
                raise DockerError(f"{name}: not waiting for it to be ready, the agent is stopping")

    # -- events
    def events(self) -> Iterator[dict[str, Any]]:
        """A blocking stream of this node's container events; ``close()`` it to stop."""
        filters = {
            "type": ["container"],
            "event": list(EVENTS),
            "label": [f"{MANAGED}=true", f"{NODE}={self.node}"],
        }
        self._check_available("watch events")
        stream: Iterator[dict[str, Any]] = self.api.events(decode=True, filters=filters)
        return stream


def _whole_seconds(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _same_upper(theirs: str, ours: str) -> bool:
    """The daemon's absolute UpperDir against ours from mountinfo, which overlay2 makes
    relative to its root (``<id>/diff``) when the mount options would not fit a page."""
    return theirs == ours or (not ours.startswith("/") and theirs.endswith("/" + ours))
