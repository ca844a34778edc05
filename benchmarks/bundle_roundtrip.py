"""The air-gapped round trip, measured once (issue 40 point 4).

1. ``veracity bundle create`` here (the connected machine): the wheels of ``veracity[cpu]``, the model, the
   demo index, llama.cpp (source + the binary built here);
2. inside a network namespace with loopback only (``unshare --net``, as root): a fresh virtual
   environment from the same Python and a fresh ``VERACITY_HOME``, then ``python BUNDLE/install.py`` (every
   sha256 checked, ``pip install --no-index`` from the bundle, models / index / engine installed,
   ``veracity doctor``);
3. in the same namespace, the quick start's five claims (``examples/claims.jsonl``, ``--method rag``, the
   demo index from the bundle) on llama.cpp with the model, counted right against their labels.

Every Python process in the namespace carries the network audit of the tests
(tests/fixtures/netaudit/sitecustomize.py): an attempt to reach past loopback is listed in the result.

    flock /tmp/veracity-heavy.lock nice -n 10 python benchmarks/bundle_roundtrip.py \\
        --home /root/.veracity --model qwen2.5-coder-1.5b-instruct --also smollm2-135m-instruct \\
        --index /root/.veracity/indexes/demo \\
        --bundle /work/bundles/roundtrip --work /work/bundles/roundtrip-target \\
        --json benchmarks/results/bundle-roundtrip.json

The bundle and the target folders are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "tests" / "fixtures" / "netaudit"

INSIDE = """
set -euo pipefail
ip link set lo up
test "$(ip -o link | wc -l)" = 1   # loopback only
t0=$(date +%s)
"$BASE_PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" "$BUNDLE/install.py"
t1=$(date +%s)
echo "INSTALL_SECONDS $((t1 - t0))"
V="$WORK/venv/bin/veracity"
"$V" serve --engine llama.cpp --model "$MODEL" --detach --port 18501
t2=$(date +%s)
"$V" verify -i "$CLAIMS" -o "$WORK/results.jsonl" --method rag --model "$MODEL" \
--index "$VERACITY_HOME/indexes/$INDEX_NAME" || true
t3=$(date +%s)
echo "VERIFY_SECONDS $((t3 - t2))"
"$V" serve --stop
"""


def human(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default=str(Path.home() / ".veracity"),
                    help="the connected machine's VERACITY_HOME")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct", help="the model the five claims run on")
    ap.add_argument("--also", action="append", default=[], metavar="MODEL",
                    help="another model to carry (e.g. the prepared smollm2-135m-instruct, which doctor "
                         "counts "
                         "as a prepared model when --model is here as its GGUF alone)")
    ap.add_argument("--index", default=str(Path.home() / ".veracity" / "indexes" / "demo"))
    ap.add_argument("--bundle", default="/work/bundles/roundtrip")
    ap.add_argument("--work", default="/work/bundles/roundtrip-target")
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--keep", action="store_true", help="keep the bundle and the target folders")
    ap.add_argument("--reuse-bundle", action="store_true",
                    help="the bundle was made already (its create time is the one its manifest records): "
                         "only the offline half runs")
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("error: the round trip needs root and unshare (a network namespace)", file=sys.stderr)
        return 2
    bundle, work = Path(args.bundle), Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result: dict = {"model": args.model, "index": args.index, "bundle": str(bundle)}

    env = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_")}
    env["VERACITY_HOME"] = args.home
    env["PYTHONPATH"] = str(ROOT)
    t0 = time.monotonic()
    models = [a for m in [*args.also, args.model] for a in ("--model", m)]
    if args.reuse_bundle and (bundle / "manifest.json").exists():
        create = subprocess.CompletedProcess([], 0, "", "")
    else:
        create = subprocess.run([sys.executable, "-m", "veracity", "bundle", "create", str(bundle), *models,
                                 "--index", args.index], env=env, text=True, capture_output=True)
    result["create_seconds"] = round(time.monotonic() - t0, 1)
    print(create.stdout[-3000:], create.stderr[-2000:], sep="\n")
    if create.returncode != 0:
        result["error"] = "bundle create failed"
        return _done(result, args)
    manifest = json.loads((bundle / "manifest.json").read_text())
    result["bundle_bytes"] = manifest["total_bytes"]
    result["bundle_files"] = len(manifest["files"])
    parts: dict[str, int] = {}
    for rel, meta in manifest["files"].items():
        key = rel.split("/", 1)[0] if "/" in rel else "install.py"
        parts[key] = parts.get(key, 0) + meta["size"]
    result["bundle_parts_bytes"] = parts
    result["create_timings"] = manifest["timings"]
    if args.reuse_bundle:
        result["create_seconds"] = manifest["timings"]["total"]

    audit = work / "audit.jsonl"
    inside_env = {k: v for k, v in os.environ.items() if not k.startswith(("VERACITY_", "PIP_",
                                                                           "VIRTUAL_ENV"))}
    inside_env.update(VERACITY_HOME=str(work / "home"), BUNDLE=str(bundle), WORK=str(work), MODEL=args.model,
                      CLAIMS=str(ROOT / "examples" / "claims.jsonl"),
                      INDEX_NAME=Path(args.index).resolve().name,
                      BASE_PYTHON=getattr(sys, "_base_executable", sys.executable), PYTHONPATH=str(AUDIT),
                      VERACITY_NET_AUDIT=str(audit), COLUMNS="200", NO_COLOR="1",
                      PATH=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                           if "/.venv/" not in p))
    t0 = time.monotonic()
    inside = subprocess.run(["unshare", "--net", "bash", "-c", INSIDE], env=inside_env, text=True,
                            capture_output=True, cwd=work)
    result["namespace_seconds"] = round(time.monotonic() - t0, 1)
    out = inside.stdout + inside.stderr
    print(out[-6000:])
    for line in out.splitlines():
        if line.startswith("INSTALL_SECONDS "):
            result["install_seconds"] = round(float(line.split()[1]), 1)
        if line.startswith("VERIFY_SECONDS "):
            result["verify_seconds"] = round(float(line.split()[1]), 1)
    result["doctor_all_good"] = "all good" in out
    labels = {json.loads(ln)["id"]: json.loads(ln)["label"]
              for ln in (ROOT / "examples" / "claims.jsonl").read_text().splitlines() if ln.strip()}
    got = {}
    if (work / "results.jsonl").exists():
        for ln in (work / "results.jsonl").read_text().splitlines():
            if ln.strip():
                rec = json.loads(ln)
                got[rec["id"]] = rec.get("label")
    result["verdicts"] = got
    result["right"] = sum(1 for k, v in labels.items() if got.get(k) == v)
    result["claims"] = len(labels)
    attempts = [json.loads(ln) for ln in audit.read_text().splitlines()] if audit.exists() else []
    result["network_attempts"] = [{k: a[k] for k in ("library", "event", "host", "port",
                                                     "argv")} for a in attempts]
    result["namespace_exit"] = inside.returncode
    return _done(result, args)


def _done(result: dict, args) -> int:
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
        shutil.rmtree(args.bundle, ignore_errors=True)
    ok = result.get("namespace_exit") == 0 and result.get("right") == result.get("claims")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
