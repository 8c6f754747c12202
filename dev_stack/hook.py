"""The local git host's ``post-receive`` hook: a GitLab-shaped Push Hook per updated branch
and a Tag Push Hook per created, moved or deleted tag (as GitLab sends them).

git runs it (installed by :mod:`dev_stack.git_host`, which writes the hook's configuration
into the hook itself: ``urls``, every config-sync, the standby's too, with ``phrame dev
--ha``; ``secret_file``; ``project``) after every push to the dev stack's bare repository,
placement's own pushes included. It posts each delivery with a fresh ``Idempotency-Key``
and a short timeout, and must never fail or hold a push: config-sync being down only means
the push is deployed at its next poll. Standard library only, and only what Python has
loaded at its start (``os``, ``sys``) plus the C modules ``_socket`` and ``_json``: every
push waits for the hook, and the imports of ``json`` (``re``), ``subprocess``, ``socket``
(``enum``, ``selectors``), ``pathlib``, ``typing`` and ``uuid`` were most of its time.
"""

from __future__ import annotations

import _json  # the C string encoder that ``json`` uses, without importing ``re``
import _socket  # ``socket`` without its Python layer (``enum``, ``selectors``)
import os
import sys

TYPE_CHECKING = False  # ``typing`` is not imported at run time (mypy reads this as True)
if TYPE_CHECKING:
    from typing import Any

ZERO = "0" * 40
MAX_COMMITS = 20  # as GitLab: a push hook carries the newest 20 commits
TIMEOUT_S = 2.0


class GitFailed(OSError):
    """A git command of the hook exited with an error."""


def _git(*args: str) -> str:
    """git's output (undecodable bytes replaced); its errors are not shown to the pusher."""
    out, err = os.pipe()
    try:
        pid = os.posix_spawnp(
            "git",
            ["git", *args],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, err, 1),
                (os.POSIX_SPAWN_CLOSE, out),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
    finally:
        os.close(err)
    chunks = []
    try:
        while chunk := os.read(out, 65536):
            chunks.append(chunk)
    finally:
        os.close(out)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if code != 0:
        raise GitFailed(f"git {args[0]} exited with {code}")
    return b"".join(chunks).decode(errors="replace")


# one record per commit: its fields, NUL-separated, then git's --name-status lines
_RECORD, _FIELDS = "\x1e", "%H%x00%s%x00%B%x00%aI%x00%an%x00%ae%x00"
_KINDS = {"A": "added", "M": "modified", "D": "removed"}


def _commits(*revisions: str) -> list[dict[str, Any]]:
    """The commits ``git log`` lists for ``revisions``, oldest first, each with the paths it
    added, modified and removed against its first parent (all added for a root commit; none
    for a merge, as ``git diff-tree`` says), in one git process: the hook runs while the
    pusher waits, and each process more was a few milliseconds of every push."""
    out = _git("log", "--root", f"--format={_RECORD}{_FIELDS}", "--name-status", "--no-renames", *revisions)
    commits = []
    for record in out.split(_RECORD)[1:]:
        fields = record.split("\0")
        changes: dict[str, list[str]] = {"added": [], "modified": [], "removed": []}
        for line in fields[6].splitlines():
            status, tab, path = line.partition("\t")
            if tab:
                changes[_KINDS.get(status[:1], "modified")].append(path)
        commits.append(
            {
                "id": fields[0],
                "title": fields[1],
                "message": fields[2],
                "timestamp": fields[3],
                "author": {"name": fields[4], "email": fields[5]},
                **changes,
            }
        )
    return commits[::-1]


def push_event(old: str, new: str, ref: str, *, project: str) -> dict[str, Any]:
    """The body GitLab would send for this ref update (the fields config-sync reads, and more)."""
    deleted = new == ZERO
    commits: list[dict[str, Any]] = []
    if not deleted:
        span = new if old == ZERO else f"{old}..{new}"
        commits = _commits(f"--max-count={MAX_COMMITS}", span)
    author = commits[-1]["author"] if commits else {"name": "", "email": ""}
    url = f"file://{os.path.realpath(os.environ.get('GIT_DIR', '.'))}"
    return {
        "object_kind": "push",
        "event_name": "push",
        "before": old,
        "after": new,
        "ref": ref,
        "ref_protected": False,
        "checkout_sha": None if deleted else new,
        "message": None,
        "user_id": os.getuid(),
        "user_name": author["name"],
        "user_username": os.environ.get("USER", ""),
        "user_email": author["email"],
        "user_avatar": None,
        "project_id": 1,
        "project": {
            "id": 1,
            "name": project,
            "path_with_namespace": f"local/{project}",
            "default_branch": "main",
            "git_http_url": url,
        },
        "commits": commits,
        "total_commits_count": len(commits),
        "push_options": {},
        "repository": {"name": project, "url": url, "git_http_url": url, "homepage": url},
    }


