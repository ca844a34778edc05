"""Test-wide setup: fixtures for real components live in tests/fixtures/ (pytest plugins)."""

import os

pytest_plugins = ["tests.fixtures.server", "tests.fixtures.index", "tests.fixtures.netcut"]


def pytest_configure(config) -> None:
    # CI (`CI=true`, .ci/run) reports the 15 slowest set-ups, calls and tear-downs, so a slow test or
    # server start-up shows in every log (issue 30 point 8); an explicit --durations wins.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and config.option.durations is None:
        config.option.durations = 15
    # pytest-xdist's loadgroup (the README's `-n 2 --dist loadgroup`) hands out the groups in collection order
    # (tests/fixtures/server.py orders them: vLLM's first, llama.cpp's last); by default it would sort them
    # by size instead
    if getattr(config.option, "dist", "no") == "loadgroup":
        config.option.loadscopereorder = False
