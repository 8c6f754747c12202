"""The ``local`` git host: a bare repository with a post-receive hook.

The supervisor calls :func:`prepare` before starting anything: on first start it creates
``config.git`` with one commit of the quickstart sample on ``main``; on every start it
(re)writes the hook and its configuration, since ports may have changed. It never rewrites
the repository's history and never touches a repository that already exists beyond its hook.
"""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from dev_stack.errors import DevError
from dev_stack.settings import DevSettings

# -S: the hook is standard library only, and a push waits for it: no site-packages to set up.
# Its configuration is written into it (a file to read would need ``json``, ``re`` and all).
HOOK = """#!{python} -S
# Installed by `phrame dev` (rewritten at every start): posts a GitLab-shaped Push Hook
# to config-sync for every updated branch; never fails or holds a push.
import sys
sys.path.insert(0, {root!r})
from dev_stack.hook import main
sys.exit(main({config!r}))
"""
AUTHOR = {
    "GIT_AUTHOR_NAME": "phrame dev",
    "GIT_AUTHOR_EMAIL": "dev@phrame.invalid",
    "GIT_COMMITTER_NAME": "phrame dev",
    "GIT_COMMITTER_EMAIL": "dev@phrame.invalid",
}


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(  # umask: what git writes in the state folder is the owner's alone
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True, umask=0o077
        )
    except FileNotFoundError:
        raise DevError("git is not installed (Debian package git)") from None
    except subprocess.CalledProcessError as e:
        raise DevError(f"git {' '.join(args)} failed: {e.stderr.strip()}") from None
    return done.stdout


def webhook_secret(settings: DevSettings) -> str:
    """The secret config-sync expects, generated once (mode 0600)."""
    return _secret(settings.secret_file)


def api_token(settings: DevSettings) -> str:
    """The topic API's token for writes, generated once (mode 0600)."""
    return _secret(settings.api_token_file)


def exposed_secrets(settings: DevSettings) -> list[Path]:
    """Remove the webhook secret and API token where other users could read them (a new one
    is made in their place); the paths removed. A state folder or secret that is not this
    user's own (a secret: a regular file) is refused: it may have been planted."""
    try:
        owner = settings.state_dir.stat().st_uid
    except FileNotFoundError:
        return []
    if owner != os.geteuid():
        raise DevError(f"{settings.state_dir} belongs to uid {owner}, not to you: choose another --state-dir")
    removed = []
    for path in (settings.secret_file, settings.api_token_file):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise DevError(
                f"{path} is not a file of yours (a link, or owned by uid {st.st_uid}): remove it "
                "and start again (phrame dev makes a new one)"
            )
        if st.st_mode & 0o077:
            path.unlink()
            removed.append(path)
    return removed


def _secret(path: Path) -> str:
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path.read_text().strip()


def create_repo(settings: DevSettings, files: dict[str, str]) -> str:
    """A new bare repository holding ``files`` in one commit on ``main``; returns the sha."""
    repo = settings.repo
    # --shared=0600: what git writes there later, a person's push too, stays the owner's
    _git("init", "--quiet", "--bare", "--shared=0600", "--initial-branch=main", str(repo))
    with tempfile.TemporaryDirectory(prefix="phrame-dev-sample-") as tmp:
        work = Path(tmp)
        for rel, text in files.items():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_text(text)
        env = {**os.environ, **AUTHOR, "GIT_DIR": str(repo), "GIT_WORK_TREE": str(work)}
        env["GIT_INDEX_FILE"] = str(work.parent / f"{work.name}.index")
        try:
            _git("add", "--all", env=env)
            _git("commit", "--quiet", "-m", "Quickstart sample (phrame dev)", env=env)
        finally:
            Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
    return _git("rev-parse", "main", env={**os.environ, "GIT_DIR": str(repo)}).strip()


def hook_script(urls: list[str], secret_file: Path, *, project: str = "phrame-config") -> str:
    """The ``post-receive`` hook's text: it posts to each of ``urls`` with the secret read
    from ``secret_file`` (strings only: written as a Python literal)."""
    config = {"urls": [str(u) for u in urls], "secret_file": str(secret_file), "project": str(project)}
    root = str(Path(__file__).resolve().parent.parent)
    return HOOK.format(python=sys.executable, root=root, config=config)


def install_hook(settings: DevSettings) -> None:
    """(Re)write ``hooks/post-receive`` with its configuration."""
    # --ha: every config-sync hears each push (the standby queues it: see config-sync's HA)
    urls = [f"{url}/webhooks/gitlab" for url in settings.config_sync_urls]
    script = hook_script(urls, settings.secret_file)
    (settings.repo / "phrame-hook.json").unlink(missing_ok=True)  # where an older hook read it
    hook = settings.repo / "hooks" / "post-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(script)
    hook.chmod(0o700)
    # a repository made before it was private: git keeps new files 0600 from now on
    _git("--git-dir", str(settings.repo), "config", "core.sharedRepository", "0600")


def prepare(settings: DevSettings, sample: dict[str, str]) -> str | None:
    """Create the repository on first start (returns the new commit), then install the hook."""
    webhook_secret(settings)
    api_token(settings)
    created = None
    if not (settings.repo / "HEAD").exists():
        created = create_repo(settings, sample)
    install_hook(settings)
    return created
