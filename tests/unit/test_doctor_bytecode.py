"""`doctor`'s bytecode-cache line: a warning with its fix only where nothing compiled is kept and the heavy
imports have no cached form (every command then compiles them again)."""

from __future__ import annotations

import py_compile
import sys

from veracity.doctor import check_bytecode_cache


def _module(tmp_path, monkeypatch, name: str):
    (tmp_path / f"{name}.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return tmp_path / f"{name}.py"


def test_kept_when_python_writes_bytecode(tmp_path, monkeypatch):
    check = check_bytecode_cache(dont_write=False, module=_module(tmp_path, monkeypatch, "vc_kept").stem)
    assert check.ok and "kept" in check.detail


def test_a_warning_with_its_fix_when_nothing_is_written_and_nothing_is_cached(tmp_path, monkeypatch):
    check = check_bytecode_cache(dont_write=True, module=_module(tmp_path, monkeypatch, "vc_bare").stem)
    assert not check.ok and not check.required
    assert "PYTHONDONTWRITEBYTECODE" in check.detail
    assert check.hint.startswith("unset PYTHONDONTWRITEBYTECODE")


def test_no_warning_when_the_imports_were_compiled_at_install(tmp_path, monkeypatch):
    source = _module(tmp_path, monkeypatch, "vc_compiled")
    py_compile.compile(str(source), doraise=True)  # what pip's default (without --no-compile) leaves
    check = check_bytecode_cache(dont_write=True, module="vc_compiled")
    assert check.ok and "vc_compiled" in check.detail
