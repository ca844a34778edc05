"""Test-wide setup: fixtures for real components live in tests/fixtures/ (pytest plugins)."""

import os

pytest_plugins = ["tests.fixtures.server", "tests.fixtures.index", "tests.fixtures.netcut"]


def pytest_configure(config) -> None:
    # CI (`CI=true`, .ci/run) reports the 15 slowest set-ups, calls and tear-downs, so a slow test or
    # server start-up shows in every log (issue 30 point 8); an explicit --durations wins.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and config.option.durations is None:
        config.option.durations = 15
