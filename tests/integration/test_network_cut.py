"""The main commands with the network cut (issue 40 point 3): inside a network namespace that has only
loopback (``unshare --net``, then ``ip link set lo up``; needs root), each of ``verify "CLAIM"``, a batch
``verify -i -o``, ``check``, ``bench run``, the Ray backend and ``web`` with its page loaded in chromium runs
on llama.cpp, ``verify`` / the batch / ``check`` on vLLM, and ``index build`` on a small dump; every one
must succeed. Every Python process of the run (the commands, the servers, Ray's workers, pip) carries an
audit hook on socket connections and name look-ups (tests/fixtures/netaudit/sitecustomize.py, on
PYTHONPATH) that logs each attempt to reach a non-loopback address with the library that tried; the test
fails on any. What the audit found so far is switched off in veracity/offline.py.

One namespace and one driver process (tests/integration/netcut_steps.py) for all of it; the servers start
inside (a server outside is not reachable: the namespace has its own loopback), on the session's prepared
SmolLM2 (its GGUF on llama.cpp, its safetensors on vLLM in eager mode with a 1 GiB KV cache) and the
session's ten-passage demo-style index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.index import DUMP_PAGES, shared_data_dir, write_wiki_dump
from tests.fixtures.server import LLAMA_MARK, missing, wait_for_llama_server_build
from veracity.config import Settings
from veracity.models.registry import CPU_DEFAULT

pytestmark = [pytest.mark.integration, getattr(pytest.mark, LLAMA_MARK)]

ROOT = Path(__file__).resolve().parents[2]
AUDIT_DIR = ROOT / "tests" / "fixtures" / "netaudit"
CHROMIUM = os.environ.get("VERACITY_CHROMIUM", "/usr/bin/chromium")
CLAIMS = ["The Eiffel Tower is in Berlin.", "Marie Curie won two Nobel Prizes.", "The Nile flows into the Red Sea."]
TEXT = "The Eiffel Tower is in Paris. It was built by Gustave Eiffel's company.\n"


def _preconditions() -> None:
    if os.geteuid() != 0:
        missing("the network-cut test needs root (unshare --net)")
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            missing(f"{tool} not found (util-linux, iproute2)")
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        missing(f"cannot make a network namespace here: {probe.stderr.strip()[:200]}")
    if not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None:
        missing(f"chromium not found at {CHROMIUM}")
    for module, extra in (("ray", "ray"), ("playwright", "dev")):
        try:
            __import__(module)
        except ImportError:
            missing(f"{module} is not installed (pip install '.[{extra}]')")
    if shared_data_dir() is None:
        missing("benchmark data (../shared/data) not found; set VERACITY_DATA_DIR")


def _homes(tmp: Path) -> tuple[Path, Path]:
    """Two homes (one per engine: each its own managed server) whose prepared SmolLM2, its GGUF and the
    llama-server build are the user's (tests never prepare models or build engines themselves)."""
    from veracity.errors import VeracityError
    from veracity.models.prepare import prepared_path, resolve_gguf
    from veracity.serving.engines.llamacpp import LLAMA_CPP

    user = Settings()
    wait_for_llama_server_build()
    try:
        LLAMA_CPP.installed(user)
        gguf = resolve_gguf(user, CPU_DEFAULT)
    except VeracityError as exc:
        missing(f"{exc} ({exc.hint})")
    if prepared_path(user, CPU_DEFAULT) is None:
        missing(f"{CPU_DEFAULT} is not prepared")
    record = json.loads((user.models_dir / "prepared.json").read_text())
    record[CPU_DEFAULT]["gguf"] = str(gguf)
    homes = []
    for name in ("llama", "vllm"):
        home = tmp / name
        (home / "models").mkdir(parents=True)
        (home / "models" / "prepared.json").write_text(json.dumps({CPU_DEFAULT: record[CPU_DEFAULT]}))
        (home / "defaults.json").write_text(json.dumps({"model": CPU_DEFAULT}))
        (home / "engines").symlink_to(user.home / "engines")
        homes.append(home)
    return homes[0], homes[1]


@pytest.mark.timeout(1500)
def test_every_main_command_runs_with_the_network_cut_and_nothing_tries_to_leave(demo_style_index_dir, tmp_path):
    _preconditions()
    llama_home, vllm_home = _homes(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    claims = work / "claims.jsonl"
    claims.write_text("".join(json.dumps({"id": f"c{i}", "claim": c}) + "\n" for i, c in enumerate(CLAIMS)))
    (work / "text.txt").write_text(TEXT)
    dump = write_wiki_dump(work / "enwiki-20190302-pages-articles.xml.bz2", DUMP_PAGES)
    audit = tmp_path / "audit.jsonl"
    results = tmp_path / "results.json"
    plan = {"work": str(work), "results": str(results), "llama_home": str(llama_home), "vllm_home": str(vllm_home),
            "index": str(demo_style_index_dir), "claims": str(claims), "text": str(work / "text.txt"),
            "dump": str(dump), "data_dir": str(shared_data_dir()), "chromium": CHROMIUM,
            "llama_port": 18431, "vllm_port": 18432, "web_port": 18433}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "VERACITY_NET_AUDIT": str(audit),
           "PYTHONPATH": os.pathsep.join([str(AUDIT_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    proc = subprocess.run(["unshare", "--net", sys.executable, str(ROOT / "tests" / "integration" / "netcut_steps.py"),
                           str(tmp_path / "plan.json")], env=env, capture_output=True, text=True, timeout=1400)
    steps = json.loads(results.read_text()) if results.exists() else []
    artifacts = os.environ.get("VERACITY_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(results, Path(artifacts) / "network-cut-steps.json") if results.exists() else None
    table = "\n".join(f"{'ok  ' if s['ok'] else 'FAIL'} {s['seconds']:7.1f} s  {s['step']}" for s in steps)
    print(table)
    failed = [s for s in steps if not s["ok"]]
    assert steps and not failed and proc.returncode == 0, (
        f"{table}\n\n" + "\n\n".join(f"{s['step']}:\n{s['detail']}" for s in failed)
        + f"\n\ndriver exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    assert len(steps) >= 16, table  # every step ran
    attempts = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
    assert not attempts, "connections attempted past loopback:\n" + "\n".join(
        f"{a['library']} ({a['event']} {a['host']}:{a['port']}, pid {a['pid']} {' '.join(a['argv'])})\n    "
        + "\n    ".join(a["stack"][:8]) for a in attempts)
