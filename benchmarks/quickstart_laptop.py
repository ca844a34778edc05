"""The quick start as a new user runs it, measured one stage at a time (issue 39): wall time, peak memory
(the sum over every process that runs with this VERACITY_HOME: the command, the managed server and
anything they start; resident set and proportional set, sampled every 0.2 s), the home's disk use after
the stage, and the load average around it (the machine may be shared). Each stage appends one JSON line
to --out; ``report`` prints the table of every stage recorded so far.

    H=/tmp/fresh-home
    python benchmarks/quickstart_laptop.py --home $H --out qs.jsonl install     # veracity engines install
    llama.cpp
    python benchmarks/quickstart_laptop.py --home $H --out qs.jsonl prepare --model
    qwen2.5-coder-1.5b-instruct
    python benchmarks/quickstart_laptop.py --home $H --out qs.jsonl index       # veracity index build demo
    python benchmarks/quickstart_laptop.py --home $H --out qs.jsonl verify --model qwen2.5-coder-1.5b-instruct
    python benchmarks/quickstart_laptop.py --home $H --out qs.jsonl stop        # serve --stop; nothing left?
    python benchmarks/quickstart_laptop.py --out qs.jsonl report

``verify`` runs the quick start's last command (``verify -i examples/claims.jsonl --method rag`` on the
demo index) with no server running, so it includes the managed server's start; it also records when the
first verdict was written ("first-verdict time") and how many of the five are right.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _with_home(pid: int, home: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"VERACITY_HOME={home}".encode() in env


def _kib(pid: int, path: str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _ancestors() -> set[int]:
    """This process and the ones it runs under (a shell that exported VERACITY_HOME carries it too)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def processes_of(home: str) -> list[int]:
    """The processes running with this VERACITY_HOME, this script and its parents left out."""
    mine = _ancestors()
    return [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) not in mine and _with_home(int(d),
                                                                                                     home)]


class MemorySampler:
    """Peak of the summed RSS and PSS of every process running with this VERACITY_HOME."""

    def __init__(self, home: str, every_s: float = 0.5):
        self.home, self.every_s = home, every_s
        self.peak_rss_kib = self.peak_pss_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._seen: dict[int, bool] = {}  # pid -> runs with this home (a process's environment is fixed)

    def _pids(self) -> list[int]:
        """processes_of() without re-reading the environment of a process already looked at: reading every
        process's environ several times a second cost a fifth of a core, measurable on 2 cores."""
        mine = _ancestors()
        live = [int(d) for d in os.listdir("/proc") if d.isdigit()]
        # only live pids are remembered, so a pid the kernel hands out again is looked at afresh
        self._seen = {pid: self._seen[pid] if pid in self._seen
                      else pid not in mine and _with_home(pid, self.home) for pid in live}
        return [p for p, ours in self._seen.items() if ours]

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = self._pids()
            self.peak_rss_kib = max(self.peak_rss_kib, sum(_kib(p, "status", "VmRSS:") for p in pids))
            self.peak_pss_kib = max(self.peak_pss_kib, sum(_kib(p, "smaps_rollup", "Pss:") for p in pids))
            self._stop.wait(self.every_s)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def disk_mib(path: Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total / 2**20


def run_stage(name: str, cmd: list[str], home: Path, *, watch: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_")}
    env.update(VERACITY_HOME=str(home), COLUMNS="160")
    load_before = os.getloadavg()
    t0 = time.monotonic()
    first = None
    with MemorySampler(str(home)) as mem:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        lines: list[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip())
                print(line, end="", flush=True)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while proc.poll() is None:
            if (watch is not None and first is None and watch.exists()
                    and watch.read_bytes().count(b"\n") >= 1):
                first = time.monotonic() - t0
            time.sleep(0.5)
        reader.join()
    wall = time.monotonic() - t0
    own = resource.getrusage(resource.RUSAGE_SELF)  # this script's own CPU (the sampling): what it cost
    if watch is not None and first is None and watch.exists() and watch.read_bytes().count(b"\n") >= 1:
        first = wall
    return {"stage": name, "command": " ".join(cmd), "exit_code": proc.returncode, "wall_s": round(wall, 1),
            "first_result_s": round(first, 1) if first is not None else None,
            "peak_rss_mib": round(mem.peak_rss_kib / 1024), "peak_pss_mib": round(mem.peak_pss_kib / 1024),
            "home_disk_mib": round(disk_mib(home)), "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "sampler_cpu_s": round(own.ru_utime + own.ru_stime, 1), "tail": lines[-6:], "at": time.time()}


def veracity(*args: str) -> list[str]:
    return [sys.executable, "-m", "veracity", *args]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=["install", "prepare", "index", "verify", "stop", "report"])
    ap.add_argument("--home", type=Path, help="VERACITY_HOME (a fresh one for a first run)")
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one per stage run")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--index", type=Path, help="index folder (default: HOME/indexes/demo)")
    ap.add_argument("--results", type=Path, help="verify's results file (default: HOME/results-MODEL.jsonl)")
    a = ap.parse_args(argv)
    if a.stage == "report":
        return report(a.out)
    if a.home is None:
        ap.error("--home is needed")
    home = a.home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    index = a.index or home / "indexes" / "demo"
    extra: dict = {"model": a.model}
    if a.stage == "install":
        rec = run_stage("engines install llama.cpp", veracity("engines", "install", "llama.cpp"), home)
        info = home / "engines" / "llama.cpp" / "install.json"
        if info.is_file():
            extra["install"] = json.loads(info.read_text()).get("timings")
    elif a.stage == "prepare":
        rec = run_stage(f"models prepare {a.model}", veracity("models", "prepare", a.model), home)
    elif a.stage == "index":
        rec = run_stage("index build demo", veracity("index", "build", "demo", "--out", str(index)), home)
    elif a.stage == "verify":
        out = a.results or home / f"results-{a.model}.jsonl"
        out.unlink(missing_ok=True)
        rec = run_stage(f"verify (rag, {a.model})", veracity(
            "verify", "-i", "examples/claims.jsonl", "-o", str(out), "--method", "rag", "--model", a.model,
            "--index", str(index)), home, watch=out)
        rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        claims = {json.loads(line)["id"]: json.loads(line)
                  for line in (ROOT / "examples" / "claims.jsonl").read_text().splitlines()}
        extra["right"] = sum(1 for r in rows if r.get("label") == claims.get(r.get("id"), {}).get("label"))
        extra["verdicts"] = len(rows)
    else:  # stop
        rec = run_stage("serve --stop", veracity("serve", "--stop"), home)
        time.sleep(1)
        extra["left_running"] = processes_of(str(home))
    rec.update(extra)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(json.dumps({k: v for k, v in rec.items() if k != "tail"}))
    return 0 if rec["exit_code"] == 0 else 1


def report(path: Path) -> int:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print(f"{'stage':<48} {'wall':>8} {'1st':>7} {'peak RSS':>9} {'peak PSS':>9} {'home disk':>10}  load "
          "1-min")
    for r in rows:
        first = f"{r['first_result_s']:.0f} s" if r.get("first_result_s") is not None else ""
        print(f"{r['stage'][:48]:<48} {r['wall_s']:>6.0f} s {first:>7} {r['peak_rss_mib']:>5} MiB "
              f"{r['peak_pss_mib']:>5} MiB {r['home_disk_mib']:>6} MiB  "
              f"{r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}"
              + (f"  {r['right']}/{r['verdicts']} right" if "right" in r else ""))
    print(f"total {sum(r['wall_s'] for r in rows):.0f} s over {len(rows)} stages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
