"""Just enough of GitLab's REST API (v4), canned and served over real HTTP on 127.0.0.1, for
a process under test (the topic API runs in its own process: ``responses`` cannot reach it).

Shapes follow GitLab's documentation: Branches › Get single repository branch, Repository ›
List repository tree, Commits › Create a commit with multiple files and actions, Merge
requests › Create MR, List MRs, Merge a merge request, Commits › List merge requests associated
with a commit, Merge request approvals › Get the approval state, Commits › Set the pipeline
status of a commit. Every request is recorded (method, path, query, JSON body, token) so a
test asserts on what the client sent; a created commit makes its branch exist.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

PROJECT = "studio/phrame-config"
HEAD = "7b5c3cc8be40ee161ae89a06bba6229da1032a0c"


class CannedGitLab:
    def __init__(self, *, branches: dict[str, str] | None = None, tree: list[str] | None = None) -> None:
        self.branches = {"main": HEAD} if branches is None else dict(branches)
        self.tree = list(tree or [])  # file paths of the tracked head
        self.requests: list[dict[str, Any]] = []
        self.merge_requests_refused = False  # True: creating one answers 403, as a token without api scope
        self.merged: dict[
            str, tuple[int, str]
        ] = {}  # commit -> (iid, target branch) of the MR that merged it
        self.approved_by: dict[int, list[str]] = {}  # MR iid -> usernames that approved it
        self.approvals_down = False  # True: the approvals and commit MR calls answer 503 (an outage)
        self.merge_refusal: tuple[int, str] | None = None  # merging answers this (status, message)
        self.merge_requests: list[dict[str, Any]] = []  # opened (and merged) ones, as GitLab shows them
        self.lock = threading.Lock()
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _answer(self, status: int, doc: Any) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method: str) -> None:
                url = urlsplit(self.path)
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                record = {
                    "method": method,
                    "path": unquote(url.path),
                    "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                    "json": json.loads(raw) if raw else None,
                    "token": self.headers.get("PRIVATE-TOKEN"),
                }
                with canned.lock:
                    canned.requests.append(record)
                    status, doc = canned.route(record)
                self._answer(status, doc)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> CannedGitLab:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, r: dict[str, Any]) -> tuple[int, Any]:
        base = f"/api/v4/projects/{PROJECT}"
        path, method = r["path"], r["method"]
        if method == "GET" and path.startswith(f"{base}/repository/branches/"):
            name = path.removeprefix(f"{base}/repository/branches/")
            if name not in self.branches:
                return 404, {"message": "404 Branch Not Found"}
            return 200, branch_doc(name, self.branches[name])
        if method == "GET" and path == f"{base}/repository/tree":
            folder = r["query"].get("path", "").rstrip("/") + "/"
            found = [p for p in self.tree if p.startswith(folder)]
            if not found:
                return 404, {"message": "404 Tree Not Found"}
            return 200, [tree_doc(p) for p in found]
        if method == "POST" and path == f"{base}/repository/commits":
            body = r["json"]
            if body["branch"] in self.branches:
                return 400, {"message": f"A branch called '{body['branch']}' already exists"}
            sha = f"{len(self.requests):040x}"
            self.branches[body["branch"]] = sha
            return 201, commit_doc(sha, body["commit_message"], body["start_sha"])
        if method == "POST" and path == f"{base}/merge_requests":
            if self.merge_requests_refused:
                return 403, {"message": "403 Forbidden"}
            body = r["json"]
            doc = mr_doc(len(self.merge_requests) + 1, body)
            self.merge_requests.append(doc)
            return 201, doc
        if method == "GET" and path == f"{base}/merge_requests":
            q = r["query"]
            found = [m for m in self.merge_requests if m["state"] == q.get("state", m["state"])]
            return 200, [m for m in found if m["source_branch"] == q.get("source_branch", m["source_branch"])]
        if method == "PUT" and path.startswith(f"{base}/merge_requests/") and path.endswith("/merge"):
            iid = int(path.removeprefix(f"{base}/merge_requests/").removesuffix("/merge"))
            mr = next((m for m in self.merge_requests if m["iid"] == iid), None)
            if mr is None:
                return 404, {"message": "404 Not found"}
            if self.merge_refusal is not None:
                return self.merge_refusal[0], {"message": self.merge_refusal[1]}
            mr["state"] = "merged"
            return 200, mr
        if method == "POST" and path.startswith(f"{base}/statuses/"):
            body = r["json"]
            return 201, {"id": len(self.requests), "sha": path.rsplit("/", 1)[-1], **body}
        if (
            method == "GET"
            and path.startswith(f"{base}/repository/commits/")
            and path.endswith("/merge_requests")
        ):
            if self.approvals_down:
                return 503, {"message": "503 Service Unavailable"}
            sha = path.removeprefix(f"{base}/repository/commits/").removesuffix("/merge_requests")
            found = self.merged.get(sha)
            return 200, [] if found is None else [merged_mr_doc(found[0], found[1], sha)]
        if method == "GET" and path.startswith(f"{base}/merge_requests/") and path.endswith("/approvals"):
            if self.approvals_down:
                return 503, {"message": "503 Service Unavailable"}
            iid = int(path.removeprefix(f"{base}/merge_requests/").removesuffix("/approvals"))
            return 200, approvals_doc(iid, self.approved_by.get(iid, []))
        return 404, {"message": "404 Not Found"}

    def calls(self, method: str, suffix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["method"] == method and r["path"].endswith(suffix)]


def branch_doc(name: str, sha: str) -> dict[str, Any]:
    return {
        "name": name,
        "merged": False,
        "protected": name == "main",
        "default": name == "main",
        "developers_can_push": False,
        "developers_can_merge": False,
        "can_push": True,
        "web_url": f"https://gitlab.example.test/{PROJECT}/-/tree/{name}",
        "commit": {
            "id": sha,
            "short_id": sha[:8],
            "title": "sample",
            "author_name": "Test Ops",
            "author_email": "ops@example.test",
            "created_at": "2026-12-01T09:00:00.000+00:00",
            "message": "sample\n",
            "parent_ids": [],
        },
    }


def tree_doc(path: str) -> dict[str, Any]:
    return {"id": "a1e8f8d745cc87e3a9248358d9352bb7f9a0aeba", "name": path.rsplit("/", 1)[-1],
            "type": "blob", "path": path, "mode": "100644"}  # fmt: skip


def commit_doc(sha: str, message: str, parent: str) -> dict[str, Any]:
    return {
        "id": sha,
        "short_id": sha[:8],
        "title": message.splitlines()[0],
        "message": message,
        "author_name": "phrame-bot",
        "author_email": "bot@example.test",
        "created_at": "2026-12-01T09:00:00.000+00:00",
        "parent_ids": [parent],
        "stats": {"additions": 1, "deletions": 0, "total": 1},
        "status": None,
        "web_url": f"https://gitlab.example.test/{PROJECT}/-/commit/{sha}",
    }


def mr_doc(iid: int, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": 1000 + iid,
        "iid": iid,
        "project_id": 42,
        "title": body["title"],
        "description": body["description"],
        "state": "opened",
        "source_branch": body["source_branch"],
        "target_branch": body["target_branch"],
        "force_remove_source_branch": body.get("remove_source_branch"),
        "merge_status": "checking",
        "web_url": f"https://gitlab.example.test/{PROJECT}/-/merge_requests/{iid}",
    }


def merged_mr_doc(iid: int, target: str, sha: str) -> dict[str, Any]:
    """A merge request as Commits › List merge requests associated with a commit lists it."""
    return {
        "id": 1000 + iid,
        "iid": iid,
        "project_id": 42,
        "title": "raise the web image",
        "state": "merged",
        "target_branch": target,
        "source_branch": "web-2",
        "merge_commit_sha": sha,
        "sha": sha,
        "merged_at": "2026-12-01T09:30:00.000Z",
        "web_url": f"https://gitlab.example.test/{PROJECT}/-/merge_requests/{iid}",
    }


def approvals_doc(iid: int, usernames: list[str]) -> dict[str, Any]:
    """Merge request approvals › Get the approval state of a merge request (``approved_by``)."""
    return {
        "id": 1000 + iid,
        "iid": iid,
        "project_id": 42,
        "title": "raise the web image",
        "state": "merged",
        "merge_status": "can_be_merged",
        "approvals_required": len(usernames),
        "approvals_left": 0,
        "approved": True,
        "approved_by": [
            {
                "user": {
                    "name": u.title(),
                    "username": u,
                    "id": 10 + i,
                    "state": "active",
                    "web_url": f"https://gitlab.example.test/{u}",
                }
            }
            for i, u in enumerate(usernames)
        ],
    }
