"""The layering rules of the architecture page, checked on the source: no upward imports, methods
independent of each other and of the serving layer, no import cycles between modules, and the README's
methods table generated from the declared roles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "veracity"


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


@pytest.mark.parametrize("path", modules(PKG / "pipeline"), ids=lambda p: str(p.relative_to(PKG)))
def test_pipeline_does_not_import_bench_or_cli(path):
    bad = [m for m in imports_of(path) if m.startswith(("veracity.bench", "veracity.cli", "veracity.web"))]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("path", modules(PKG / "pipeline" / "methods"), ids=lambda p: str(p.relative_to(PKG)))
def test_methods_do_not_import_serving_or_each_other(path):
    rel = path.relative_to(PKG / "pipeline" / "methods")
    own = rel.parts[0].removesuffix(".py")
    bad = []
    for m in imports_of(path):
        if m.startswith("veracity.serving"):
            bad.append(m)
        if m.startswith("veracity.pipeline.methods.") and own != "__init__":
            other = m.split(".")[3]
            if other not in (own, "base"):
                bad.append(m)
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_indexes_and_models_do_not_import_pipeline_bench_or_cli():
    for folder in (PKG / "indexes", PKG / "models"):
        for path in modules(folder):
            bad = [m for m in imports_of(path) if m.startswith(("veracity.pipeline", "veracity.bench",
                                                                "veracity.cli"))]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_readme_methods_table_is_the_generated_one():
    from veracity.cli.methods import methods_markdown_table

    table = methods_markdown_table()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme, ("README's methods table differs from `veracity methods list --markdown`; "
                             "paste that command's output into README.md")


# -- no import cycles ---------------------------------------------------------------------------------------
def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in modules(PKG)}


def _known(name: str) -> str | None:
    """``name`` or the nearest package of it that is a module of veracity."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(path: Path) -> set[str]:
    """The veracity modules ``path`` imports anywhere in it (top level, inside functions, under
    TYPE_CHECKING: each is a dependency a reader has to follow); ``from pkg import sub`` counts the
    submodule ``sub``; relative imports are resolved."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(filter(None, (_known(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found = sub if sub in MODULES else _known(base)
                if found:
                    out.add(found)
    out.discard(me)
    return out


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _graph() -> dict[str, set[str]]:
    return {name: module_imports(path) for name, path in MODULES.items()}


def test_no_import_cycles():
    cycles = import_cycles(_graph())  # none is allowed: a shared piece goes to a lower module
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_every_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_only_the_client_touches_its_usage_context_variable():
    """Token usage reaches a role's step through the ``usage_sink`` it passes to ``generate`` (Role is the
    only
    caller), not through the client's private context variable (issue 30)."""
    users = []
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "serving" / "client.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and any(a.name == "_current_sink" for a in node.names):
                users.append(str(path.relative_to(ROOT)))
    assert users == []
