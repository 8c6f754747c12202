"""The lines ``phrame dev`` prints once, when the stack is ready: where things are, what to try.

Pure: :func:`banner` returns text for the supervisor to print; the README's Quickstart
shows the same commands, so change both together.
"""

from __future__ import annotations

from pathlib import Path

from dev_stack.credentials import PERSON_ACCOUNT, password_file
from dev_stack.settings import DEFAULT_STATE_DIR, DevSettings


def banner(settings: DevSettings, took_s: float, *, has_docker: bool) -> list[str]:
    s = settings
    env = s.environment
    web = f"environments/{env}/services/web.yaml"
    lines = [
        f"ready in {took_s:.1f} s: broker, config-sync, placement, mirrors, topic API and "
        f"{len(s.nodes)} agents ({', '.join(s.nodes)})",
        "",
        f"  config repo:  git clone {s.repo} phrame-config",
        f"  config-sync:  {s.config_sync_url}/status"
        + (f" and {s.standby_url}/status (active + standby: /readyz says which)" if s.ha else ""),
        f"  broker:       {s.broker_url}  (to read it: user operator, password in "
        f"{password_file(s, PERSON_ACCOUNT)})",
        f"  the page:     {s.web_url}" + ("" if has_docker else " (needs Docker)"),
        f"  dashboard:    {s.api_url}",
        f"  API docs:     {s.api_url}docs  (token for writes: {s.api_token_file})",
        f"  logs:         {s.logs}/",
    ]
    if s.state_dir != Path(DEFAULT_STATE_DIR).absolute():
        # phrame status, promote and replay find a stack in ./.phrame-dev by themselves
        lines.append(f"  other commands: PHRAME_DEV_STATE_DIR={s.state_dir} phrame status")
    lines += [
        "",
        "Three things to try (in another terminal):",
        f"  git clone {s.repo} phrame-config && cd phrame-config",
        f"  1. change PAGE_TEXT in {web}, then",
        "     git commit -qam 'New page text' && git pull -q --rebase && git push",
        f"     curl {s.web_url}",
        f"  2. break a file (e.g. add 'replicas: two' to {web}), commit and push:",
        "     the errors are printed here (file:line:col: rule: message); nothing changes",
        "  3. git revert --no-edit HEAD HEAD~1 && git push   (back to the first page)",
        "",
        "phrame status shows the nodes; Ctrl-C stops the stack (containers keep running); "
        "make down removes them.",
    ]
    return lines
