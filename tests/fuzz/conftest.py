"""The fuzz suite: hostile input against every reader of outside data.

One file per entry point, all under the budget of :mod:`tests.fuzz.profile`
(``FUZZ_EXAMPLES``, ``FUZZ_DEADLINE_MS``): config files through validation and placement's
reading (``test_config_*``), desired-plane payloads and restart commands through the node
agent (``test_agent_*``), webhook bodies and headers (``test_webhook_*``), the topic API's
kv writes (``test_topic_api_kv``) and node reports through the mirror into the topic API
(``test_report_payloads``). Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import pytest

from tests.fuzz.profile import DEADLINE_MS, EXAMPLES

# pytest-timeout's 300 s is per test: a longer search (FUZZ_EXAMPLES=5000) gets time in
# proportion, still bounded (a hang is a finding too)
TIMEOUT_S = max(300, EXAMPLES // 2)


def pytest_report_header() -> str:
    return f"fuzz: FUZZ_EXAMPLES={EXAMPLES} per test, FUZZ_DEADLINE_MS={DEADLINE_MS}, timeout {TIMEOUT_S} s"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = __file__.rsplit("/", 1)[0] + "/"
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.timeout(TIMEOUT_S))
            item.add_marker(pytest.mark.slow)  # a search of FUZZ_EXAMPLES each: the slow tier
