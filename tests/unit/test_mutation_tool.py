"""benchmarks/mutation.py (mutation testing of the core rules; not run in CI): the tests and functions a
plain run uses are real tests of the module's own files (a renamed test would leave a module measured on
nothing), and a foreign test is refused in one line before any scratch copy is made."""

from __future__ import annotations

import ast
from pathlib import Path

from benchmarks import mutation

REPO = Path(__file__).resolve().parents[2]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _defined(module: str) -> set[str]:
    tree = ast.parse((REPO / "veracity" / module).read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def test_each_default_selection_names_tests_and_functions_that_exist():
    assert set(mutation.SELECTION) <= set(mutation.MODULES)
    for module, selection in mutation.SELECTION.items():
        for node in selection.get("tests", []):
            file, name = node.split("::")
            assert file in mutation.MODULES[module], node  # the module's own unit tests only
            assert name in _functions(REPO / file), node
        names = _defined(module)
        for only in selection.get("only", []):
            head = only.split(".")[0]
            assert head in names or (head.endswith("*") and any(n.startswith(head[:-1]) for n in names)), only


def test_a_test_of_another_file_is_refused_in_one_line(capsys):
    rc = mutation.main(["check/score.py", "--tests", "tests/unit/test_quotes.py::test_x"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and err == [
        "error: not among the unit tests of veracity/check/score.py: tests/unit/test_quotes.py::test_x",
        "hint: name tests of tests/unit/test_check.py (FILE::TEST)"]
    rc = mutation.main(["check/score.py", "web/guard.py", "--tests", "tests/unit/test_check.py::test_scores"])
    assert rc == 2 and capsys.readouterr().err.startswith("error: --tests narrows the tests of one module")