def tag_push_event(old: str, new: str, ref: str, *, project: str) -> dict[str, Any]:
    """GitLab's Tag Push Hook body: the push shape with ``object_kind: tag_push``, no commits,
    ``checkout_sha`` the tagged commit (an annotated tag peeled) or null when deleted, and
    ``message`` the annotation."""
    deleted = new == ZERO
    body = push_event(old, ZERO, ref, project=project)  # a push with no commits listed
    checkout = None if deleted else _git("rev-parse", f"{new}^{{commit}}").strip()
    annotation = None
    if not deleted and _git("cat-file", "-t", new).strip() == "tag":
        annotation = _git("tag", "-l", "--format=%(contents)", ref.removeprefix("refs/tags/")).strip()
    if checkout is not None:
        author = _commits("-1", checkout)[0]["author"]
        body.update(user_name=author["name"], user_email=author["email"])
    body.update(
        object_kind="tag_push",
        event_name="tag_push",
        after=new,
        checkout_sha=checkout,
        message=annotation,
    )
    return body


def describe(old: str, new: str, ref: str, *, project: str) -> tuple[str, dict[str, Any]] | None:
    """The event name and body GitLab sends for one ref update; ``None`` for other refs."""
    if ref.startswith("refs/heads/"):
        return "Push Hook", push_event(old, new, ref, project=project)
    if ref.startswith("refs/tags/"):
        return "Tag Push Hook", tag_push_event(old, new, ref, project=project)
    return None


def deliver(url: str, secret: str, body: dict[str, Any], *, event: str = "Push Hook") -> str:
    """POST one delivery; the outcome as a line for the pusher (never raises)."""
    headers = {
        "Content-Type": "application/json",
        "X-Gitlab-Event": event,
        "X-Gitlab-Token": secret,
        "Idempotency-Key": uuid4(),
        "User-Agent": "phrame-dev-hook",
    }
    try:
        status, text = post(url, json_text(body).encode(), headers)
    except (OSError, ValueError) as e:
        return f"config-sync at {url} did not answer ({e}); it picks the push up at its next poll"
    if 200 <= status < 300:
        return f"config-sync notified ({status}): deploying {body['ref']}"
    return f"config-sync answered {status} for {body['ref']}: {text[:200]}"


def post(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, str]:
    """POST ``data`` to an ``http://host:port/path`` URL over a plain socket (``Connection:
    close``): the status and the body as text. ``urllib`` (with ``http.client`` and
    ``email``) was most of the hook's own time, and every push waits for the hook; it is
    imported only for another scheme (``https``)."""
    scheme, _, rest = url.partition("://")
    if scheme != "http":
        return _post_urllib(url, data, headers)
    authority, _, path = rest.partition("/")
    host, port = authority, 80
    if authority.startswith("["):  # [::1]:8080
        host, _, tail = authority[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else 80
    elif ":" in authority:
        host, _, number = authority.rpartition(":")
        port = int(number)
    head = [f"POST /{path} HTTP/1.1", f"Host: {authority}", "Connection: close"]
    head.append(f"Content-Length: {len(data)}")
    head += [f"{name}: {value}" for name, value in headers.items()]
    family, kind, proto, _, address = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)[0]
    sock = _socket.socket(family, kind, proto)
    try:
        sock.settimeout(TIMEOUT_S)
        sock.connect(address)
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        reply = bytearray()
        while chunk := sock.recv(65536):  # the server closes after its answer
            reply += chunk
    finally:
        sock.close()
    status_line, _, rest_of_reply = bytes(reply).partition(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP answer: {status_line[:80]!r}")
    return int(parts[1]), rest_of_reply.partition(b"\r\n\r\n")[2].decode(errors="replace")


def _post_urllib(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return int(response.status), ""
    except urllib.error.HTTPError as e:
        return int(e.code), e.read()[:200].decode(errors="replace")


def json_text(value: Any) -> str:
    """``json.dumps(value)`` (the same text) for what a delivery holds: dicts with string
    keys, lists, strings, integers, booleans and None."""
    if isinstance(value, str):
        return str(_json.encode_basestring_ascii(value))
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json_text(str(k))}: {json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json_text(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} is not part of a delivery")


def uuid4() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())``."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def main(config: dict[str, Any]) -> int:
    """``config``: ``urls`` (or ``url``), ``secret_file`` and ``project``, as
    :func:`dev_stack.git_host.hook_script` writes them into the hook."""
    try:
        with open(config["secret_file"]) as f:
            secret = f.read().strip()
    except (OSError, KeyError) as e:
        print(f"phrame: hook not configured ({e!r}); config-sync will poll", file=sys.stderr)
        return 0
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 3:
            continue
        try:
            described = describe(*parts, project=config.get("project", "phrame-config"))
        except OSError as e:
            print(f"phrame: cannot describe the push of {parts[2]} ({e})", file=sys.stderr)
            continue
        if described is None:
            continue  # neither a branch nor a tag: GitLab sends nothing either
        event, body = described
        for url in config.get("urls") or [config["url"]]:  # active + standby: each hears it
            print(f"phrame: {deliver(url, secret, body, event=event)}", file=sys.stderr)
    return 0
