"""``phrame dev``: start the dev stack's children in order, watch them, stop them in order.

:func:`run` is called by ``phrame/cli/cmd_dev.py``. It checks ports and an already running stack
before starting anything, prepares the local git host and the quickstart image, starts the
broker, config-sync, placement and the agents, prints one line per step and the banner once
ready, restarts a crashed child with backoff, and on SIGINT/SIGTERM stops the agents first and
the broker last. It leaves containers and host processes running, as agents do.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

from dev_stack import git_host, sample
from dev_stack.banner import banner
from dev_stack.children import Child
from dev_stack.console import LogFollower, commit_subject, event_line, sync_errors
from dev_stack.credentials import write_credentials
from dev_stack.down import running_pid, stop_leftovers
from dev_stack.errors import DevError
from dev_stack.node_policy import write_policy
from dev_stack.parts import build_children
from dev_stack.readiness import Readiness
from dev_stack.settings import DevSettings, taken_ports
from phrame.settings.state import private_dir

TICK_S = 0.2
PROGRESS_EVERY_S = 10.0


class DevStack:
    def __init__(self, settings: DevSettings, *, say: Callable[[str], None]) -> None:
        self.settings = settings
        self.say = say
        self.stopping = threading.Event()
        self.children: list[Child] = []
        self.followers: list[LogFollower] = []
        self.readiness = Readiness(settings)

    # -- before anything starts
    def preflight(self) -> bool:
        """Raise :class:`DevError` for a running stack or a taken port; True when Docker answers."""
        s = self.settings
        pid = running_pid(s)
        if pid is not None:
            raise DevError(f"a dev stack already runs from {s.state_dir} (pid {pid}); stop it first")
        for name in stop_leftovers(s):
            self.say(f"stopped {name}, left running by an earlier phrame dev")
        from dev_stack import docker_host  # the SDK only here and in --down

        client = docker_host.connect()
        skip: tuple[int, ...] = ()
        if client is not None and docker_host.publishes_port(client, s.nodes, s.web_port):
            skip = (s.web_port,)  # our own page from the last start holds it
        problems = taken_ports(s, skip=skip)
        if problems:
            if client is not None:
                client.close()
            raise DevError("; ".join(problems) + " (choose other ports, or stop what holds them)")
        if client is None:
            self.say(
                "no Docker daemon answers (DOCKER_HOST or /var/run/docker.sock): running the "
                "kind: process services only; container services are reported as errors"
            )
            return False
        try:
            if docker_host.ensure_image(client, s.image):
                self.say(f"built the image {s.image} from busybox-static (docker import)")
        finally:
            client.close()
        return True

    def prepare(self) -> None:
        s = self.settings
        saved = DevSettings.load(s.state_dir)
        for exposed in git_host.exposed_secrets(s):  # before the folder is made private below
            self.say(f"{exposed} was readable by other users: replaced it with a new one (0600)")
        # the owner's alone, like each service's folder: the repo holds environment values,
        # the credentials folder the broker's passwords (an older state folder is tightened)
        private_dir(s.state_dir)
        for path in (s.logs, s.run_dir, *(s.workdir(n) for n in s.nodes)):
            private_dir(path)
        s.save()
        write_credentials(s)  # this start's passwords, before any part (the broker) reads them
        write_policy(s)  # what the agents allow a commit (the sample's host process)
        if saved is not None and saved.web_port != s.web_port and (s.repo / "HEAD").exists():
            self.say(
                f"note: the config repo was made with --web-port {saved.web_port}; the page stays "
                "on that port until you change it in web.yaml"
            )
        created = git_host.prepare(s, sample.files(s))
        if created:
            self.say(f"created {s.repo} from the quickstart sample (commit {created[:12]})")
        else:
            self.say(f"reusing {s.repo} and the state in {s.state_dir}")

    # -- running
    def start_children(self) -> None:
        logs = self.settings.logs
        # from the logs' current ends: this start's events, not the last run's
        self.followers = [LogFollower(logs / "config-sync.log"), LogFollower(logs / "placement.log")]
        which, self.children = build_children(self.settings)
        for child in self.children:
            child.start()
            what = f"{which} on 127.0.0.1:{self.settings.broker_port}" if child.name == "broker" else ""
            self.say(f"started {child.name} (pid {child.pid}{', ' + what if what else ''})")
            if child.name == "broker":
                self._wait_broker(child)

    def _wait_broker(self, child: Child) -> None:
        from dev_stack.readiness import broker_answers

        deadline = time.monotonic() + 10
        while not broker_answers(self.settings.broker_port):
            if (child.proc is not None and child.proc.poll() is not None) or time.monotonic() > deadline:
                tail = "\n    ".join(child.tail())
                raise DevError(f"the broker did not start; {child.log_file}:\n    {tail}")
            time.sleep(0.05)

    def tick(self) -> None:
        for child in self.children:
            code = child.poll()
            if code is not None:
                lines = child.tail()
                log_file = child.log_file
                where = (
                    f"its last lines in {log_file}:" if lines else f"nothing in {log_file} since it started"
                )
                self.say(f"{child.exit_line(code)}; {where}")
                for line in lines:
                    self.say(f"    {line}")
            elif child.due_for_restart():
                child.restart()
                self.say(f"restarted {child.name} (pid {child.pid})")
        for follower in self.followers:
            for line in follower.lines():
                shown = event_line(line, lambda sha: commit_subject(self.settings.repo, sha))
                if shown:
                    self.say(shown)
                    if "phrame/validate" in shown and ": failed" in shown:
                        token = self.settings.secret_file.read_text().strip()
                        for error in sync_errors(f"{self.settings.config_sync_url}/status", token):
                            self.say(f"    {error}")

    def run(self) -> int:
        started = time.monotonic()
        has_docker = self.preflight()
        self.prepare()
        self.settings.pid_file.write_text(f"{os.getpid()}\n")
        try:
            self.start_children()
            ready = False
            next_progress = time.monotonic() + PROGRESS_EVERY_S
            while not self.stopping.wait(TICK_S):
                self.tick()
                if not ready:
                    missing = self.readiness.missing()
                    if not missing:
                        ready = True
                        self.readiness.close()
                        took = time.monotonic() - started
                        for line in banner(self.settings, took, has_docker=has_docker):
                            self.say(line)
                    elif time.monotonic() >= next_progress:
                        self.say("waiting for " + "; ".join(missing))
                        next_progress = time.monotonic() + PROGRESS_EVERY_S
        finally:
            self.readiness.close()
            self.stop_children()
            self.settings.pid_file.unlink(missing_ok=True)
        return 0

    def stop_children(self) -> None:
        """Agents first, then placement, config-sync, and the broker last."""
        for child in reversed(self.children):
            if child.proc is not None:
                code = child.stop()
                how = "" if code in (0, -signal.SIGTERM) else f" (exit code {code})"
                self.say(f"stopped {child.name}{how}")
        if self.children:
            self.say("stopped; containers and host processes keep running (phrame dev --down removes them)")

    def handle_signals(self) -> None:
        def on_signal(signum: int, _frame: object) -> None:
            if not self.stopping.is_set():
                self.say(f"{signal.Signals(signum).name}: stopping the dev stack")
            self.stopping.set()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGHUP, on_signal)  # the terminal closed: stop as for Ctrl-C
