"""Mutation testing of the core rules (mutmut): each module's mutants run against that module's unit tests
only.

    python benchmarks/mutation.py                      # every module below, one after another
    python benchmarks/mutation.py pipeline/labels.py   # one (or several) of them
    python benchmarks/mutation.py --list               # the modules and their tests
    python benchmarks/mutation.py web/guard.py --tests tests/unit/test_web_api.py::test_x  # some tests only

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
import fnmatch
import json
import os
import re
import shutil
import signal
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


def _of(test_file: str, *names: str) -> list[str]:
    return [f"{test_file}::{n}" for n in names]


# What a plain run mutates and runs the mutants against where a module's whole test file is too slow per
# mutant (a whole web app per request, spawned workers, Ray imports) or where only some functions are the
# rule the module stands for: the selections of the measurements in BENCHMARKS.md ("Mutation testing of
# the core rules"). ``--only`` / ``--tests`` replace them; ``--whole`` runs every function against the whole
# files.
SELECTION: dict[str, dict[str, list[str]]] = {
    "check/score.py": {"tests": _of("tests/unit/test_check.py", "test_scores", "test_score_boundaries")},
    "web/guard.py": {"tests": _of(
        "tests/unit/test_web_api.py", "test_the_guards_rules_one_by_one",
        "test_the_guard_refuses_a_foreign_host_first_with_the_line_and_hint_a_user_sees",
        "test_the_guard_asks_for_the_token_and_lets_the_open_paths_through",
        "test_the_guard_refuses_cross_site_and_undeclared_types_with_the_line_and_hint_a_user_sees",
        "test_the_guard_limits_bodies_and_hands_the_routes_the_whole_body_once",
        "test_the_guard_adds_the_security_headers_and_counts_each_request_by_its_route")},
    "indexes/embedding.py": {
        "only": ["claim_is_stale", "acquire", "claim_owner", "try_claim", "release", "heartbeat",
                 "embed_claimed_shards"],
        "tests": _of("tests/unit/test_index_embedding.py",  # all of them but the two that fork workers
                     "test_a_live_claim_is_left_alone_and_a_dead_ones_taken_over",
                     "test_a_claim_interrupted_while_it_is_made_leaves_no_ownerless_claim",
                     "test_another_hosts_claim_goes_stale_without_heartbeat",
                     "test_release_keeps_a_claim_someone_took_over",
                     "test_waits_for_shards_held_by_a_live_worker",
                     "test_embed_on_devices_starts_one_worker_per_device",
                     "test_a_build_finished_by_another_process_ends_the_wait",
                     "test_a_claim_names_its_owner_and_an_unreadable_one_names_nobody",
                     "test_a_claim_is_stale_by_its_owner_on_this_host_else_by_its_age",
                     "test_a_claim_is_not_made_for_a_done_shard_nor_kept_when_it_was_done_meanwhile",
                     "test_a_heartbeat_renews_the_claim_and_release_leaves_an_unreadable_one",
                     "test_a_worker_says_its_progress_and_each_shard_and_claims_under_its_device",
                     "test_a_waiting_worker_counts_the_other_workers_shards_and_takes_over_by_its_stale_after",
                     "test_a_claim_holds_its_owner_and_a_takeover_is_tried_twice_at_most")},
    "pipeline/config.py": {
        "only": ["check_*", "ExecutionConfig", "VerifierConfig.__post_init__", "require_ray"],
        "tests": _of("tests/unit/test_config_options.py", "test_the_run_options_are_validated_at_their_edges",
                     "test_each_refusal_says_the_fix_word_for_word_and_each_part_checks_its_own_values")},
    "pipeline/results.py": {
        "only": ["read_done_ids", "ResultWriter", "claim_failure", "RunStats", "check_output",
                 "_check_result_lines", "_params_dict", "_check_manifest", "ServedModel", "RunManifest",
                 "ResultSink"],  # all but the progress bar
        "tests": _of("tests/unit/test_pipeline_runner.py", "test_read_done_ids_edges",
                     "test_check_output_refuses_what_cannot_be_resumed_before_any_call",
                     "test_the_results_sink_manifest_stats_and_progress_lines_say_exactly_what_was_done",
                     "test_results_refusals_and_records_word_for_word", "test_resume_cuts_a_torn_last_line",
                     "test_concurrent_appends_never_interleave",
                     "test_a_results_file_that_cannot_grow_stops_the_run_and_a_rerun_completes",
                     "test_resuming_with_another_method_is_refused",
                     "test_run_writes_one_line_per_claim_with_its_own_trace_and_resumes")},
    "indexes/ann.py": {
        "only": ["auto_factory", "resolve_factory", "factory_facts", "check_factory"],
        "tests": _of("tests/unit/test_index_ann.py",  # the factory's tests, not the index builds
                     "test_auto_factory_by_size",
                     "test_auto_factory_small_corpus_keeps_enough_points_per_list",
                     "test_factory_too_small_a_sample_is_refused_in_one_line",
                     "test_factory_faiss_rejects_is_one_line",
                     "test_build_refuses_a_factory_its_corpus_cannot_train",
                     "test_factory_facts_say_what_training_needs",
                     "test_factory_check_refuses_one_vector_short_of_the_sample_and_says_the_fix",
                     "test_auto_is_resolved_by_corpus_size_whatever_its_case")},
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
    shutil.copytree(REPO / "benchmarks", work / "benchmarks", ignore=shutil.ignore_patterns("results",
                                                                                            "__pycache__"))
    for name in ("README.md", "DEVELOPERS.md"):  # a few tests read them
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "examples", work / "examples")  # test_check.py reads examples/text.txt
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pyproject = re.sub(r"(?ms)^\[tool\.mutmut\].*?(?=^\[|\Z)", "", pyproject)
    pyproject += "\n[tool.mutmut]\n" + "\n".join([
        'source_paths = ["veracity"]',
        f'only_mutate = ["veracity/{module}"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-p", "no:randomly", "-q"]',
        "mutate_only_covered_lines = false",
        'also_copy = ["benchmarks/", "examples/", "README.md", "DEVELOPERS.md"]',
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


def diffs(work: Path, env: dict, module: str, names: list[str]) -> dict[str, str]:
    """Each mutant's diff, all read by one process (a ``mutmut show`` per mutant costs a start-up each)."""
    if not names:
        return {}
    code = ("import json, sys\nfrom mutmut.mutation.diff_apply import get_diff_for_mutant\n"
            "for n in json.load(sys.stdin):\n"
            f"    print(json.dumps([n, get_diff_for_mutant(n, path={('veracity/' + module)!r})]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, input=json.dumps(names),
                         capture_output=True, text=True).stdout
    return dict(json.loads(line) for line in out.splitlines() if line.startswith("["))


