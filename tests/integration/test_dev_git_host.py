"""The dev stack's local git host: a real bare repository whose post-receive hook posts a
GitLab-shaped Push Hook to an HTTP server (uvicorn on 127.0.0.1), and never blocks a push."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from config_sync.intake.webhooks import is_token_valid, route
from dev_stack import git_host, sample
from dev_stack.settings import DevSettings
from tests.support.services import free_port
from tests.support.waiting import wait_for

RECORDED = json.loads(Path("fixtures/webhooks/push.json").read_text())


@contextmanager
def recording_server(port: int) -> Iterator[list[tuple[dict[str, str], dict[str, Any]]]]:
    seen: list[tuple[dict[str, str], dict[str, Any]]] = []

    async def hook(request: Request) -> JSONResponse:
        seen.append((dict(request.headers), json.loads(await request.body())))
        return JSONResponse({"queued": True}, status_code=202)

    app = Starlette(routes=[Route("/webhooks/gitlab", hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "uvicorn to start", 20)
    try:
        yield seen
    finally:
        server.should_exit = True
        thread.join(10)


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env_args = ["-c", "user.name=Ada", "-c", "user.email=ada@example.test"]
    return subprocess.run(["git", *env_args, *args], cwd=cwd, capture_output=True, text=True, check=True)


def test_each_push_posts_a_gitlab_push_hook_and_a_dead_config_sync_never_fails_it(tmp_path: Path):
    port = free_port()
    settings = DevSettings(tmp_path / "state", listen=f"127.0.0.1:{port}")
    settings.state_dir.mkdir()
    first = git_host.prepare(settings, sample.files(settings))
    assert first and git_host.prepare(settings, sample.files(settings)) is None  # reused, not remade
    secret = settings.secret_file.read_text().strip()
    assert settings.secret_file.stat().st_mode & 0o777 == 0o600
    work = tmp_path / "clone"
    git("clone", "--quiet", str(settings.repo), str(work), cwd=tmp_path)
    web = work / "environments/quickstart/services/web.yaml"

    with recording_server(port) as seen:
        for text in ("Hello again", "Hello thrice"):
            web.write_text(web.read_text().replace("Hello", text, 1))
            git("commit", "--quiet", "-am", f"page: {text}", cwd=work)
            pushed = git("push", "--quiet", "origin", "main", cwd=work)
            assert "config-sync notified (202)" in pushed.stderr
    assert len(seen) == 2
    headers, body = seen[1]
    head = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    assert headers["x-gitlab-event"] == RECORDED["headers"]["X-Gitlab-Event"] == "Push Hook"
    assert is_token_valid(secret, headers["x-gitlab-token"])
    assert seen[0][0]["idempotency-key"] != headers["idempotency-key"]
    assert set(RECORDED["body"]) <= set(body)  # every top-level field GitLab sends
    assert (body["after"], body["checkout_sha"], body["ref"]) == (head, head, "refs/heads/main")
    assert body["commits"][-1]["id"] == head and body["commits"][-1]["title"] == "page: Hello thrice"
    assert body["commits"][-1]["modified"] == ["environments/quickstart/services/web.yaml"]
    assert body["user_name"] == "Ada" and body["total_commits_count"] == 1
    assert route("Push Hook", body, {"main"}).action == "sync"

    # nobody listens now: the push still succeeds, quickly, and says what happens next
    web.write_text(web.read_text().replace("thrice", "at last"))
    git("commit", "--quiet", "-am", "page: nobody listening", cwd=work)
    start = time.monotonic()
    pushed = git("push", "--quiet", "origin", "main", cwd=work)
    assert time.monotonic() - start < 5
    assert "did not answer" in pushed.stderr and "next poll" in pushed.stderr


def test_a_tag_push_posts_a_gitlab_tag_push_hook(tmp_path: Path) -> None:
    """Created, moved (forced) and deleted tags each post a Tag Push Hook as GitLab does."""
    recorded = json.loads(Path("fixtures/webhooks/tag-push.json").read_text())
    port = free_port()
    settings = DevSettings(tmp_path / "state", listen=f"127.0.0.1:{port}")
    settings.state_dir.mkdir()
    git_host.prepare(settings, sample.files(settings))
    work = tmp_path / "clone"
    git("clone", "--quiet", str(settings.repo), str(work), cwd=tmp_path)
    first = git("rev-parse", "HEAD", cwd=work).stdout.strip()

    with recording_server(port) as seen:
        git("tag", "v1", cwd=work)
        assert "config-sync notified (202)" in git("push", "--quiet", "origin", "v1", cwd=work).stderr
        git("commit", "--quiet", "--allow-empty", "-m", "release 2", cwd=work)
        second = git("rev-parse", "HEAD", cwd=work).stdout.strip()
        git("push", "--quiet", "origin", "main", cwd=work)
        git("tag", "-f", "-a", "-m", "the second release", "v1", cwd=work)
        git("push", "--quiet", "--force", "origin", "v1", cwd=work)
        git("push", "--quiet", "origin", ":refs/tags/v1", cwd=work)
    tags = [(h, b) for h, b in seen if h["x-gitlab-event"] == "Tag Push Hook"]
    assert [h["x-gitlab-event"] for h, _ in seen] == [
        "Tag Push Hook",
        "Push Hook",
        "Tag Push Hook",
        "Tag Push Hook",
    ]
    (_, created), (_, moved), (_, deleted) = tags
    assert set(recorded["body"]) <= set(created)  # every top-level field GitLab sends
    assert (created["object_kind"], created["event_name"]) == ("tag_push", "tag_push")
    assert (created["ref"], created["before"], created["after"]) == ("refs/tags/v1", "0" * 40, first)
    assert created["checkout_sha"] == first and created["commits"] == [] and created["message"] is None
    # annotated: "after" is the tag object, checkout_sha the commit it names
    assert moved["before"] == first and moved["after"] != second and moved["checkout_sha"] == second
    assert moved["message"] == "the second release"
    assert deleted["after"] == "0" * 40 and deleted["checkout_sha"] is None
    tracked = {"main", "refs/tags/v1"}
    assert [route("Tag Push Hook", b, tracked).action for b in (created, moved, deleted)] == ["sync"] * 3
    assert route("Tag Push Hook", created, {"main"}).action == "ignore"


def test_with_ha_each_push_is_posted_to_both_config_syncs(tmp_path: Path) -> None:
    """``phrame dev --ha``: the active and the standby each hear every push."""
    port, standby = free_port(), free_port()
    settings = DevSettings(tmp_path / "state", listen=f"127.0.0.1:{port}", ha=True, standby_port=standby)
    settings.state_dir.mkdir()
    git_host.prepare(settings, sample.files(settings))
    work = tmp_path / "clone"
    git("clone", "--quiet", str(settings.repo), str(work), cwd=tmp_path)
    web = work / "environments/quickstart/services/web.yaml"
    with recording_server(port) as to_active, recording_server(standby) as to_standby:
        web.write_text(web.read_text().replace("Hello", "Hello both", 1))
        git("commit", "--quiet", "-am", "page: both", cwd=work)
        pushed = git("push", "--quiet", "origin", "main", cwd=work)
    assert pushed.stderr.count("config-sync notified (202)") == 2, pushed.stderr
    assert len(to_active) == len(to_standby) == 1
    assert to_active[0][1]["after"] == to_standby[0][1]["after"]


def _described_commit(sha: str, repo: Path) -> dict[str, Any]:
    """A commit as the hook describes it, read here with one git process per field group."""
    fields = git("show", "-s", "--format=%H%x00%s%x00%B%x00%aI%x00%an%x00%ae", sha, cwd=repo).stdout
    id_, title, message, timestamp, name, email = fields.split("\0")
    changes: dict[str, list[str]] = {"added": [], "modified": [], "removed": []}
    listed = git("diff-tree", "--root", "--no-commit-id", "--name-status", "-r", sha, cwd=repo).stdout
    for line in listed.splitlines():
        status, _, path = line.partition("\t")
        changes[{"A": "added", "D": "removed"}.get(status, "modified")].append(path)
    author = {"name": name, "email": email.strip()}
    return {
        "id": id_,
        "title": title,
        "message": message,
        "timestamp": timestamp,
        "author": author,
        **changes,
    }


def test_the_hook_describes_a_push_in_one_git_process(tmp_path: Path, monkeypatch: Any) -> None:
    """A push of several commits (the first push of a branch included: all added) is
    described commit by commit as GitLab does, with one git process: the pusher waits for
    the hook, and a process per commit and field was most of its time after Python's start."""
    from dev_stack import hook

    bare, work = tmp_path / "repo.git", tmp_path / "work"
    git("init", "--quiet", "--bare", str(bare), cwd=tmp_path)
    git("clone", "--quiet", str(bare), str(work), cwd=tmp_path)
    (work / "a.yaml").write_text("a: 1\n")
    (work / "odd name é.yaml").write_text("b: 1\n")
    git("add", "--all", cwd=work)
    git("commit", "--quiet", "-m", "first", cwd=work)
    root = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    (work / "a.yaml").write_text("a: 2\n")
    (work / "c.yaml").write_text("c: 1\n")
    (work / "odd name é.yaml").unlink()
    git("add", "--all", cwd=work)
    git("commit", "--quiet", "-m", "second\n\nwith a body\nof two lines", cwd=work)
    git("mv", "c.yaml", "d.yaml", cwd=work)  # a rename is a removal and an addition, as in diff-tree
    git("commit", "--quiet", "--allow-empty", "-m", "third", cwd=work)
    git("commit", "--quiet", "--allow-empty", "-m", "empty", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work).stdout.strip()
    shas = git("rev-list", "--reverse", "HEAD", cwd=work).stdout.split()

    # every git process the hook starts leaves a line in ``runs`` (a git first on PATH)
    runs_file = tmp_path / "runs"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real_git = shutil.which("git")
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {runs_file}\nexec {real_git} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")

    def runs() -> list[str]:
        return runs_file.read_text().split("\n")[:-1] if runs_file.exists() else []

    monkeypatch.chdir(work)
    first_push = hook.push_event("0" * 40, head, "refs/heads/main", project="p")
    assert len(runs()) == 1, runs()
    assert first_push["commits"] == [_described_commit(sha, work) for sha in shas]
    assert first_push["commits"][0]["added"] == ["a.yaml", '"odd name \\303\\251.yaml"']
    assert first_push["commits"][2]["removed"] == ["c.yaml"] and first_push["commits"][2]["added"] == [
        "d.yaml"
    ]
    runs_file.unlink()
    later = hook.push_event(root, head, "refs/heads/main", project="p")
    assert len(runs()) == 1, runs()
    assert later["commits"] == first_push["commits"][1:]
    assert later["user_name"] == "Ada" and later["total_commits_count"] == 3


