"""Test-wide setup: fixtures for real components live in tests/fixtures/ (pytest plugins)."""

import os

pytest_plugins = ["tests.fixtures.server", "tests.fixtures.index", "tests.fixtures.netcut"]


def pytest_configure(config) -> None:
    # CI (`CI=true`, .ci/run) reports the 15 slowest set-ups, calls and tear-downs, so a slow test or
    # server start-up shows in every log (issue 30 point 8); an explicit --durations wins.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and config.option.durations is None:
        config.option.durations = 15
    # pytest-xdist (the README's `-n 2 --dist loadscope`): the workers write which modules share a group to
    # this file and the controller's scheduler reads it (tests/fixtures/server.py, ModuleGroups); the groups
    # are handed out in collection order (vLLM's first, llama.cpp's last), not sorted by size
    if getattr(config.option, "dist", "no") == "loadscope" and not hasattr(config, "workerinput"):
        import tempfile

        fd, path = tempfile.mkstemp(prefix="veracity-test-groups-", suffix=".json")
        os.close(fd)
        os.environ["VERACITY_TEST_GROUPS"] = path
        config.option.loadscopereorder = False
        # a worker that dies (a native crash) ends the run with the crashed test named, instead of being
        # replaced: after a replacement, loadscope's requeued group never finished and the run hung
        if getattr(config.option, "maxworkerrestart", None) is None:
            config.option.maxworkerrestart = 0


def pytest_unconfigure(config) -> None:
    path = os.environ.get("VERACITY_TEST_GROUPS")
    if path and not hasattr(config, "workerinput"):
        os.environ.pop("VERACITY_TEST_GROUPS")
        try:
            os.unlink(path)
        except OSError:
            pass
