"""The browser test fails fast, in one line, when chromium cannot start or is missing under CI (it runs
the real test file in a child pytest with a chromium that is not one)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


from tests.fixtures.index import need_module

ROOT = Path(__file__).resolve().parents[2]


def run_page_test(chromium: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, float]:
    need_module("playwright.sync_api", "pip install playwright")
    # an endpoint that cannot answer: the child session starts no vLLM server in the background (one that
    # the failing browser would have it kill again: CPU taken from the tests around it); the page test
    # must fail on chromium before it asks for the model server, else it fails naming the endpoint instead
    env = {**os.environ, "CI": "true", "VERACITY_CHROMIUM": chromium, "VERACITY_ARTIFACTS": str(tmp_path),
           "VERACITY_TEST_ENDPOINT": "http://127.0.0.1:9/v1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-header",
                           "-rf",
                           "tests/integration/test_web_real.py", "-k", "page"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return proc, time.perf_counter() - t0


def test_a_chromium_that_cannot_start_fails_at_once_in_one_line(tmp_path):
    proc, seconds = run_page_test("/bin/false", tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if "chromium at /bin/false cannot start" in ln]
    assert lines, proc.stdout[-2000:]
    assert "Traceback" not in proc.stdout and seconds < 60  # before any index is built or app started


def test_a_missing_chromium_fails_under_ci(tmp_path):
    proc, _ = run_page_test(str(tmp_path / "no-such-chromium"), tmp_path)
    assert proc.returncode == 1
    assert "real component missing under CI: chromium not found" in proc.stdout
