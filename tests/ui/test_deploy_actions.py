"""The dashboard's Promote and Roll back, clicked in Debian's Chromium against real parts.

A real config-sync (uvicorn, a git remote, mosquitto; a tokens file shared with the topic
API), the mirrors and the topic API as processes; the agents are stood in for by a client
reporting what is published (items and converged statuses). A staged rollout waiting for its
promotion shows Promote: clicking it (the token asked once) releases the rest of the rollout.
An earlier converged deployment shows Roll back to this: clicking it makes the revert commit
on main, which config-sync then deploys.
"""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from config_sync.reporting import LocalReporter
from config_sync.service import ConfigSync
from phrame.auth import TokenStore
from schemas import Topics
from tests.integration.test_sync_rollouts import NODES, Fleet, _digests, _files, _rollout, serving
from tests.support.browser import screenshot, wait_js
from tests.support.mosquitto import Mosquitto
from tests.support.sync_support import SECRET, ConfigRemote, desired_on_broker, reader, settings_for
from tests.support.topic_api import ApiStack
from tests.support.waiting import wait_for
from tests.ui.conftest import Opener

T = Topics()
CANARY = "  max_parallel: 1\n  canary: 1\n  min_healthy_s: 0.2\n  healthy_deadline_s: 60\n"
DEPLOYER = "gina-deploy-token"


def _states(watch: object) -> list[tuple[str, str]]:
    raw = desired_on_broker(watch).get(T.env_deploys("lab"))  # type: ignore[arg-type]
    return [(d["commit"], d["state"]) for d in json.loads(raw)["deploys"]] if raw else []


@pytest.mark.slow
def test_promote_releases_a_waiting_rollout_and_roll_back_makes_the_revert_commit(
    tmp_path: Path, mosquitto: Mosquitto, open_page: Opener
) -> None:
    tokens = tmp_path / "tokens.yaml"
    TokenStore.of([("gina", ["deploy"], DEPLOYER)], tokens)
    remote = ConfigRemote(tmp_path / "git")
    v1 = remote.commit("web 1", files=_files("web:1", CANARY))
    settings = settings_for(
        remote, tmp_path / "state", mosquitto.url, poll_s=3600, debounce_s=0, deploy_timeout_s=120,
        webhook_secret=SECRET, tokens_file=str(tokens),
    )  # fmt: skip
    service = ConfigSync(settings, reporter=LocalReporter())
    with (
        serving(service) as sync_url,
        reader(mosquitto.url) as watch,
        reader(mosquitto.url, "fake-agents") as agents,
    ):
        fleet = Fleet(agents)

        def settle() -> bool:
            """The stand-in agents run what is published and say they converged on it."""
            published = desired_on_broker(watch)
            fleet.run_what_is_published(published)
            generations = dict(service.deployer.published)
            statuses = [
                (T.status(n), json.dumps({"state": "online", "converged": True, "generation": g}).encode())
                for n, g in generations.items()
                if n in NODES
            ]
            agents.publish_batch(statuses)
            return True

        api = ApiStack(
            mosquitto.url, tmp_path / "api", token=None,
            PHRAME_TOKENS_FILE=str(tokens), PHRAME_CONFIG_SYNC_URL=sync_url,
        ).start()  # fmt: skip
        try:
            wait_for(lambda: service.syncer.last.get("main"), "the first sync", 30)
            wait_for(lambda: settle() and _states(watch)[:1] == [(v1, "converged")], "v1 converged", 20)
            v2 = remote.commit("web 2", files=_files("web:2", CANARY))
            service.trigger_sync("main")
            wait_for(
                lambda: (
                    settle()
                    and (_rollout(desired_on_broker(watch)) or {}).get("state") == "waiting-promotion"
                ),
                "the canary waiting for its promotion",
                30,
                interval=0.2,
            )
            before = _digests(desired_on_broker(watch))

            page, watch_page = open_page(f"{api.url}/")
            button = page.locator('#env-list button[data-action="promote"][data-service="web"]')
            button.wait_for()
            assert button.get_attribute("data-commit") == v2
            button.click()
            # a token config-sync does not know: refused (401), forgotten, and asked for again
            page.wait_for_selector("#token-dialog[open]")
            page.fill("#token-input", "not-a-deploy-token")
            page.keyboard.press("Enter")
            wait_js(
                page,
                "() => document.getElementById('token-dialog').open"
                " && document.getElementById('token-why').textContent.includes('deploy token')",
                "the token asked for again",
            )
            page.fill("#token-input", DEPLOYER)
            page.keyboard.press("Enter")
            wait_js(
                page, "() => document.getElementById('env-message').textContent.includes('queued')", "queued"
            )
            assert f"lab/web: promotion of {v2[:12]} queued" in (page.text_content("#env-message") or "")
            # the rest of the rollout is released: every replica gets web:2
            wait_for(
                lambda: settle() and _digests(desired_on_broker(watch))[1:] != before[1:], "released", 20
            )
            wait_for(
                lambda: settle() and _states(watch)[:1] == [(v2, "converged")],
                "v2 converged",
                30,
                interval=0.2,
            )
            screenshot(page, "dashboard-1280-promoted", full_page=False)

            # roll back to v1 from its row (the newest row has no such button)
            row = page.locator(f'#env-list tr[data-commit="{v1}"] button[data-action="rollback"]')
            row.wait_for()
            assert (
                page.locator(f'#env-list tr[data-commit="{v2}"] button[data-action="rollback"]').count() == 0
            )
            page.once("dialog", lambda d: d.accept())  # the confirmation
            row.click()
            wait_js(
                page,
                "() => document.getElementById('env-message').textContent.includes('rolled back')",
                "rolled",
            )
            said = page.text_content("#env-message") or ""
            assert f"lab rolled back to {v1[:12]}" in said and "pushed to main" in said
            with git.Repo(remote.bare_path) as repo:
                head = repo.commit("main")
                assert [p.hexsha for p in head.parents] == [v2]
                assert head.message.startswith(f"Roll back lab to {v1[:12]} (web 1)")
                assert (head.tree / "environments/lab/services/web.yaml").data_stream.read() == (
                    repo.commit(v1).tree / "environments/lab/services/web.yaml"
                ).data_stream.read()
                revert = head.hexsha
            # config-sync deploys the revert commit like any commit (a staged rollout again)
            wait_for(
                lambda: (_rollout(desired_on_broker(watch)) or {}).get("commit") == revert, "deployed", 20
            )
            screenshot(page, "dashboard-1280-rolled-back", full_page=False)
            # the one 401 is the refused token, on purpose
            assert [m for m in watch_page.console if "401" not in m] == [], watch_page.problems()
            assert not watch_page.errors and not watch_page.failed, watch_page.problems()
        finally:
            api.stop()
            service.stop()