def _mutmut_run(work: Path, env: dict, children: int, names: list[str],
                budget: float | None) -> subprocess.Popen:
    """``mutmut run NAMES`` in ``work``; after ``budget`` seconds it is stopped (what it tested counts, the
    rest stays "not checked"). Its output is kept as ``stdout_text``."""
    run = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *names],
                           cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        run.stdout_text, _ = run.communicate(timeout=budget)  # type: ignore[attr-defined]
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.stdout_text, _ = run.communicate()  # type: ignore[attr-defined]
        run.returncode = 0
    return run


def mutant_patterns(module: str, only: list[str]) -> list[str]:
    """mutmut's names of the mutants of the functions, classes (every method) or ``Class.method`` named in
    ``only`` (globs)."""
    prefix = "veracity." + module.replace("/", ".").removesuffix(".py")
    out = []
    for name in only:
        if "." in name:
            cls, method = name.split(".", 1)
            out.append(f"{prefix}.x\u01c1{cls}\u01c1{method}__mutmut_*")
        else:
            out += [f"{prefix}.x_{name}__mutmut_*", f"{prefix}.x\u01c1{name}\u01c1*"]
    return out


def run_module(module: str, tests: list[str], work_root: Path, children: int, only: list[str] | None = None,
               survivors_only: bool = False, resume: bool = False, budget: float | None = None) -> dict:
    """Run the module's mutants (those of the ``only`` functions, or the survivors of the last run with
    ``survivors_only``) and write its report. A survivors-only run re-tests the last run's survivors against
    the tests as they are now and keeps every other result of the last run (a test added cannot let a killed
    mutant survive). With ``resume`` a stopped run in the same ``--work`` folder goes on where it stopped
    (its untested mutants only; counts and seconds add up); "not checked" in a report: never tested.
    ``budget``: seconds the run may take; then it is stopped and reports what it tested."""
    name = module.replace("/", ".").removesuffix(".py")
    work = work_root / name
    previous = None
    if survivors_only:
        path = OUT / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"error: no earlier run of veracity/{module} to take the survivors from\n"
                             f"hint: run `python benchmarks/mutation.py {module}` first")
        previous = json.loads(path.read_text(encoding="utf-8"))
        tests = tests or previous["tests"]
        names = [s["name"] for s in previous["survivors"] if s["status"] in ("survived", "no tests")]
        only = previous.get("only")
        if not names:
            return previous
    else:
        names = mutant_patterns(module, only) if only else []
    # one OpenMP thread: mutmut forks a process per mutant, and a process forked while FAISS's OpenMP pool
    # is up can wait forever on a lock its parent's threads held (seen: a mutant asleep on a futex, using no
    # CPU, so mutmut's CPU-time limit never ended it)
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("CI", None)
    patterns = names
    if resume and (work / "mutants").is_dir() and previous is None:
        # go on where a stopped run of this scratch copy left off: only the mutants it has not tested yet
        names = [n for n, s in results(work, env).items() if s == "not checked"
                 and (not patterns or any(fnmatch.fnmatch(n, p) for p in patterns))] or ["-none-left-"]
    else:
        scratch_copy(work, module, tests)
    t0 = time.time()
    run = None
    if names != ["-none-left-"]:
        run = _mutmut_run(work, env, children, names, budget)
    statuses = results(work, env)
    # mutmut's timeout is wall-clock time: a process paused (SIGSTOP, a suspended job) or starved by a busy
    # machine looks like a mutant that hangs. So every timeout is tested once more, alone; one that times out
    # again hangs the tests for real and counts as caught, one that passes survives.
    timeouts = [n for n, s in statuses.items() if s == "timeout"
                and (not patterns or any(fnmatch.fnmatch(n, p) for p in patterns))]
    retimed = None
    if timeouts:
        left_s = None if budget is None else max(120.0, budget - (time.time() - t0))
        _mutmut_run(work, env, children, timeouts, left_s)
        statuses = results(work, env)
        retimed = {"retested": len(timeouts), "timeout_again": [n for n in timeouts
                                                                 if statuses.get(n) == "timeout"]}
    seconds = round(time.time() - t0, 1)
    if patterns:  # the mutants this run was asked for (mutmut lists the others as not checked)
        statuses = {n: s for n, s in statuses.items() if any(fnmatch.fnmatch(n, p) for p in patterns)}
    if resume:
        seconds += (json.loads((work / "seconds.json").read_text()) if (work / "seconds.json").exists()
                    else 0)
        (work / "seconds.json").write_text(json.dumps(seconds))
    rerun = None
    if previous is not None:
        rerun = {"survivors_retested": len(names), "killed_now": sum(1 for n in names if statuses.get(n) in
                                                                         ("killed", "timeout")),
                 "seconds": seconds, "first_run_seconds": previous["seconds"]}
        old = {s["name"]: s["status"] for s in previous["survivors"]}
        statuses = {**{f"killed-before-{i}": "killed" for i in range(previous["killed"])},
                    **{n: statuses.get(n, st) for n, st in old.items()}}
        seconds = previous["seconds"]
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    killed = counts.get("killed", 0) + counts.get("timeout", 0)  # a mutant that hangs the tests is caught too
    total = sum(counts.values())
    tested = total - counts.get("not checked", 0)  # a stopped run leaves some untested: not in the share
    left = [n for n, s in sorted(statuses.items()) if s not in ("killed", "timeout", "not checked")]
    shown = diffs(work, env, module, [n for n in left if not n.startswith("killed-before-")])
    survivors = [{"name": n, "status": statuses[n], "diff": shown.get(n, "")} for n in left]
    report = {"module": f"veracity/{module}", "tests": tests, "only": only or None, "mutants": total,
              "counts": counts, "killed": killed, "killed_share": round(killed / tested,
                                                                        4) if tested else None,
              "seconds": seconds, "rerun": rerun, "timeouts_retested": retimed,
              "returncode": run.returncode if run else 0,
              "survivors": survivors,
              "log_tail": (run.stdout_text or "")[-1500:] if run and run.returncode else ""}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    return report


