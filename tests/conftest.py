"""Test-wide setup: fixtures for real components live in tests/fixtures/ (pytest plugins)."""

pytest_plugins = ["tests.fixtures.server", "tests.fixtures.index"]
