"""The fuzz suite: hostile input against every reader of outside data (issue 10).

One file per entry point, all under the budget of :mod:`tests.fuzz.profile`
(``FUZZ_EXAMPLES``, ``FUZZ_DEADLINE_MS``): config files through validation and placement's
reading (``test_config_*``), desired-plane payloads and restart commands through the node
agent (``test_agent_*``). Webhook bodies and headers belong here too, as
``test_webhook_*.py`` under the same profile. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

from tests.fuzz.profile import DEADLINE_MS, EXAMPLES


def pytest_report_header() -> str:
    return f"fuzz: FUZZ_EXAMPLES={EXAMPLES} per test, FUZZ_DEADLINE_MS={DEADLINE_MS}"
