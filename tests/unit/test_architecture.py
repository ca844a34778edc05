"""The layering rules of the architecture page, checked on the source: no upward imports, methods
independent of each other and of the serving layer, and the README's methods table generated from
the declared roles."""

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
            bad = [m for m in imports_of(path) if m.startswith(("veracity.pipeline", "veracity.bench", "veracity.cli"))]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_readme_methods_table_is_the_generated_one():
    from veracity.cli.methods import methods_markdown_table

    table = methods_markdown_table()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme, ("README's methods table differs from `veracity methods list --markdown`; "
                             "paste that command's output into README.md")