HEAVY_IMPORTS = ("urllib.request", "http.client", "email", "json", "re", "subprocess", "socket", "pathlib")
HEAVY_IMPORTS += ("typing", "uuid", "enum", "selectors", "threading")


def test_the_hook_imports_no_http_library_and_nothing_python_does_not_start_with() -> None:
    """The pusher waits for the hook: it posts over a plain socket, without urllib's imports
    (``http.client``, ``email``), and imports none of the modules that were most of its
    own time after Python's start (``json`` and its ``re``, ``subprocess``, ``socket``, ...)."""
    root = Path(__file__).resolve().parents[2]
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import dev_stack.hook; "
        f"print(sorted(m for m in {HEAVY_IMPORTS!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe, str(root)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_refused_delivery_says_the_status_and_the_answer() -> None:
    """An answer other than 2xx is said with its status and the start of its body."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from dev_stack import hook

    seen: list[tuple[str, str, bytes]] = []

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            seen.append((self.path, self.headers["X-Gitlab-Token"], self.rfile.read(length)))
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"detail": "bad token"}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/webhooks/gitlab"
        said = hook.deliver(url, "s3cret", {"ref": "refs/heads/main"})
    finally:
        server.shutdown()
        server.server_close()
    assert said == 'config-sync answered 401 for refs/heads/main: {"detail": "bad token"}'
    assert seen == [("/webhooks/gitlab", "s3cret", b'{"ref": "refs/heads/main"}')]


def test_the_hook_writes_json_as_the_json_module_does() -> None:
    """The hook encodes its deliveries without ``json``: the same text, escapes included."""
    from dev_stack import hook

    body = {
        "a": "plain",
        'quote " and \\ back': ["tab\tnewline\n\x00\x1f", "é ü 日本 \U0001f600", "\u2028"],
        "n": [0, -3, 12345678901234567890, True, False, None],
        "nested": {"empty": {}, "list": [], "s": ""},
    }
    assert hook.json_text(body) == json.dumps(body)
    assert json.loads(hook.json_text(body)) == body
    ids = {hook.uuid4() for _ in range(50)}
    assert len(ids) == 50 and all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)
