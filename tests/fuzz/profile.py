"""The one budget every fuzz test runs under ("keep it closed").

Each hypothesis test in ``tests/fuzz`` takes its settings from :func:`fuzz`, so one
environment variable scales the whole suite: ``FUZZ_EXAMPLES`` (examples per test, a
CI-friendly default) and ``FUZZ_DEADLINE_MS`` (per example; a slow example is a finding:
validation that takes seconds on a small file is itself a hazard). Hypothesis prints the
seed and a reproduction blob of a failure; its example database lives in ``.hypothesis``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))
DEADLINE_MS = int(os.environ.get("FUZZ_DEADLINE_MS", "5000"))

settings.register_profile(
    "phrame-fuzz",
    max_examples=EXAMPLES,
    deadline=timedelta(milliseconds=DEADLINE_MS),
    # hostile inputs are large and slow to make on purpose
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    print_blob=True,
)


def fuzz(share: float = 1.0) -> settings:
    """The suite's settings; ``share`` scales the examples of a test much cheaper (or
    dearer) than the rest, so the suite's time stays proportional to ``FUZZ_EXAMPLES``."""
    base = settings.get_profile("phrame-fuzz")
    return settings(base, max_examples=max(1, round(EXAMPLES * share)))
