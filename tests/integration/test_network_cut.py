"""The main commands with the network cut (issue 40 point 3).

The whole test run is the proof: ``.ci/run`` runs the README's test command under ``.ci/netcut``, inside a
network namespace that has only a loopback interface (``unshare --net``, ``ip link set lo up``; as root),
with a process-wide audit in every Python process (tests/fixtures/netaudit: ``sys.addaudithook`` on
``socket.connect``/``sendto``/``getaddrinfo``/``gethostbyname``, the library that tried named) that fails
the test during which any non-loopback attempt was recorded (tests/fixtures/netcut.py). So every
integration test already runs cut off: ``web`` with its page in chromium (test_web_real.py), ``index
build`` (test_index_build.py), the Ray backend in its own process (test_ray_backend.py), batches and their
faults (test_faults.py), ``check`` (test_check_real.py), ``bench run`` (test_bench_run_real.py), on the
session's servers (llama.cpp, the default engine without a GPU, and vLLM). Non-Python programs
(llama-server, chromium, pyserini's JVM) are held by the namespace alone.

This module checks that the run really is cut and audited (under ``CI=true`` a run that is not fails
here), that the audit names who tried, and runs the commands a user types — ``verify "CLAIM"``, a batch
``verify -i -o``, ``check`` and ``bench run`` — as real processes on both engines' session servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.index import shared_data_dir
from tests.fixtures.netcut import AUDIT, describe, read_attempts
from tests.fixtures.server import missing

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AUDIT_DIR = ROOT / "tests" / "fixtures" / "netaudit"
CLAIM = "The Eiffel Tower is in Berlin."
CLAIMS = ["The Eiffel Tower is in Paris.", "Marie Curie won two Nobel Prizes."]


def interfaces() -> list[str]:
    """This process's network namespace's interfaces (/proc/net/dev is per namespace; /sys/class/net shows
    the namespace that mounted /sys, the machine's, even inside ``unshare --net``)."""
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines if ":" in line)


@pytest.fixture(scope="module")
def cut():
    """The run is inside a namespace with loopback only and the audit is on (else: missing)."""
    if interfaces() != ["lo"] or not AUDIT:
        missing(f"the tests do not run with the network cut (interfaces {interfaces()}, VERACITY_NET_AUDIT "
                f"{'set' if AUDIT else 'unset'}): run them as root under .ci/netcut, as .ci/run does")


def test_only_loopback_is_there_and_every_python_process_carries_the_audit(cut, tmp_path):
    assert interfaces() == ["lo"]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30).stdout
    assert [ln.split(":")[1].strip() for ln in links.splitlines() if ln.strip()] == ["lo"], links
    assert "UP" in links.split("<", 1)[1].split(">", 1)[0].split(","), f"loopback is down: {links}"
    routes = Path("/proc/net/route").read_text().splitlines()[1:]
    assert all(r.split()[0] == "lo" for r in routes if r.strip()), routes  # no route off the machine
    child = subprocess.run([sys.executable, "-c", "import sitecustomize; print(sitecustomize.__file__)"],
                           capture_output=True, text=True, timeout=60)
    assert Path(child.stdout.strip()).resolve() == (AUDIT_DIR / "sitecustomize.py").resolve(), child.stderr


