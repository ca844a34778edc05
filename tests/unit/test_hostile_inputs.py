"""The hostile-input corpus: what an attacker (or an unlucky user) can hand every command that reads user
input — devices, endless pipes, giant lines, NUL bytes, mixed encodings, terminal escapes, rich markup,
hostile HTML/JS, foreign folders — and what each command must do with it: refuse it with one ``error:`` line
and a ``hint:`` line after a bounded read (no MemoryError, no OOM kill, no traceback), or take it and print it
escaped. Inputs that are refused before any model call run with an unreachable endpoint (port 9 of
loopback); inputs that are accepted run against the scripted model. No test here needs a model or a network.

The commands covered: ``verify`` (a claim), ``verify -i``, ``check`` (a file, stdin, ``-i``), ``index build``
(from files, and ``--overwrite`` of a foreign folder), ``bench run --data`` (dataset files), and the web API
(claims, texts, job bodies, sign-in tokens)."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
DEAD = "http://127.0.0.1:9/v1"
MEMORY_CAP = 3 << 30  # an unbounded read hits this at once (MemoryError) instead of the machine's OOM killer

ESCAPES = "The sky \x1b]0;PWNED\x07\x1b[2J is blue."
MARKUP = 'Chemistry "[for] the discovery [link=https://evil.example/]click[/link]'
HTML_JS = '</script><script>alert(1)</script><img src=x onerror=alert(2)> "quotes" & <b>bold</b>'
NUL = "Paris is \x00 in France."
# bytes that are not one encoding: UTF-8, then Latin-1, then a lone continuation byte, then UTF-16 with a BOM
MIXED = ("Zürich is in Switzerland. ".encode() + "Zürich".encode("latin-1") + b" \x80 "
         + "Zürich".encode("utf-16"))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def veracity(args: list[str], tmp_path: Path, stdin=None, input: bytes | None = None, timeout: float = 60):
    """``python -m veracity ARGS`` in a fresh process with a memory cap, an empty home and a dead endpoint."""
    env = {**os.environ, "VERACITY_HOME": str(tmp_path / "home"), "VERACITY_DATA_DIR": str(tmp_path / "data"),
           "VERACITY_ENDPOINT": DEAD, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("VERACITY_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "veracity", *args], cwd=tmp_path, env=env, stdin=stdin,
                          input=input, capture_output=True, timeout=timeout, preexec_fn=_limit_memory)


class Ran:
    def __init__(self, returncode: int, stdout: bytes, stderr: bytes):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(args: list[str], tmp_path: Path, input=None) -> Ran:
    """``veracity ARGS`` in this process, through the command's error policy (``run_main``), with click's
    runner isolating stdin (``input``: bytes, or an open pipe or file), stdout, stderr and the environment
    (an empty home, the dead endpoint)."""
    from click.testing import CliRunner

    from veracity.cli import _register
    from veracity.cli import cli as group
    from veracity.cli._common import run_main

    _register()
    env = {"VERACITY_HOME": str(tmp_path / "home"), "VERACITY_DATA_DIR": str(tmp_path / "data"),
           "VERACITY_ENDPOINT": DEAD, "COLUMNS": "200"}
    code = 0
    with CliRunner().isolation(input=input, env=env) as streams:
        try:
            run_main(group, args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Ran(code, streams[0].getvalue(), streams[1].getvalue())


def one_error(res, match: str) -> str:
    """The run failed with exactly one ``error:`` line (matching ``match``) and one ``hint:`` line."""
    err = res.stderr.decode("utf-8", "replace")
    lines = [x for x in err.splitlines() if x.strip()]
    assert res.returncode not in (0, 137, -9), err
    assert "Traceback" not in err and "MemoryError" not in err and "this is a bug" not in err, err
    errors = [x for x in lines if x.startswith("error:")]
    assert len(errors) == 1 and match in errors[0], err
    assert any(x.startswith("hint:") for x in lines), err
    return errors[0]


# -- devices and endless pipes: read with a bound ---------------------------------------------------------
def test_check_reads_a_device_with_a_bound(tmp_path):
    """The issue's reproduction, in its own process under a memory cap: before the bound, reading /dev/zero
    ended in a MemoryError ("this is a bug") or the OOM killer."""
    one_error(veracity(["check", "/dev/zero"], tmp_path), "binary")


def test_check_reads_an_endless_pipe_with_a_bound_and_max_chars_applies_while_reading(tmp_path):
    yes = subprocess.Popen(["yes", "The sky is blue."], stdout=subprocess.PIPE)
    try:
        line = one_error(cli(["check", "-"], tmp_path, input=yes.stdout), "over --max-chars 20,000")
        assert "more than 20,000 characters" in line
        one_error(cli(["check", f"/dev/fd/{yes.stdout.fileno()}", "--max-chars", "50"], tmp_path),
                  "over --max-chars 50")  # the pipe as a path (like bash's <(yes ...))
    finally:
        yes.kill()
        yes.wait()


def test_check_counts_max_chars_in_characters_not_bytes(tmp_path):
    """The bound is on bytes while reading, but never refuses a text that is within --max-chars characters."""
    f = tmp_path / "t.txt"
    f.write_text("東京は日本の首都です。" * 10, encoding="utf-8")  # 110 characters, 330 bytes
    one_error(cli(["check", str(f), "--max-chars", "109"], tmp_path), "over --max-chars 109")
    res = cli(["check", str(f), "--max-chars", "110", "--method", "direct"], tmp_path)
    # read; the dead endpoint fails
    assert "max-chars" not in res.stderr.decode() and b"127.0.0.1:9" in res.stderr


def test_verify_i_reads_a_device_and_an_endless_pipe_with_a_bound(tmp_path):
    out = tmp_path / "r.jsonl"
    one_error(cli(["verify", "-i", "/dev/zero", "-o", str(out), "--method", "direct"], tmp_path),
              "without a line break")
    yes = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        one_error(cli(["verify", "-i", f"/dev/fd/{yes.stdout.fileno()}", "-o", str(out), "--method",
                       "direct"],
                      tmp_path), "over 1,000 bad lines")
    finally:
        yes.kill()
        yes.wait()
    assert not out.exists()


def test_a_giant_line_is_one_rejected_line_and_the_rest_of_the_file_runs(tmp_path):
    from veracity.pipeline.claims import read_claims_jsonl
    from veracity.reading import MAX_LINE_BYTES

    f = tmp_path / "claims.jsonl"
    with open(f, "wb") as fh:
        fh.write(b'{"id": "a", "claim": "Paris is in France."}\n')
        fh.write(b'{"id": "big", "claim": "' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n')
        fh.write(b'{"id": "b", "claim": "Berlin is in Germany."}\n')
    loaded = read_claims_jsonl(f)
    assert [c.id for c in loaded.claims] == ["a", "b"]
    assert [(r.line, r.reason) for r in loaded.rejected] == [(2, "line over 8 MiB")]


# -- foreign folders: --overwrite replaces only what veracity can prove it built ---------------------------
def _corpus(tmp_path: Path) -> Path:
    src = tmp_path / "corpus.jsonl"
    src.write_text("".join(json.dumps({"title": f"T{i}",
                                       "text": f"Passage {i} is about the town of T{i}."}) + "\n"
                           for i in range(3)), encoding="utf-8")
    return src


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


OURS_KEY = "0" * 64  # shaped like a build key (sha256 hex)


@pytest.mark.parametrize("name,files", [
    # issue 42's recipe: its own manifest, other files, and a build-state.json whose key is any string
    ("own-manifest-and-state", {"manifest.json": '{"kind": "photo-album", "format_version": 1}',
                                "build-state.json": '{"key": "anything"}', "keep.txt": "precious"}),
    # a build-state.json alone proves nothing, even one shaped like ours
    ("state-alone", {"build-state.json": json.dumps({"key": OURS_KEY}), "keep.txt": "precious"}),
    ("state-and-no-manifest", {"build-state.json": json.dumps({"key": OURS_KEY, "passages_done": True}),
                               "passages.sqlite": "not a database"}),
])
def test_overwrite_refuses_a_folder_veracity_cannot_prove_it_built(tmp_path, name, files):
    from veracity.errors import IndexDirError
    from veracity.indexes.build import BuildOptions, build_dir_for, build_index, resolve_sources

    out = tmp_path / name
    out.mkdir()
    for rel, text in files.items():
        (out / rel).write_text(text)
    before = _tree(out)
    with pytest.raises(IndexDirError, match="is not an index veracity built"):
        build_index(resolve_sources([_corpus(tmp_path)]), out, BuildOptions(dense=False, overwrite=True))
    assert _tree(out) == before and not build_dir_for(out.resolve()).exists()
    res = cli(["index", "build", str(tmp_path / "corpus.jsonl"), "--out", str(out), "--overwrite",
               "--no-dense"],
              tmp_path)
    one_error(res, "is not an index veracity built")
    assert _tree(out) == before


def test_overwrite_keeps_a_building_folder_that_holds_anything_a_build_does_not_write(tmp_path):
    from veracity.errors import IndexDirError
    from veracity.indexes.build import BuildOptions, build_dir_for, build_index, resolve_sources

    out = tmp_path / "idx"
    work = build_dir_for(out.resolve())
    work.mkdir()
    (work / "build-state.json").write_text(json.dumps({"key": OURS_KEY}))
    (work / "thesis.tex").write_text("precious")
    with pytest.raises(IndexDirError, match=r"not a partial build of veracity's \(it holds thesis.tex"):
        build_index(resolve_sources([_corpus(tmp_path)]), out, BuildOptions(dense=False, overwrite=True))
    assert (work / "thesis.tex").read_text() == "precious"
    (work / "build-state.json").write_text('{"key": "anything"}')
    (work / "thesis.tex").unlink()
    with pytest.raises(IndexDirError, match="not a veracity build state"):
        build_index(resolve_sources([_corpus(tmp_path)]), out, BuildOptions(dense=False, overwrite=True))
    assert work.is_dir()


def test_overwrite_replaces_an_index_and_a_half_built_folder_of_ours(tmp_path):
    from veracity.indexes.build import BuildOptions, build_dir_for, build_index, resolve_sources

    out = tmp_path / "idx"
    src = resolve_sources([_corpus(tmp_path)])
    out.mkdir()  # an index of ours, as far as --overwrite can tell: our manifest's kind and format
    from veracity.indexes.manifest import MANIFEST_KIND

    (out / "manifest.json").write_text(json.dumps({"kind": MANIFEST_KIND, "format_version": 1}))
    (out / "passages.sqlite").write_bytes(b"old")
    work = build_dir_for(out.resolve())
    work.mkdir()  # a half-built folder of ours: our state (another build's key) and what a build writes
    (work / "build-state.json").write_text(json.dumps({"key": "f" * 64}))
    (work / "passages.sqlite").write_bytes(b"")
    (work / "dense-shards").mkdir()
    m = build_index(src, out, BuildOptions(dense=False, overwrite=True, limit=2))
    assert m["passages"] == 2 and not work.exists()


# -- a prebuilt BM25 index that does not fit: nothing left behind, a hint that names the fix ---------------
def test_an_unopenable_prebuilt_bm25_index_is_one_line_that_names_the_fix(tmp_path):
    from veracity.indexes.build import build_dir_for

    junk = tmp_path / "lucene"
    junk.mkdir()
    (junk / "segments_1").write_text("not a Lucene index")
    out = tmp_path / "idx"
    res = cli(["index", "build", str(_corpus(tmp_path)), "--out", str(out), "--no-dense", "--bm25-prebuilt",
               str(junk)], tmp_path)
    line = one_error(res, "--bm25-prebuilt")
    err = res.stderr.decode()
    reason = line.rsplit(" (", 1)[1]  # the Java exception in a few words, whole: no package, stack or cut
    assert re.fullmatch(r"[A-Z]\w+Exception: [\w* ,'-]+\)", reason), line
    assert "org.apache" not in err and "drop --bm25-prebuilt" in err and "rebuild" not in err
    assert not out.exists() and not build_dir_for(out.resolve()).exists()


def test_a_prebuilt_bm25_index_of_another_corpus_leaves_nothing_behind(tmp_path):
    from veracity.errors import IndexDirError
    from veracity.indexes.build import BuildOptions, build_dir_for, build_index, resolve_sources
    from veracity.indexes.java import ensure_jvm

    ensure_jvm()
    from pyserini.index.lucene import LuceneIndexer

    other = tmp_path / "other-lucene"
    indexer = LuceneIndexer(args=["-index", str(other), "-storeRaw"], threads=1)
    for i in range(2):  # 2 documents, the corpus has 3 passages
        indexer.add_doc_dict({"id": str(i + 1), "contents": f'"Other{i}"\nSomething else entirely.'})
    indexer.close()
    out = tmp_path / "idx"
    with pytest.raises(IndexDirError, match="holds 2 documents, the corpus 3 passages"):
        build_index(resolve_sources([_corpus(tmp_path)]), out, BuildOptions(dense=False, bm25_prebuilt=other))
    assert not out.exists() and not build_dir_for(out.resolve()).exists()


# -- web tokens: enough different characters and bits, no pattern; a generator ----------------------------
@pytest.mark.parametrize("token,match", [
    ("aaaaaaaaaaaaaaaa", "1 different characters"),  # issue 42: only the length was checked
    ("abababababababababababab", "2 different characters"),
    ("0000000011111111", "2 different characters"),
    ("abcdefghijklmnop", "simple pattern"),
    ("a1b2c3d4e5f6g7h8", "simple pattern"),
    ("0123456789012345", "at most 53 bits"),
    ("zyxwvutsrqponmlkjihg", "simple pattern"),
])
def test_a_guessable_web_token_is_refused_before_anything_starts(tmp_path, token, match):
    res = cli(["web", "--host", "0.0.0.0", "--endpoint", DEAD, "--token", token], tmp_path)
    one_error(res, match)
    assert "--new-token" in res.stderr.decode()


def test_web_new_token_prints_a_token_that_passes_and_differs_each_time(tmp_path):
    from veracity.web.common import check_token, token_bits

    tokens = set()
    for _ in range(3):
        res = cli(["web", "--new-token"], tmp_path)
        assert res.returncode == 0 and res.stderr == b""
        token = res.stdout.decode().strip()
        check_token(token)
        assert len(token) >= 43 and token_bits(token) >= 256
        tokens.add(token)
    assert len(tokens) == 3
    # typical hand-made / openssl
    for fine in ("s3cret-token-0123456789", "9f86d081884c7d659a2feaa0c55ad015"):
        check_token(fine)


# -- the corpus against the readers: NUL, mixed encodings, escapes, markup, hostile HTML/JS ----------------
HOSTILE_TEXTS = {  # name -> (bytes of a text file, what `check` says: an error fragment, or None: accepted)
    "nul": (NUL.encode(), "binary"),
    "mixed-encodings": (MIXED, "binary"),  # its UTF-16 part holds NUL bytes
    "latin-1": ("Z\u00fcrich is in Switzerland.".encode("latin-1"), "not UTF-8"),
    "utf16-with-bom": ("Paris is in France.".encode("utf-16"), "binary"),  # UTF-16 is full of NUL bytes
    "lone-continuation-byte": (b"Paris \x80 is in France.", "not UTF-8"),
    "escapes": (ESCAPES.encode(), None),
    "markup": (MARKUP.encode(), None),
    "html-js": (HTML_JS.encode(), None),
}


@pytest.fixture
def scripted(monkeypatch):
    """verify and check on the scripted model, which repeats the claim back in its explanation."""
    from tests.unit.scripted_llm import ScriptedLLM, script_every_verifier

    def judge(m):
        return {"explanation": "Repeating: " + m[-1]["content"][-200:], "label": "NOT_ENOUGH_INFO"}

    llm = ScriptedLLM({"direct.judge": judge,
                       "check.extractor": lambda m: {"claims": [m[-1]["content"][-150:]]},
                       "check.worthiness": lambda m: {"kind": "checkable_statement"}})
    script_every_verifier(monkeypatch, llm)
    return llm


def _printable(res: Ran) -> None:
    """What reached stdout / stderr holds no raw control character but newline and tab."""
    for stream in (res.stdout.decode("utf-8"), res.stderr.decode("utf-8")):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", stream), stream


@pytest.mark.parametrize("name", HOSTILE_TEXTS)
def test_check_on_each_hostile_text(scripted, tmp_path, name):
    data, refused = HOSTILE_TEXTS[name]
    f = tmp_path / "t.txt"
    f.write_bytes(data)
    res = cli(["check", str(f), "--method", "direct"], tmp_path)
    if refused:
        one_error(res, refused)
        assert scripted.calls == []  # refused before any model call
    else:
        assert res.returncode == 0, res.stderr
    _printable(res)
    docs = tmp_path / "docs.jsonl"  # the same text as a line of check -i
    docs.write_bytes(b'{"id": "ok", "text": "Paris is in France."}\n{"id": "h", "text": "'
                     + json.dumps(data.decode("utf-8", "surrogateescape"))[1:-1].encode("utf-8",
                                                                                        "surrogateescape")
                     + b'"}\n')
    res = cli(["check", "-i", str(docs), "-o", str(tmp_path / "out.jsonl"), "--method", "direct"], tmp_path)
    _printable(res)
    assert res.returncode == 0, res.stderr  # a bad line is skipped and named; the good text runs
    assert b"texts written" in res.stdout
    if b"\x00" in data:  # an escaped NUL in the JSON: that text is skipped as binary
        assert b"docs.jsonl:2: binary data" in res.stderr
    raw = tmp_path / "raw.jsonl"  # a raw NUL byte in the file: not a JSONL file at all
    raw.write_bytes(b'{"id": "ok", "text": "Paris is in France."}\n{"id": "h", "text": "a\x00b"}\n')
    one_error(cli(["check", "-i", str(raw), "-o", str(tmp_path / "out2.jsonl"), "--method", "direct"],
                  tmp_path),
              "binary")


@pytest.mark.parametrize("name", HOSTILE_TEXTS)
def test_verify_i_on_each_hostile_line(scripted, tmp_path, name):
    data, _ = HOSTILE_TEXTS[name]
    src = tmp_path / "claims.jsonl"
    src.write_bytes(b'{"id": "ok", "claim": "Paris is in France."}\n{"id": "h", "claim": "'
                    + data.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"}\n')
    res = cli(["verify", "-i", str(src), "-o", str(tmp_path / "r.jsonl"), "--method", "direct"], tmp_path)
    assert res.returncode == 0, res.stderr  # a bad line is skipped and named; the good one runs
    _printable(res)
    out = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()]
    assert "ok" in [r["id"] for r in out]
    if b"\x00" in data or name in ("mixed-encodings", "latin-1", "lone-continuation-byte"):
        assert b"claims.jsonl:2:" in res.stderr  # NUL bytes, bad UTF-8: not JSON / not UTF-8, skipped


def test_a_hostile_text_in_the_report_stays_text(scripted, tmp_path):
    f = tmp_path / "t.txt"
    f.write_text(HTML_JS + " " + MARKUP, encoding="utf-8")
    report = tmp_path / "r.html"
    res = cli(["check", str(f), "--method", "direct", "--report", str(report)], tmp_path)
    assert res.returncode == 0, res.stderr
    page = report.read_text(encoding="utf-8")
    # inserted as text, never as markup
    assert "<script>alert(1)" not in page and "onerror=alert(2)>" not in page


@pytest.mark.parametrize("content,match", [
    (b"\x00\x01binary", "invalid JSON"),
    ("Z\u00fcrich".encode("latin-1") + b"[", "binary data"),
    (b"\xff\xfe" + '[{"claim": "x"}]'.encode("utf-16-le"), "binary data"),
])
def test_a_hostile_dataset_file_is_one_line(tmp_path, content, match):
    from veracity.bench.datasets import load_dataset
    from veracity.errors import DataError

    (tmp_path / "hover").mkdir()
    (tmp_path / "hover" / "hover_dev_release_v1.1.json").write_bytes(content)
    with pytest.raises(DataError, match=match):
        load_dataset("hover", tmp_path)


def test_a_dataset_file_larger_than_any_benchmark_is_refused_before_it_is_read(tmp_path):
    from veracity.bench.datasets import load_dataset
    from veracity.errors import DataError

    (tmp_path / "hover").mkdir()
    with open(tmp_path / "hover" / "hover_dev_release_v1.1.json", "wb") as f:
        f.truncate(5 << 30)  # sparse: 5 GiB of NUL bytes that take no disk
    with pytest.raises(DataError, match="5.0 GiB, larger than any"):
        load_dataset("hover", tmp_path)


def test_an_index_source_with_nul_mixed_encodings_and_a_giant_line_is_one_line(tmp_path):
    from veracity.errors import VeracityError
    from veracity.indexes.build import BuildOptions, build_index, resolve_sources

    src = tmp_path / "corpus.jsonl"
    src.write_bytes(b'{"title": "A", "text": "' + MIXED.replace(b"\x00", b"") + b'"}\n')
    with pytest.raises(VeracityError, match=r"corpus.jsonl"):
        build_index(resolve_sources([src]), tmp_path / "idx", BuildOptions(dense=False, bm25=False))
    assert not (tmp_path / "idx").exists()
    res = cli(["index", "build", str(src), "--out", str(tmp_path / "idx"), "--no-dense"], tmp_path)
    one_error(res, "corpus.jsonl")
    _printable(res)


def test_the_web_api_answers_hostile_bodies_with_one_line_before_any_model_call(tmp_path):
    from fastapi.testclient import TestClient

    from tests.unit.scripted_llm import ScriptedLLM
    from veracity.web.app import WebConfig, asgi

    llm = ScriptedLLM({"direct.judge": lambda m: {"explanation": "known", "label": "SUPPORTED"}})
    config = WebConfig(home=tmp_path / "home", searcher=None, llm=llm, max_body_bytes=64 * 1024,
                       model_health=lambda: {"ok": True, "endpoint": "scripted", "models": ["scripted-llm"]})
    json_body = {"Content-Type": "application/json"}
    with TestClient(asgi(config), base_url="http://127.0.0.1") as client:
        for body, status in ((b"\x00" * 100, 422), (MIXED, 400), (b"x" * (1 << 20), 413),
                             (json.dumps({"claim": "x" * 30_000, "method": "direct"}).encode(), 422),
                             (json.dumps({"text": NUL, "method": "direct"}).encode(), 422)):
            path = "/v1/check" if b'"text"' in body else "/v1/verify"
            resp = client.post(path, content=body, headers=json_body)
            assert resp.status_code == status, (body[:40], resp.text[:300])
            assert set(resp.json()) <= {"error", "hint"} and "\n" not in resp.json()["error"]
        resp = client.post("/v1/jobs?method=direct", content=b"\x00" * (1 << 20),
                           headers={"Content-Type": "application/x-ndjson"})
        assert resp.status_code == 413
        assert llm.calls == []
        ok = client.post("/v1/verify", json={"claim": ESCAPES + " " + HTML_JS, "method": "direct"})
        assert ok.status_code == 200 and ok.json()["claim"] == ESCAPES + " " + HTML_JS  # JSON keeps the text


@pytest.mark.parametrize("args,match", [
    (["web", "--endpoint", DEAD, "--token-file", "/dev/zero"], "no line break in its first 64 KiB"),
    (["bench", "run", "--config", "/dev/zero"], "larger than 1 MiB"),
    (["index", "build", "/dev/zero", "--format", "jsonl", "--out", "{tmp}/idx", "--no-dense"], "not a file"),
])
def test_every_other_file_a_command_reads_is_read_with_a_bound(tmp_path, args, match):
    """The token file, a run config and an index source given as a device: one line after a bounded read."""
    res = cli([a.replace("{tmp}", str(tmp_path)) for a in args], tmp_path)
    one_error(res, match)
