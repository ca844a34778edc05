"""Ctrl-C plumbing (issue 29 point 1) without real processes: the JVM never takes the process's signals
(``-Xrs``, and every way into pyserini goes through ``ensure_jvm``), and an interrupt is one line and exit
130 saying what the command kept. Real processes interrupted at every stage:
tests/integration/test_interrupts.py."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import click
import pytest

from veracity.cli import interrupt
from veracity.cli._common import run_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _sigint_restored():
    """exit_interrupted ignores a second Ctrl-C while the process ends; here the process goes on."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)
    interrupt.reset()


def test_the_jvm_is_started_with_reduced_signal_use(monkeypatch):
    import veracity.indexes.java as java

    seen: dict = {}
    config = types.SimpleNamespace(vm_running=False,
                                   get_options=lambda: ["--add-modules=jdk.incubator.vector"],
                                   add_classpath=lambda *a: None,
                                   set_options=lambda *o: seen.setdefault("opts", o))
    monkeypatch.setitem(sys.modules, "jnius_config", config)
    monkeypatch.setitem(sys.modules, "jnius", types.SimpleNamespace(autoclass=lambda name: None))
    monkeypatch.setattr(java, "_started", False)
    monkeypatch.setattr(java, "find_java_home", lambda: Path("/nonexistent-java"))
    monkeypatch.setattr(java, "java_version", lambda home: 21)
    monkeypatch.setattr(java, "anserini_jar", lambda: "anserini.jar")
    monkeypatch.setenv("JAVA_HOME", "/nonexistent-java")
    java.ensure_jvm()
    assert "-Xrs" in seen["opts"]  # Java installs no SIGINT / SIGTERM handler: Ctrl-C stays Python's
    assert not any("jdk.incubator.vector" in o for o in seen["opts"])


def test_every_way_into_pyserini_starts_the_jvm_through_ensure_jvm():
    """A module that imports pyserini or jnius must call ensure_jvm before it (else the JVM would start with
    pyserini's own options, without -Xrs)."""
    offenders = []
    for path in (ROOT / "veracity").rglob("*.py"):
        if path.name == "java.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            body = getattr(fn, "body", None)
            if not isinstance(body, list):
                continue
            called = False
            for stmt in body:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ensure_jvm":
                        called = True
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    names = [stmt.module or ""] if isinstance(stmt,
                                                              ast.ImportFrom) else [a.name
                                                                                    for a in stmt.names]
                    if any(n.split(".")[0] in ("pyserini", "jnius",
                                               "jnius_config") for n in names) and not called:
                        offenders.append(f"{path.relative_to(ROOT)}:{stmt.lineno}")
    assert not offenders, offenders


@click.command()
@click.option("--stage", default="none")
def _long(stage: str) -> None:
    if stage != "none":
        interrupt.keep(lambda: f"{stage} kept in /some/where; run the same command again to resume")
    raise KeyboardInterrupt


@click.command()
def _broken_describer() -> None:
    interrupt.keep(lambda: 1 / 0)
    raise KeyboardInterrupt


@pytest.mark.parametrize("args, said", [
    (["--stage", "3 shards"],
     "interrupted: 3 shards kept in /some/where; run the same command again to resume"),
    ([], "interrupted: " + interrupt.DEFAULT),
])
def test_an_interrupt_is_exit_130_and_one_line_saying_what_was_kept(args, said, capsys):
    group = click.Group("veracity", commands={"long": _long})
    with pytest.raises(SystemExit) as exit_:
        run_main(group, ["long", *args])
    assert exit_.value.code == 130
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err == [said]


def test_a_describer_that_fails_still_gives_the_one_line(capsys):
    group = click.Group("veracity", commands={"broken": _broken_describer})
    with pytest.raises(SystemExit) as exit_:
        run_main(group, ["broken"])
    assert exit_.value.code == 130
    assert capsys.readouterr().err.strip() == "interrupted: " + interrupt.DEFAULT


def test_a_long_line_is_not_wrapped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    interrupt.keep("x " * 80 + "end")
    with pytest.raises(SystemExit):
        interrupt.exit_interrupted()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_index_build_line_names_what_each_stage_keeps(tmp_path):
    from veracity.cli.index import _build_kept

    out = tmp_path / "idx"
    assert "nothing kept yet" in _build_kept(out, "passages")
    shards = tmp_path / ".idx.building" / "dense-shards"
    shards.mkdir(parents=True)
    for i in range(3):
        (shards / f"shard-{i:05d}.npy").write_bytes(b"x")
    (shards / "shard-00003.tmp.npy").write_bytes(b"half")  # a shard being written is not counted
    line = _build_kept(out, "embed")
    assert "3 embedding shard(s) are kept in" in line and "resume embedding" in line
    assert "all 3 embedding shards" in _build_kept(out, "faiss")