def test_the_audit_names_the_library_that_tried(cut, tmp_path):
    """An attempt is raised as the audit event a connect raises (nothing is sent anywhere), from a module
    of its own: the record names that module, the address and the process."""
    (tmp_path / "outward_caller.py").write_text(textwrap.dedent("""
        import socket, sys
        def reach():
            s = socket.socket()
            sys.audit("socket.connect", s, ("192.0.2.7", 443))   # what socket.connect raises first
            sys.audit("socket.getaddrinfo", "updates.example.org", 443, 0, 0, 0)
            sys.audit("socket.connect", s, ("127.0.0.1", 8000))  # loopback: not recorded
            s.close()
    """))
    log = tmp_path / "audit.jsonl"
    env = {**os.environ, "VERACITY_NET_AUDIT": str(log),
           "PYTHONPATH": os.pathsep.join([str(AUDIT_DIR), str(tmp_path)])}
    run = subprocess.run([sys.executable, "-c", "import outward_caller; outward_caller.reach()"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    seen = read_attempts(log)
    assert [(a["event"], a["host"], a["library"]) for a in seen] == [
        ("socket.connect", "192.0.2.7", "outward_caller"),
        ("socket.getaddrinfo", "updates.example.org", "outward_caller")], describe(seen)


def _veracity(home: Path, audit: Path, *args: str) -> subprocess.Popen:
    """``veracity ARGS`` started as a real process in ``home`` with the audit on (its output piped)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_")}
    env.update(VERACITY_HOME=str(home), VERACITY_NET_AUDIT=str(audit), COLUMNS="200", NO_COLOR="1")
    data = shared_data_dir()
    if data is not None:
        env["VERACITY_DATA_DIR"] = str(data)
    return subprocess.Popen([sys.executable, "-m", "veracity", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=home)


def test_the_commands_a_user_types_run_cut_off_on_llama_cpp(cut, llm_endpoint, demo_style_index_dir,
                                                            tmp_path):
    run_the_commands("llama.cpp", llm_endpoint, demo_style_index_dir, tmp_path)


def run_the_commands(engine: str, ep, index: Path, tmp_path: Path) -> None:
    """``verify "CLAIM"``, ``verify -i -o``, ``check`` and ``bench run`` as real processes on ``ep``, all
    four at once, each in a home of its own, all writing one audit file; every one succeeds and none tries
    to reach past loopback (test_vllm_engine.py runs it on vLLM). At once: what each shows is that it runs
    cut off, which does not depend on the others running before it, and the server answers their requests
    side by side (on two cores, one command's start-up then overlaps another's wait for the server)."""
    if shared_data_dir() is None:
        missing("benchmark data (../shared/data) not found; set VERACITY_DATA_DIR")
    audit = tmp_path / "audit.jsonl"
    claims = tmp_path / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": f"c{i}", "claim": c}) + "\n" for i, c in enumerate(CLAIMS)))
    text = tmp_path / "text.txt"
    text.write_text("The Eiffel Tower is in Paris.\n")  # one sentence: what is shown is that it runs cut off
    on = ["--endpoint", ep.url, "--model", ep.model]
    idx = ["--index", str(index)]
    steps = {
        'verify "CLAIM"': ["verify", CLAIM, *idx, "--method", "rag", *on],
        "verify -i -o": ["verify", "-i", str(claims), "-o", str(tmp_path / "out.jsonl"), *idx, "--method",
                         "rag",
                         "-q", *on],
        "check": ["check", str(text), *idx, *on],
        "bench run": ["bench", "run", "--dataset", "hover", "--method", "rag", "--evidence", "gold",
                      "--limit", "1",
                      "--seed", "0", "--out", str(tmp_path / "bench"), "--json", *on],
    }
    running = {}
    try:
        for i, (name, args) in enumerate(steps.items()):
            home = tmp_path / f"home-{i}"
            home.mkdir()
            running[name] = _veracity(home, audit, *args)
        failed = {}
        for name, proc in running.items():
            try:
                out, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                failed[name] = f"still running after 600 s\n{out[-800:]}\n{err[-800:]}"
                continue
            if proc.returncode != 0:
                failed[name] = f"exit {proc.returncode}\n{out[-800:]}\n{err[-800:]}"
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not failed, "\n\n".join(f"{engine}: {k}:\n{v}" for k, v in failed.items())
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == len(CLAIMS)
    attempts = read_attempts(audit)
    assert not attempts, f"{engine}: connections attempted past loopback:\n{describe(attempts)}"