def markdown_table() -> str:
    """The killed share per module, from benchmarks/results/mutation/*.json (for BENCHMARKS.md)."""
    rows = ["| module | mutated | unit tests | mutants | not tested | killed | survived | no test reaches | "
            "killed share of tested | run |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for module in MODULES:
        path = OUT / f"{module.replace('/', '.').removesuffix('.py')}.json"
        tests = ", ".join(Path(t).name for t in MODULES[module])
        if not path.exists():
            rows.append(f"| `veracity/{module}` | | {tests} | not run | | | | | | |")
            continue
        r = json.loads(path.read_text(encoding="utf-8"))
        share = "n/a" if r["killed_share"] is None else f"{100 * r['killed_share']:.1f} %"
        scope = ", ".join(f"`{n}`" for n in r["only"]) if r.get("only") else "all"
        run = f"{r['seconds']:.0f} s"
        if r.get("rerun"):
            run += f" + {r['rerun']['seconds']:.0f} s (survivors re-tested)"
        files = sorted({Path(t.split("::", 1)[0]).name for t in r["tests"]})
        picked = sum("::" in t for t in r["tests"])
        tests = ", ".join(files) + (f" ({picked} of its tests)" if picked else "")
        rows.append(f"| `veracity/{module}` | {scope} | {tests} | "
                    f"{r['mutants']} | "
                    f"{r['counts'].get('not checked', 0)} | {r['killed']} | {r['counts'].get('survived', 0)} "
                    f"| {r['counts'].get('no tests', 0)} | {share} | "
                    f"{run} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="modules under veracity/ (default: all of MODULES)")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    ap.add_argument("--only", action="append", default=None, metavar="NAME",
                    help="mutate only these functions or classes of the module (globs; repeatable)")
    ap.add_argument("--survivors", action="store_true",
                    help="re-test only the last run's survivors (after adding tests), keeping its other "
                         "results")
    ap.add_argument("--resume", action="store_true",
                    help="go on with a stopped run in the same --work folder (only its untested mutants)")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="stop a module's run after this long and report the mutants tested (resume with "
                         "--resume)")
    ap.add_argument("--tests", action="append", default=None, metavar="FILE::TEST",
                    help="run the mutants against these of the module's unit tests only (pytest node ids; "
                         "repeatable): a module whose test file is slow is measured on the tests of its "
                         "rules; the report names them, and a narrower selection can only kill fewer "
                         "(default: the module's test files; with --survivors: the last run's selection)")
    ap.add_argument("--whole", action="store_true",
                    help="every function of the module against its whole test files (not the SELECTION "
                         "a plain run uses)")
    ap.add_argument("--list", action="store_true", help="print the modules and their tests, and exit")
    ap.add_argument("--table", action="store_true",
                    help="print the markdown table of the results written so far")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown_table())
        return 0
    if args.list:
        for module, tests in MODULES.items():
            sel = SELECTION.get(module, {})
            print(f"veracity/{module}\t{' '.join(tests)}"
                  + (f"\t(by default: {len(sel['tests'])} of its tests)" if "tests" in sel else "")
                  + (f"\t(by default: {', '.join(sel['only'])})" if "only" in sel else ""))
        return 0
    chosen = args.modules or list(MODULES)
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        print(f"error: not a module of the mutation set: {', '.join(unknown)}", file=sys.stderr)
        print(f"hint: one of {', '.join(MODULES)}", file=sys.stderr)
        return 2
    if args.tests:
        if len(chosen) != 1:
            print("error: --tests narrows the tests of one module, and several were named", file=sys.stderr)
            print("hint: run the modules one at a time", file=sys.stderr)
            return 2
        foreign = [t for t in args.tests if t.split("::", 1)[0] not in MODULES[chosen[0]]]
        if foreign:
            print(f"error: not among the unit tests of veracity/{chosen[0]}: {', '.join(foreign)}",
                  file=sys.stderr)
            print(f"hint: name tests of {', '.join(MODULES[chosen[0]])} (FILE::TEST)", file=sys.stderr)
            return 2
    work_root = args.work or Path(tempfile.mkdtemp(prefix="veracity-mutation-"))
    for module in chosen:
        chosen_by_default = {} if args.whole or args.survivors else SELECTION.get(module, {})
        tests = args.tests or chosen_by_default.get("tests") or (
            [] if args.survivors else [t for t in MODULES[module] if (REPO / t).exists()])
        only = args.only or chosen_by_default.get("only")
        rep = run_module(module, tests, work_root, args.max_children, only, args.survivors, args.resume,
                         args.budget)
        share = "n/a" if rep["killed_share"] is None else f"{100 * rep['killed_share']:.1f} %"
        if rep["killed_share"] is None and rep["returncode"]:  # not one mutant tested: say why
            print(f"error: mutmut's run of veracity/{module} failed before testing any mutant "
                  f"(exit {rep['returncode']}):\n{rep['log_tail']}", file=sys.stderr)
        print(f"veracity/{module}: {rep['killed']} of {rep['mutants']} mutants killed ({share}), "
              f"{len(rep['survivors'])} survive, {rep['seconds']:.0f} s -> "
              f"{OUT / (module.replace('/', '.')[:-3] + '.json')}",
              flush=True)
    if args.work is None:
        shutil.rmtree(work_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
