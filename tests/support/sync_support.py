"""Shared parts of the config-sync integration tests (no tests here).

A real bare git remote with a work clone that commits and pushes with gitpython, the
sample repo as its first commit, and a started ``ConfigSync`` wired to a real broker.
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import git

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from config_sync.settings import SyncSettings
from phrame.mqtt import MqttClient, MqttSettings
from schemas import Topics

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "fixtures" / "phrame-config"
WEBHOOKS = ROOT / "fixtures" / "webhooks"
SECRET = "phrame-test-secret"


class ConfigRemote:
    """A bare repository (the 'GitLab' side) and a clone people push from."""

    def __init__(self, root: Path) -> None:
        self.bare_path = root / "phrame-config.git"
        git.Repo.init(self.bare_path, bare=True, initial_branch="main")
        self.work_path = root / "work"
        self.work = git.Repo.clone_from(str(self.bare_path), self.work_path)
        with self.work.config_writer() as cw:
            cw.set_value("user", "name", "Test Ops")
            cw.set_value("user", "email", "ops@example.test")
        self.work.git.checkout("-B", "main")

    def commit(
        self,
        message: str,
        *,
        copy_from: Path | None = None,
        files: Mapping[str, str | None] | None = None,
        branch: str = "main",
    ) -> str:
        if copy_from is not None:
            shutil.copytree(copy_from, self.work_path, dirs_exist_ok=True)
        for rel, text in (files or {}).items():
            path = self.work_path / rel
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        self.work.git.add(A=True)
        self.work.git.commit("-m", message, "--allow-empty")
        self.work.git.push("origin", f"HEAD:refs/heads/{branch}")
        return str(self.work.head.commit.hexsha)

    @classmethod
    def with_sample(cls, root: Path, message: str = "sample", *, http_push: bool = False) -> ConfigRemote:
        """A remote whose ``main`` holds the sample repo in one commit; ``http_push`` lets
        git's HTTP backend accept pushes to it (placement pushes over HTTPS in some tests)."""
        remote = cls(root)
        remote.commit(message, copy_from=SAMPLE)
        if http_push:
            remote.work.git.config("http.receivepack", "true", file=str(remote.bare_path / "config"))
        return remote


def settings_for(remote: ConfigRemote, state: Path, broker_url: str, **extra: object) -> SyncSettings:
    return SyncSettings(
        repo_url=str(remote.bare_path),
        state_dir=str(state),
        mqtt=MqttSettings(url=broker_url),
        **extra,  # type: ignore[arg-type]
    )


@contextmanager
def running_sync(settings: SyncSettings) -> Iterator[ConfigSync]:
    service = ConfigSync(settings, reporter=LocalReporter())
    service.start()
    try:
        yield service
    finally:
        service.stop()


@contextmanager
def reader(url: str, name: str = "test-reader") -> Iterator[MqttClient]:
    client = MqttClient(MqttSettings(url=url), name)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()


def desired_on_broker(client: MqttClient, topics: Topics | None = None) -> dict[str, bytes]:
    return client.collect_retained((topics or Topics()).desired_filter(), settle=0.2)


@contextmanager
def silent_git_server() -> Iterator[str]:
    """A ``git://127.0.0.1:PORT/x`` URL whose server accepts connections and never answers
    (a hung git host); closing it on exit releases any git still waiting on it."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"git://127.0.0.1:{server.getsockname()[1]}/phrame-config.git"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def finishes_within(seconds: float, work: Callable[[], object]) -> BaseException | None:
    """Run ``work`` on a thread; the exception it raised, or AssertionError if it is still
    running after ``seconds`` (the caller's ``silent_git_server`` exit then releases it)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            work()
        except BaseException as e:  # handed to the test to assert on
            outcome.append(e)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return AssertionError(f"still running after {seconds} s")
    return outcome[0]
