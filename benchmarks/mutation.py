"""Mutation testing of the core rules (mutmut): each module's mutants run against that module's unit tests only.

    python benchmarks/mutation.py                      # every module below, one after another
    python benchmarks/mutation.py pipeline/labels.py   # one (or several) of them
    python benchmarks/mutation.py --list               # the modules and their tests

A mutant is the module with one small change (a comparison flipped, a constant changed, a string altered, a
call's argument dropped); it is *killed* when one of the module's unit tests fails on it, *survives* when all
pass. For each module the run works in a scratch copy of the repository (``--work``, default a temporary
folder: mutmut writes its ``mutants/`` tree there, never in the checkout), then writes
``benchmarks/results/mutation/NAME.json`` (counts, killed share, and every surviving mutant with its diff) as
soon as that module is done. Mutants that no test of the module reaches count as survivors.

The run is CPU-heavy (the tests of a module run once per mutant, in forked processes): on a shared machine run
it niced and one module at a time. It is not part of CI. Surviving mutants are either killed by a new test or
listed in BENCHMARKS.md ("Mutation testing") with why they are equivalent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "mutation"

# module (under veracity/) -> its unit tests (the tests named after it; each mutant runs against these only)
MODULES: dict[str, list[str]] = {
    "pipeline/quotes.py": ["tests/unit/test_quotes.py"],
    "pipeline/grounding.py": ["tests/unit/test_quotes.py"],
    "pipeline/labels.py": ["tests/unit/test_label_spaces.py"],
    "pipeline/results.py": ["tests/unit/test_pipeline_runner.py"],
    "web/guard.py": ["tests/unit/test_web_api.py"],
    "indexes/ann.py": ["tests/unit/test_index_ann.py"],
    "indexes/embedding.py": ["tests/unit/test_index_embedding.py"],
    "pipeline/config.py": ["tests/unit/test_config_options.py"],
    "check/score.py": ["tests/unit/test_check.py"],
}

STATUS = re.compile(r"^\s*(\S+): (.+)$")


def scratch_copy(work: Path, module: str, tests: list[str]) -> None:
    """A copy of the package, the tests and pyproject.toml with a [tool.mutmut] section for ``module``."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "static")
    shutil.copytree(REPO / "veracity", work / "veracity", ignore=ignore)
    shutil.copytree(REPO / "veracity" / "web" / "static", work / "veracity" / "web" / "static")
    shutil.copytree(REPO / "tests", work / "tests", ignore=ignore)
    shutil.copytree(REPO / "benchmarks", work / "benchmarks", ignore=shutil.ignore_patterns("results", "__pycache__"))
    for name in ("README.md", "DEVELOPERS.md"):  # a few tests read them
        shutil.copy2(REPO / name, work / name)
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pyproject = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", pyproject)
    pyproject += "\n[tool.mutmut]\n" + "\n".join([
        'source_paths = ["veracity"]',
        f'only_mutate = ["veracity/{module}"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-q"]',
        "mutate_only_covered_lines = false",
        'also_copy = ["benchmarks/", "README.md", "DEVELOPERS.md"]',
    ]) + "\n"
    (work / "pyproject.toml").write_text(pyproject, encoding="utf-8")


def results(work: Path, env: dict) -> dict[str, str]:
    """mutant name -> status (killed, survived, no tests, timeout, suspicious, skipped, ...)."""
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, env=env,
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = STATUS.match(line)
        if m and "__mutmut_" in m.group(1):
            found[m.group(1)] = m.group(2).strip()
    return found


def show(work: Path, env: dict, name: str) -> str:
    return subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, env=env, capture_output=True,
                          text=True).stdout.strip()


def run_module(module: str, tests: list[str], work_root: Path, children: int) -> dict:
    name = module.replace("/", ".").removesuffix(".py")
    work = work_root / name
    scratch_copy(work, module, tests)
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CI", None)
    t0 = time.time()
    run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(children)], cwd=work,
                         env=env, capture_output=True, text=True)
    seconds = round(time.time() - t0, 1)
    statuses = results(work, env)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    killed = counts.get("killed", 0) + counts.get("timeout", 0)  # a mutant that hangs the tests is caught too
    total = sum(counts.values())
    survivors = [{"name": n, "status": s, "diff": show(work, env, n)} for n, s in sorted(statuses.items())
                 if s not in ("killed", "timeout")]
    report = {"module": f"veracity/{module}", "tests": tests, "mutants": total, "counts": counts,
              "killed": killed, "killed_share": round(killed / total, 4) if total else None,
              "seconds": seconds, "returncode": run.returncode, "survivors": survivors,
              "log_tail": (run.stdout + run.stderr)[-1500:] if run.returncode else ""}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def markdown_table() -> str:
    """The killed share per module, from benchmarks/results/mutation/*.json (for BENCHMARKS.md)."""
    rows = ["| module | unit tests | mutants | killed | survived | no test reaches | killed share | run |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for module in MODULES:
        path = OUT / f"{module.replace('/', '.').removesuffix('.py')}.json"
        if not path.exists():
            rows.append(f"| `veracity/{module}` | {', '.join(Path(t).name for t in MODULES[module])} | not run | | | | | |")
            continue
        r = json.loads(path.read_text(encoding="utf-8"))
        share = "n/a" if r["killed_share"] is None else f"{100 * r['killed_share']:.1f} %"
        rows.append(f"| `veracity/{module}` | {', '.join(Path(t).name for t in r['tests'])} | {r['mutants']} | "
                    f"{r['killed']} | {r['counts'].get('survived', 0)} | {r['counts'].get('no tests', 0)} | {share} | "
                    f"{r['seconds']:.0f} s |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="modules under veracity/ (default: all of MODULES)")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    ap.add_argument("--list", action="store_true", help="print the modules and their tests, and exit")
    ap.add_argument("--table", action="store_true", help="print the markdown table of the results written so far")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown_table())
        return 0
    if args.list:
        for module, tests in MODULES.items():
            print(f"veracity/{module}\t{' '.join(tests)}")
        return 0
    chosen = args.modules or list(MODULES)
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        print(f"error: not a module of the mutation set: {', '.join(unknown)}", file=sys.stderr)
        print(f"hint: one of {', '.join(MODULES)}", file=sys.stderr)
        return 2
    work_root = args.work or Path(tempfile.mkdtemp(prefix="veracity-mutation-"))
    for module in chosen:
        tests = [t for t in MODULES[module] if (REPO / t).exists()]
        rep = run_module(module, tests, work_root, args.max_children)
        share = "n/a" if rep["killed_share"] is None else f"{100 * rep['killed_share']:.1f} %"
        print(f"veracity/{module}: {rep['killed']} of {rep['mutants']} mutants killed ({share}), "
              f"{len(rep['survivors'])} survive, {rep['seconds']:.0f} s -> {OUT / (module.replace('/', '.')[:-3] + '.json')}",
              flush=True)
    if args.work is None:
        shutil.rmtree(work_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
