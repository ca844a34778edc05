"""The bad-input matrix (issue 15 point 3): every flag and file a user passes, given a bad value.

One table, one test. Each row runs the real ``veracity`` command (in-process through click's CliRunner on
``veracity.cli.cli``, or as a subprocess where the row says so) with ``VERACITY_HOME`` and
``VERACITY_DATA_DIR`` in a temporary folder and no ``VERACITY_ENDPOINT``. A bad input must

- exit non-zero with exactly one ``error:`` line followed by one ``hint:`` line on stderr, no traceback;
- write nothing (every file and folder under the temporary folder is unchanged);
- finish in seconds: no server is started (a spawned ``vllm`` or ``pip`` is recorded and fails the row),
  and an unreachable endpoint is port 9 on loopback (refused at once);
- when the row is ``early``: fail before any model endpoint is contacted (the stand-in endpoint, a tiny
  OpenAI-compatible server on loopback, records every request).

A row may instead be ``accepted`` for the reason it states; it must then succeed without a traceback.
``python -m pytest tests/unit/test_bad_inputs.py -q`` runs the matrix; the row count is its size.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fixtures.index import write_wiki_dump
from veracity.cli import _register, cli

ROOT = Path(__file__).resolve().parents[2]
DEAD = "http://127.0.0.1:9/v1"  # nothing listens on port 9 of loopback: refused at once
FAST_S = 8.0  # a bad input is answered in seconds (generous for a loaded 2-core CI machine)


@dataclass
class Case:
    """One row: the arguments (``{tmp}``: the temporary folder, ``{fake}``: the stand-in endpoint, ``{dead}``:
    an unreachable one), what must happen, and for an error a regex its ``error:`` line matches."""

    args: list[str]
    match: str = ""
    accepted: str = ""  # the reason a row is accepted (then it must succeed)
    env: dict[str, str] = field(default_factory=dict)
    early: bool = True  # fails before any request reaches the model endpoint
    writes: tuple[str, ...] = ()  # what an accepted row may write (relative to {tmp})
    subprocess: bool = False  # run `python -m veracity` instead of CliRunner


def row(id: str, *args: str, **kw) -> object:
    return pytest.param(Case(list(args), **kw), id=id)


BATCH = ("verify", "-i", "{tmp}/claims/good.jsonl", "--method", "direct", "--endpoint", "{fake}")
ONE = ("verify", "Paris is the capital of France.", "--endpoint", "{dead}")
RUN = ("bench", "run", "--dataset", "jsonl:{tmp}/claims/labelled.jsonl", "--endpoint", "{dead}")
TP = ("bench", "throughput", "--dataset", "jsonl:{tmp}/claims/labelled.jsonl", "--endpoint", "{dead}",
      "--concurrency",
      "1")
BUILD_OUT = ("--out", "{tmp}/new-index")
OUT = ("-o", "{tmp}/out/r.jsonl")

CLAIMS_FILES = [
    row("claims-missing", "verify", "-i", "{tmp}/claims/missing.jsonl", *OUT, "--method", "direct",
        "--endpoint", "{fake}", match="does not exist"),
    row("claims-empty", *BATCH[:2], "{tmp}/claims/empty.jsonl", *BATCH[3:], *OUT, match="no claims.*empty"),
    row("claims-blank-lines", *BATCH[:2], "{tmp}/claims/blank.jsonl", *BATCH[3:], *OUT,
        match="no claims.*empty"),
    row("claims-not-utf8", *BATCH[:2], "{tmp}/claims/latin1.jsonl", *BATCH[3:], *OUT,
        match="no claims.*not UTF-8"),
    row("claims-not-json", *BATCH[:2], "{tmp}/claims/notjson.jsonl", *BATCH[3:], *OUT,
        match="no claims.*not JSON"),
    row("claims-json-array", *BATCH[:2], "{tmp}/claims/array.jsonl", *BATCH[3:], *OUT,
        match="no claims.*not a JSON object"),
    row("claims-no-claim-field", *BATCH[:2], "{tmp}/claims/noclaim.jsonl", *BATCH[3:], *OUT,
        match="no claims.*no `claim` field"),
    row("claims-empty-claim", *BATCH[:2], "{tmp}/claims/emptyclaim.jsonl", *BATCH[3:], *OUT,
        match="no claims.*empty claim"),
    row("claims-duplicate-ids", *BATCH[:2], "{tmp}/claims/dups.jsonl", *BATCH[3:], *OUT,
        match="duplicate id"),
    row("claims-a-directory", *BATCH[:2], "{tmp}/claims", *BATCH[3:], *OUT, match="is a directory"),
    row("claims-some-bad-lines", *BATCH[:2], "{tmp}/claims/mixed.jsonl", *BATCH[3:], *OUT,
        accepted="a bad line is skipped (file:line and why on stderr) and counted; the good claims run, so "
                 "one "
        "typo does not stop a long batch", writes=("out/r.jsonl", "out/r.jsonl.manifest.json")),
    row("claims-path-with-brackets", *BATCH[:2], "{tmp}/claims/[/x].jsonl", *BATCH[3:], *OUT,
        accepted="as claims-some-bad-lines: a path is printed as it is, not read as rich markup",
        writes=("out/r.jsonl", "out/r.jsonl.manifest.json")),
    row("claim-and-input", *ONE, "-i", "{tmp}/claims/good.jsonl", match="either a CLAIM or -i"),
    row("input-without-output", *BATCH, match="-i needs -o"),
    row("claim-blank", "verify", "   ", "--endpoint", "{dead}", match="empty claim"),
    row("claim-neither", "verify", "--endpoint", "{dead}", match="either a CLAIM or -i"),
]

OUTPUT_PATHS = [
    row("output-missing-folder", *BATCH, "-o", "{tmp}/missing/dir/r.jsonl",
        accepted="the folders of -o are created (mkdir -p), as bench run --out does",
        writes=("missing", "missing/dir", "missing/dir/r.jsonl", "missing/dir/r.jsonl.manifest.json")),
    row("output-a-directory", *BATCH, "-o", "{tmp}/out", match="is a directory"),
    row("output-unwritable", *BATCH, "-o", "/sys/veracity-bad-input.jsonl", match="veracity-bad-input.jsonl"),
    row("output-under-a-file", *BATCH, "-o", "{tmp}/claims/good.jsonl/r.jsonl", match="good.jsonl"),
    row("output-of-another-method", *BATCH, "-o", "{tmp}/out/rag.jsonl", match="method rag"),
    row("output-in-another-label-space", *BATCH, "-o", "{tmp}/out/binary.jsonl", match="binary label space"),
    row("output-not-results", *BATCH, "-o", "{tmp}/out/notes.txt", match="not a result line"),
    row("output-is-the-input", *BATCH, "-o", "{tmp}/claims/good.jsonl", match="claims file"),
    row("state-dir-a-file", *ONE, "--method", "direct", "--state-dir", "{tmp}/claims/good.jsonl",
        match="is a file"),
    row("bench-run-out-a-file", *RUN, "--method", "direct", "--out", "{tmp}/claims/good.jsonl",
        match="is a file"),
    row("bench-run-out-not-a-run", *RUN, "--method", "direct", "--out", "{tmp}/index/notindex",
        match="not a benchmark run directory"),
]


def param_rows(method: str, cases: list[tuple[str, str]]) -> list[object]:
    return [row(f"param-{method}-{item.split('=')[0] or 'empty'}-{i}", *ONE, "--method", method, "--param",
                item,
                match=match) for i, (item, match) in enumerate(cases)]


PARAMS = [
    *param_rows("direct", [("judge.max_tokens=0", r"judge\.max_tokens .*1 to 32768"),
                           ("judge.max_tokens=abc", "must be an integer"),
                           ("judge.temperature=-1", r"judge\.temperature .*0 to 2"),
                           ("judge.top_p=0.5", "no setting 'top_p'"),
                           ("planner.max_tokens=5", "no role 'planner'"),
                           ("k=3", "no parameter k"),
                           ("max_tokens=512", "no parameter max_tokens"),
                           ("=3", "not key=value"),
                           ("oops", "not key=value")]),
    *param_rows("rag", [("k=-3", "k of rag must be an integer .*out of range"),
                        ("k=abc", "k of rag must be an integer"),
                        ("k=1.5", "k of rag must be an integer"),
                        ("k=true", "k of rag must be an integer"),
                        ("k=[1,2]", "k of rag must be an integer"),
                        ("constrain_citations=maybe", "must be a boolean"),
                        ("passage_max_words=0", "passage_max_words"),
                        ("judge.max_tokens=99999", "judge.max_tokens"),
                        ("quotes=strict", "quotes .*off, show, check"),
                        ("memory_path=/tmp/m", "no parameter memory_path")]),
    *param_rows("mermaid", [("t_max=abc", "t_max of mermaid must be an integer"),
                            ("t_max=0", "t_max of mermaid .*out of range"),
                            ("t_max=1e999", "t_max of mermaid"),
                            ("similarity_threshold=2", "similarity_threshold"),
                            ("memory=maybe", "memory of mermaid must be a boolean"),
                            ("executor.max_tokens=-1", "executor.max_tokens"),
                            ("final.temperature=abc", "final.temperature .*must be a number"),
                            ("memory_path=/tmp/m", "no parameter memory_path")]),
    *param_rows("emulate", [("search_k=0", "search_k"),
                            ("search_rank=perhaps", "search_rank"),
                            ("snippet_words=1e9", "snippet_words"),
                            ("classifier.temperature=3", "classifier.temperature"),
                            ("agent_max_tokens=100", "no parameter agent_max_tokens")]),
    *param_rows("trification", [("uncertain_label=MAYBE", "uncertain_label"),
                                ("max_nodes=0", "max_nodes"),
                                ("max_queries=9", "max_queries"),
                                ("plan_max_tokens=100", "no parameter plan_max_tokens"),
                                ("node_max_tokens=100", "no parameter node_max_tokens"),
                                ("planner.max_tokens=abc", "planner.max_tokens")]),
    *param_rows("zofia", [("lambda_init=1.5", "lambda_init"),
                          ("lambda_floor=0.9", "lambda_floor of zofia .* must not exceed"),
                          ("max_subclaims=-1", "max_subclaims"),
                          ("debate_max_tokens=5", "no parameter debate_max_tokens"),
                          ("pro.max_tokens=0", "pro.max_tokens")]),
    row("param-trification-nei-in-binary", *ONE, "--method", "trification", "--labels", "binary", "--param",
        "uncertain_label=NOT_ENOUGH_INFO", match="not in the binary label space"),
    row("ablation-of-another-method", *ONE, "--method", "direct", "--no-memory", match="ablation of mermaid"),
    row("ablation-mermaid-static", *ONE, "--method", "mermaid", "--static", match="ablation of trification"),
    row("param-named-like-a-verifier-option", *ONE, "--method", "direct", "--param", "concurrency=3",
        match="no parameter concurrency"),
    row("param-search-mode-not-a-parameter", *ONE, "--method", "direct", "--param", "search_mode=bm25",
        match="no parameter search_mode"),
    row("param-zofia-exclude-titles-type", *ONE, "--method", "zofia", "--param", "exclude_titles=5",
        match="exclude_titles of zofia must be a list"),
    row("semantic-memory-not-mermaid", *ONE, "--method", "rag", "--semantic-memory",
        match="no parameter semantic_memory"),
    row("method-unknown", *ONE, "--method", "nope", match="'nope' is not one of"),
    row("bench-run-param", *RUN, "--method", "mermaid", "--param", "t_max=abc", match="t_max of mermaid"),
    row("bench-run-param-unknown", *RUN, "--method", "rag", "--param", "t_max=3", match="no parameter t_max"),
    row("bench-run-ablation", *RUN, "--method", "direct", "--ablation", "no-memory",
        match="ablation of mermaid"),
    # as verify
    row("bench-run-no-memory", *RUN, "--method", "direct", "--no-memory", match="ablation of mermaid"),
    row("bench-run-method-unknown", *RUN, "--method", "nope", match="unknown method 'nope'"),
    row("throughput-param", *TP, "--method", "rag", "--param", "k=abc", match="k of rag"),
    row("throughput-method-unknown", *TP, "--method", "nope", match="unknown method 'nope'"),
    row("subprocess-param", *ONE, "--method", "mermaid", "--param", "t_max=abc", match="t_max of mermaid",
        subprocess=True),
]

CONCURRENCY = [
    row("concurrency-0", *ONE, "--method", "direct", "--concurrency", "0", match="at least 1"),
    row("concurrency-negative", *ONE, "--method", "direct", "--concurrency", "-1", match="at least 1"),
    row("concurrency-text", *ONE, "--method", "direct", "--concurrency", "many", match="not a valid integer"),
    row("llm-concurrency-0", *ONE, "--method", "direct", "--llm-concurrency", "0", match="at least 1"),
    row("llm-concurrency-negative", *ONE, "--method", "direct", "--llm-concurrency", "-1",
        match="at least 1"),
    row("llm-concurrency-text", *ONE, "--method", "direct", "--llm-concurrency", "x",
        match="not a valid integer"),
    row("batch-concurrency-0", *BATCH, *OUT, "--concurrency", "0", match="at least 1"),
    row("env-concurrency-text", *ONE, "--method", "direct", env={"VERACITY_CONCURRENCY": "lots"},
        match=r"\$VERACITY_CONCURRENCY must be an integer"),
    row("env-concurrency-0", *ONE, "--method", "direct", env={"VERACITY_CONCURRENCY": "0"},
        match="at least 1"),
    row("env-llm-concurrency-negative", *ONE, "--method", "direct", env={"VERACITY_LLM_CONCURRENCY": "-5"},
        match="at least 1"),
    row("bench-run-concurrency-0", *RUN, "--method", "direct", "--concurrency", "0", match="at least 1"),
    row("bench-run-llm-concurrency-negative", *RUN, "--method", "direct", "--llm-concurrency", "-1",
        match="at least 1"),
    row("throughput-concurrency-0", *TP, "--method", "direct", "--concurrency", "0",
        match="positive integers"),
    row("throughput-concurrency-text", *TP, "--method", "direct", "--concurrency", "1,x", match="integers"),
    row("throughput-claims-per-level-0", *TP, "--method", "direct", "--claims-per-level", "0",
        match="claims"),
    row("throughput-warmup-negative", *TP, "--method", "direct", "--warmup", "-1", match="warmup"),
    row("bench-llm-concurrency-0", "bench", "llm", "--endpoint", "{dead}", "--concurrency", "0",
        match="positive integers"),
    row("bench-llm-requests-0", "bench", "llm", "--endpoint", "{dead}", "--requests", "0",
        match="--requests"),
    row("bench-llm-max-tokens-0", "bench", "llm", "--endpoint", "{dead}", "--max-tokens", "0",
        match="--max-tokens"),
    row("subprocess-concurrency-0", *ONE, "--method", "direct", "--concurrency", "0", match="at least 1",
        subprocess=True),
]

INDEX_DIRS = [
    row("index-missing", *ONE, "--method", "rag", "--index", "{tmp}/index/missing", match="does not exist"),
    row("index-not-an-index", *ONE, "--method", "rag", "--index", "{tmp}/index/notindex",
        match="not a veracity index"),
    row("index-empty-dir", *ONE, "--method", "rag", "--index", "{tmp}/index/empty",
        match="not a veracity index"),
    row("index-a-file", *ONE, "--method", "rag", "--index", "{tmp}/claims/good.jsonl",
        match="good.jsonl (does not exist|is a file)"),
    row("index-bad-manifest", *ONE, "--method", "rag", "--index", "{tmp}/index/badmanifest",
        match="manifest"),
    row("index-no-passage-store", *ONE, "--method", "rag", "--index", "{tmp}/index/nostore",
        match="passage store .* is missing"),
    row("index-corrupt-passage-store", *ONE, "--method", "rag", "--index", "{tmp}/index/corruptstore",
        match="passage store .* is corrupt"),
    row("index-none-and-no-default", *ONE, "--method", "rag", match="no index given"),
    row("index-env-missing", *ONE, "--method", "rag", env={"VERACITY_INDEX": "{tmp}/index/missing"},
        match="does not exist"),
    row("index-search-missing", "index", "search", "{tmp}/index/missing", "Paris", match="missing"),
    row("index-search-not-an-index", "index", "search", "{tmp}/index/notindex", "Paris", match="notindex"),
    row("index-search-empty-dir", "index", "search", "{tmp}/index/empty", "Paris", match="empty"),
    row("index-search-bad-manifest", "index", "search", "{tmp}/index/badmanifest", "Paris", match="manifest"),
    row("index-search-no-passage-store", "index", "search", "{tmp}/index/nostore", "Paris",
        match="passage store .* is missing"),
    row("index-info-missing", "index", "info", "{tmp}/index/missing", match="missing"),
    row("index-info-bad-manifest", "index", "info", "{tmp}/index/badmanifest", match="manifest"),
    row("bench-retrieval-index-missing", "bench", "retrieval", "--index", "{tmp}/index/missing",
        match="missing"),
    row("bench-run-index-missing", *RUN, "--method", "rag", "--index", "{tmp}/index/missing",
        match="does not exist"),
    row("throughput-index-missing", *TP, "--method", "rag", "--index", "{tmp}/index/missing",
        match="does not exist"),
]

ENDPOINTS = [
    row("endpoint-unreachable", "verify", "x y z", "--method", "direct", "--endpoint", "{dead}",
        match="cannot reach the model endpoint"),
    row("endpoint-unreachable-batch", *BATCH[:-1], "{dead}", *OUT, match="cannot reach the model endpoint"),
    row("endpoint-malformed", "verify", "x y z", "--method", "direct", "--endpoint", "http://[::1",
        match="endpoint"),
    row("endpoint-not-a-url", "verify", "x y z", "--method", "direct", "--endpoint", "not a url",
        match="endpoint"),
    row("endpoint-other-scheme", "verify", "x y z", "--method", "direct", "--endpoint", "ftp://127.0.0.1:9/v1",
        match="endpoint"),
    row("endpoint-port-out-of-range", "verify", "x y z", "--method", "direct", "--endpoint",
        "http://127.0.0.1:99999/v1", match="endpoint"),
    row("endpoint-env-malformed", "verify", "x y z", "--method", "direct", env={"VERACITY_ENDPOINT": "http://[::1"},
        match="endpoint"),
    row("bench-llm-endpoint-unreachable", "bench", "llm", "--endpoint", "{dead}", "--concurrency", "1",
        match="cannot reach the model endpoint"),
    row("bench-run-endpoint-unreachable", *RUN, "--method", "direct", "--out", "{tmp}/runs/r",
        match="cannot reach the model endpoint"),
    row("throughput-endpoint-unreachable", *TP, "--method", "direct", "--out", "{tmp}/runs/t",
        match="endpoint .* does not answer"),
    # several endpoints (issue 17): a bad list fails before anything is contacted; endpoints that disagree or
    # are all dead fail at the first probe, before a result or a manifest is written
    row("endpoint-list-empty", "verify", "x y z", "--method", "direct", "--endpoint", " , ",
        match="list .* is empty"),
    row("endpoint-list-empty-env", "verify", "x y z", "--method", "direct", env={"VERACITY_ENDPOINT": ","},
        match="list .* is empty"),
    row("endpoint-list-empty-entry", *BATCH[:-1], "{fake},,{dead}", *OUT, match="has an empty entry"),
    row("endpoint-list-twice", *BATCH[:-1], "{fake},{fake}", *OUT, match="listed twice"),
    row("endpoint-list-malformed-entry", *BATCH[:-1], "{fake},ftp://127.0.0.1:9", *OUT,
        match="is not a valid URL"),
    row("endpoints-all-dead", *BATCH[:-1], "{dead},http://127.0.0.1:7/v1", *OUT,
        match="none of the 2 model endpoints answers"),
    row("endpoints-different-models", *BATCH[:-1], "{fake},{other}", *OUT, early=False,
        match="serve different models .*serves fake-model; .*serves other-model"),
    row("endpoints-different-models-named", *BATCH[:-1], "{fake},{other}", *OUT, "--model", "fake-model",
        early=False,
        match="serves another model than fake-model"),
    row("bench-llm-endpoint-list", "bench", "llm", "--endpoint", "{fake},{other}",
        match="measures one model endpoint"),
]

MODELS = [
    row("model-unknown-on-endpoint", "verify", "x y z", "--method", "direct", "--endpoint", "{fake}",
        "--model",
        "nope", match="serves fake-model, not nope", early=False),
    row("model-unknown-managed", "verify", "x y z", "--method", "direct", "--model", "nope",
        match="unknown model 'nope'|vLLM is not installed"),
    row("bench-llm-model-unknown", "bench", "llm", "--endpoint", "{fake}", "--model", "nope",
        match="serves fake-model, not nope", early=False),
    row("models-prepare-unknown", "models", "prepare", "nope", match="nope"),
    row("models-prepare-from-missing", "models", "prepare", "nope", "--from", "{tmp}/weights/missing",
        match="missing"),
    row("models-prepare-from-empty-dir", "models", "prepare", "my-model", "--from", "{tmp}/weights/empty",
        match="config.json|weights"),
    row("models-prepare-from-a-text-file", "models", "prepare", "my-model", "--from",
        "{tmp}/claims/good.jsonl",
        match="good.jsonl is neither a weights directory"),
    row("methods-show-unknown", "methods", "show", "nope", match="unknown method 'nope'"),
    row("serve-port-negative", "serve", "--port", "-1", match="port -1"),
    row("serve-port-too-large", "serve", "--port", "70000", match="port 70000"),
    row("serve-port-text", "serve", "--port", "http", match="not a valid integer"),
    row("serve-model-unknown", "serve", "--model", "nope", match="unknown model 'nope'"),
    row("serve-model-unknown-detach", "serve", "--model", "nope", "--detach", match="unknown model 'nope'"),
    row("serve-structured-backend", "serve", "--structured-backend", "regex", match="regex"),
    row("serve-gpu-memory", "serve", "--gpu-memory-utilization", "2", match="gpu-memory-utilization"),
    row("serve-tensor-parallel-0", "serve", "--tensor-parallel-size", "0", match="tensor-parallel-size"),
    row("serve-max-model-len-0", "serve", "--max-model-len", "0", match="max-model-len"),
    row("serve-kv-cache-negative", "serve", "--kv-cache-gib", "-1", match="kv-cache-gib"),
    row("serve-kv-cache-fraction", "serve", "--kv-cache-gib", "1.5", match="whole number of GiB"),
    row("serve-max-num-seqs-0", "serve", "--max-num-seqs", "0", match="max-num-seqs"),
    row("serve-timeout-0", "serve", "--timeout", "0", match="timeout"),
    row("serve-replicas-0", "serve", "--replicas", "0", match="--replicas must be at least 1"),
    row("serve-replicas-past-last-port", "serve", "--replicas", "3", "--port", "65534", match="past 65535"),
    row("serve-engine-unknown", "serve", "--engine", "tgi", match="tgi"),
    row("serve-engine-env-unknown", "serve", env={"VERACITY_ENGINE": "tgi"}, match="VERACITY_ENGINE='tgi'"),
    row("serve-llamacpp-not-installed", "serve", "--engine", "llama.cpp",
        env={"VERACITY_LLAMA_SERVER": "{tmp}/no-llama-server"}, match="llama-server is not installed"),
    row("engines-install-unknown", "engines", "install", "ollama", match="unknown engine 'ollama'"),
    row("engines-install-vllm", "engines", "install", "vllm", match="installed with pip"),
    row("engines-install-jobs-0", "engines", "install", "llama.cpp", "--jobs", "0", match="--jobs must be"),
    row("engines-default-unknown", "engines", "default", "tgi", match="tgi"),
    row("models-default-unknown", "models", "default", "nope", match="unknown model 'nope'"),
    row("models-default-not-prepared", "models", "default", "qwen2.5-7b-instruct", match="not prepared"),
]

DATASETS = [
    row("dataset-unknown", "bench", "run", "--dataset", "nope", "--method", "direct", "--endpoint", "{dead}",
        match="nope"),
    row("dataset-jsonl-missing", "bench", "run", "--dataset", "jsonl:{tmp}/claims/missing.jsonl", "--method",
        "direct", "--endpoint", "{dead}", match="missing.jsonl"),
    row("dataset-jsonl-empty-path", "bench", "run", "--dataset", "jsonl:", "--method", "direct", "--endpoint",
        "{dead}", match="not found"),
    row("dataset-jsonl-not-json", "bench", "run", "--dataset", "jsonl:{tmp}/claims/notjson.jsonl", "--method",
        "direct", "--endpoint", "{dead}", match="notjson.jsonl"),
    row("dataset-files-absent", "bench", "run", "--dataset", "hover", "--method", "direct", "--endpoint",
        "{dead}",
        match="hover"),
    row("dataset-data-dir-missing", "bench", "run", "--dataset", "hover", "--method", "direct", "--endpoint",
        "{dead}", "--data-dir", "{tmp}/missing", match="missing|hover"),
    row("dataset-variant-unknown", *RUN[:2], "--dataset", "hover", "--variant", "nope", "--method", "direct",
        "--endpoint", "{dead}", match="variant"),
    row("dataset-hops-text", *RUN, "--method", "direct", "--hops", "two", match="hop"),
    row("dataset-label-map-bad", *RUN, "--method", "direct", "--label-map", "true=maybe", match="label"),
    row("dataset-limit-0", *RUN, "--method", "direct", "--limit", "0", match="limit"),
    row("bench-run-no-method", "bench", "run", "--dataset", "hover", match="--method"),
    row("throughput-dataset-unknown", "bench", "throughput", "--method", "direct", "--dataset", "nope",
        "--endpoint", "{dead}", match="nope"),
    row("throughput-dataset-jsonl-missing", "bench", "throughput", "--method", "direct", "--dataset",
        "jsonl:{tmp}/claims/missing.jsonl", "--endpoint", "{dead}", match="missing.jsonl"),
    row("bench-datasets-count-missing-dir", "bench", "datasets", "--count", "--data-dir", "{tmp}/missing",
        match="does not exist"),
    row("bench-retrieval-modes", "bench", "retrieval", "--index", "{tmp}/index/missing", "--modes",
        "bm25,magic",
        match="--modes"),
    row("bench-retrieval-k-0", "bench", "retrieval", "--index", "{tmp}/index/missing", "--k", "0",
        match="--k"),
    row("bench-compare-missing", "bench", "compare", "{tmp}/runs/missing", match="does not exist"),
    row("bench-compare-not-a-run", "bench", "compare", "{tmp}/index/empty", match="not a benchmark run"),
]

CONFIGS = [
    row("config-missing", "bench", "run", "--config", "{tmp}/config/missing.toml", match="not found"),
    row("config-a-directory", "bench", "run", "--config", "{tmp}/config", match="is a directory"),
    row("config-bad-toml", "bench", "run", "--config", "{tmp}/config/bad.toml", match="not valid TOML"),
    row("config-unknown-key", "bench", "run", "--config", "{tmp}/config/unknown.toml", match="unknown key"),
    row("config-no-method", "bench", "run", "--config", "{tmp}/config/nomethod.toml", match="method"),
    row("config-wrong-type", "bench", "run", "--config", "{tmp}/config/badtype.toml",
        match="limit must be an integer"),
    row("config-bad-labels", "bench", "run", "--config", "{tmp}/config/badlabels.toml", match="label space"),
    row("config-bad-param", "bench", "run", "--config", "{tmp}/config/badparam.toml", match="k of rag"),
    row("config-not-utf8", "bench", "run", "--config", "{tmp}/config/latin1.toml", match="latin1.toml"),
]

INDEX_SOURCES = [
    row("build-source-missing", "index", "build", "{tmp}/corpus/missing.jsonl", *BUILD_OUT,
        match="missing.jsonl"),
    row("build-source-unknown-name", "index", "build", "wikipedia-latest", *BUILD_OUT,
        match="wikipedia-latest"),
    row("build-source-a-directory", "index", "build", "{tmp}/corpus", *BUILD_OUT, match="corpus"),
    row("build-source-empty", "index", "build", "{tmp}/corpus/empty.jsonl", *BUILD_OUT, match="empty.jsonl"),
    row("build-source-empty-jsonl", "index", "build", "{tmp}/corpus/empty.jsonl", "--format", "jsonl",
        *BUILD_OUT,
        match="empty.jsonl"),
    row("build-source-not-json", "index", "build", "{tmp}/corpus/notjson.jsonl", "--format", "jsonl",
        *BUILD_OUT,
        match="notjson.jsonl"),
    row("build-format-unknown", "index", "build", "{tmp}/corpus/good.jsonl", "--format", "csv", *BUILD_OUT,
        match="csv"),
    row("build-out-a-file", "index", "build", "{tmp}/corpus/good.jsonl", "--out", "{tmp}/claims/good.jsonl",
        match="good.jsonl"),
    row("build-out-not-empty", "index", "build", "{tmp}/corpus/good.jsonl", "--out", "{tmp}/index/notindex",
        match="notindex"),
    row("build-overwrite-foreign-manifest", "index", "build", "{tmp}/corpus/good.jsonl", "--out",
        "{tmp}/index/foreign", "--overwrite", "--no-dense", match="foreign is not an index veracity built"),
    row("build-overwrite-future-manifest", "index", "build", "{tmp}/corpus/good.jsonl", "--out",
        "{tmp}/index/future", "--overwrite", "--no-dense", match="format_version 99"),
    row("build-overwrite-not-an-index", "index", "build", "{tmp}/corpus/good.jsonl", "--out",
        "{tmp}/index/notindex",
        "--overwrite", "--no-dense", match="notindex is not an index veracity built .no manifest.json"),
    row("build-overwrite-bad-manifest", "index", "build", "{tmp}/corpus/good.jsonl", "--out",
        "{tmp}/index/badmanifest", "--overwrite", "--no-dense", match="not readable JSON"),
    row("build-stranger-building-folder", "index", "build", "{tmp}/corpus/good.jsonl", "--out",
        "{tmp}/index/stranger", "--no-dense",
        match=r"\.stranger\.building exists and is not a partial build"),
    row("build-chunk-words-0", "index", "build", "{tmp}/corpus/good.jsonl", "--chunk-words", "0", *BUILD_OUT,
        match="chunk"),
    row("build-chunk-overlap-too-big", "index", "build", "{tmp}/corpus/good.jsonl", "--chunk-overlap", "100",
        *BUILD_OUT, match="overlap"),
    row("build-limit-0", "index", "build", "{tmp}/corpus/good.jsonl", "--limit", "0", *BUILD_OUT,
        match="limit"),
    row("build-batch-size-0", "index", "build", "{tmp}/corpus/good.jsonl", "--batch-size", "0", *BUILD_OUT,
        match="batch-size"),
    row("build-shard-size-0", "index", "build", "{tmp}/corpus/good.jsonl", "--shard-size", "0", *BUILD_OUT,
        match="shard-size"),
    row("build-workers-per-device-0", "index", "build", "{tmp}/corpus/good.jsonl", "--workers-per-device",
        "0",
        *BUILD_OUT, match="--workers-per-device must be"),
    row("build-dump-date-bad", "index", "build", "{tmp}/corpus/good.jsonl", "--dump-date", "last year",
        *BUILD_OUT,
        match="dump-date|last year"),
    row("build-nothing-to-build", "index", "build", "{tmp}/corpus/good.jsonl", "--no-bm25", "--no-dense",
        *BUILD_OUT, match="no-bm25|nothing"),
    row("build-tsv-wrong-columns", "index", "build", "{tmp}/corpus/wrong.tsv", *BUILD_OUT,
        match="not a DPR passages TSV"),
    row("build-workers-0", "index", "build", "{tmp}/corpus/good.jsonl", "--workers", "0", *BUILD_OUT,
        match="--workers must be"),
    row("build-bm25-threads-0", "index", "build", "{tmp}/corpus/good.jsonl", "--bm25-threads", "0",
        *BUILD_OUT,
        match="--bm25-threads must be"),
    row("build-dump-truncated-bz2", "index", "build", "{tmp}/corpus/enwiki-20190301-pages-articles.xml.bz2",
        *BUILD_OUT, match="truncated"),
    row("build-multistream-index-mismatch", "index", "build",
        "{tmp}/corpus/enwiki-20190301-pages-articles-multistream.xml.bz2", *BUILD_OUT,
        match="does not match"),
    row("build-multistream-index-missing", "index", "build",
        "{tmp}/corpus/enwiki-20190301-pages-articles-multistream.xml.bz2", "--multistream-index",
        "{tmp}/corpus/missing-index.txt.bz2", *BUILD_OUT, match="missing-index"),
    row("build-faiss-factory-rejected", "index", "build", "{tmp}/corpus/good.jsonl", "--faiss-factory",
        "IVF12,Bogus9",
        *BUILD_OUT, match="FAISS rejects the factory string 'IVF12,Bogus9'"),
    row("build-faiss-factory-sample-too-small", "index", "build", "{tmp}/corpus/good.jsonl",
        "--faiss-factory",
        "IVF65536,SQ8", *BUILD_OUT, match="needs at least 1,966,080 training vectors"),
    row("build-backend-unknown", "index", "build", "{tmp}/corpus/good.jsonl", "--backend", "spark",
        *BUILD_OUT,
        match="Invalid value for '--backend'"),
    row("index-search-nprobe-0", "index", "search", "{tmp}/index/missing", "Paris", "--nprobe", "0",
        match="--nprobe must be an integer of at least 1"),
    row("index-search-ef-search-0", "index", "search", "{tmp}/index/missing", "Paris", "--ef-search", "0",
        match="--ef-search must be an integer of at least 1"),
]

LABELS_AND_COMMANDS = [
    row("labels-bad", *ONE, "--method", "direct", "--labels", "bad", match="unknown label space 'bad'"),
    row("min-confidence-above-1", *ONE, "--method", "direct", "--min-confidence", "1.5",
        match="--min-confidence must be a number from 0 to 1"),
    row("bench-run-min-confidence-negative", *RUN, "--method", "direct", "--min-confidence", "-0.2",
        match="--min-confidence must be a number from 0 to 1"),
    row("bench-run-labels-bad", *RUN, "--method", "direct", "--labels", "bad",
        match="unknown label space 'bad'"),
    row("evidence-bad", *ONE, "--method", "direct", "--evidence", "web",
        match="unknown evidence setting 'web'"),
    row("evidence-gold-one-claim", *ONE, "--method", "direct", "--evidence", "gold",
        match="single CLAIM has none"),
    row("evidence-gold-claims-without", *BATCH, *OUT, "--evidence", "gold", match="has no gold evidence"),
    row("bench-run-evidence-bad", *RUN, "--method", "direct", "--evidence", "web",
        match="unknown evidence setting 'web'"),
    row("bench-run-evidence-gold-no-gold", *RUN[:2], "--dataset", "fever", "--method", "direct", "--evidence",
        "gold",
        "--endpoint", "{dead}", match="fever .paper_dev. has no gold evidence"),
    row("bench-run-evidence-gold-jsonl-without", *RUN, "--method", "direct", "--evidence", "gold",
        match="no `evidence` list"),
    row("command-unknown", "verifyy", match="No such command"),
    row("option-unknown", *ONE, "--methd", "direct", match="No such option"),
    row("top-option-unknown", "--verbose", "verify", match="No such option"),
]

CHECK = ("check", "--method", "direct", "--endpoint", "{fake}")
CHECK_BATCH = (*CHECK, "-i", "{tmp}/texts/good.jsonl")
TEXTS = [  # `veracity check`: the text, the texts file, its output, the report, the check-stage settings
    row("check-text-empty", *CHECK, "{tmp}/texts/empty.txt", match="empty text"),
    row("check-min-confidence-above-1", *CHECK, "{tmp}/texts/good.txt", "--min-confidence", "2",
        match="--min-confidence must be a number from 0 to 1"),
    row("check-text-blank", *CHECK, "{tmp}/texts/blank.txt", match="empty text"),
    row("check-stdin-empty", *CHECK, "-", match="stdin: empty text"),
    row("check-text-binary", *CHECK, "{tmp}/texts/binary.bin", match="binary file"),
    row("check-text-not-utf8", *CHECK, "{tmp}/texts/latin1.txt", match="not UTF-8"),
    row("check-text-over-max-chars", *CHECK, "{tmp}/texts/good.txt", "--max-chars", "10",
        match="over --max-chars 10"),
    row("check-max-chars-zero", *CHECK, "{tmp}/texts/good.txt", "--max-chars", "0",
        match="--max-chars must be"),
    row("check-text-missing", *CHECK, "{tmp}/texts/missing.txt", match="does not exist"),
    row("check-text-a-directory", *CHECK, "{tmp}/texts", match="is a directory"),
    row("check-text-and-input", *CHECK_BATCH, "{tmp}/texts/good.txt", "-o", "{tmp}/out/c.jsonl",
        match="either a TEXT_FILE"),
    row("check-neither", *CHECK, match="either a TEXT_FILE"),
    row("check-input-without-output", *CHECK_BATCH, match="-i needs -o"),
    row("check-output-without-input", *CHECK, "{tmp}/texts/good.txt", "-o", "{tmp}/out/c.jsonl",
        match="-o goes with -i"),
    row("check-docs-empty", *CHECK, "-i", "{tmp}/texts/empty.jsonl", "-o", "{tmp}/out/c.jsonl",
        match="no texts"),
    row("check-docs-all-bad", *CHECK, "-i", "{tmp}/texts/notext.jsonl", "-o", "{tmp}/out/c.jsonl",
        match="no texts.*no `text`"),
    row("check-docs-duplicate-ids", *CHECK, "-i", "{tmp}/texts/dups.jsonl", "-o", "{tmp}/out/c.jsonl",
        match="duplicate text id"),
    row("check-output-is-the-input", *CHECK_BATCH, "-o", "{tmp}/texts/good.jsonl", match="texts file"),
    row("check-output-a-directory", *CHECK_BATCH, "-o", "{tmp}/out", match="is a directory"),
    row("check-output-of-another-method", *CHECK_BATCH, "-o", "{tmp}/out/checks.jsonl", match="method rag"),
    row("check-report-folder-missing", *CHECK, "{tmp}/texts/good.txt", "--report", "{tmp}/nowhere/r.html",
        match="does not exist"),
    row("check-evidence-gold", *CHECK, "{tmp}/texts/good.txt", "--evidence", "gold", match="--evidence gold"),
    row("check-param-out-of-range", *CHECK, "{tmp}/texts/good.txt", "--check-param", "gamma=-1",
        match="gamma"),
    row("check-stage-param-as-verify", *CHECK, "{tmp}/texts/good.txt", "--param", "gamma=-1", match="gamma"),
    row("check-stage-role-prefixed", *CHECK, "{tmp}/texts/good.txt", "--param", "check.judge.max_tokens=5",
        match="no role 'judge'"),
    row("check-param-unknown-role", *CHECK, "{tmp}/texts/good.txt", "--check-param", "judge.max_tokens=5",
        match="no role 'judge'"),
    row("check-one-text-on-ray", *CHECK, "{tmp}/texts/good.txt", "--backend", "ray",
        match="--backend ray runs a texts"),
    row("check-method-param", *CHECK, "{tmp}/texts/good.txt", "--param", "k=3", match="no parameter k"),
]

WEB = ("web", "--endpoint", "{dead}")
# issue 29 point 5: a number out of range is one line before anything starts, for every command
FLAG_RANGES = [
    row("web-port-too-large", *WEB, "--port", "99999", match="--port must be between 1 and 65535, got 99999"),
    row("web-port-0", *WEB, "--port", "0", match="--port must be between 1 and 65535"),
    row("web-max-checks-0", *WEB, "--max-checks", "0", match="--max-checks must be at least 1"),
    row("web-max-jobs-0", *WEB, "--max-jobs", "0", match="--max-jobs must be at least 1"),
    row("web-max-body-mb-0", *WEB, "--max-body-mb", "0", match="--max-body-mb must be positive"),
    row("web-max-claim-chars-0", *WEB, "--max-claim-chars", "0", match="--max-claim-chars must be between"),
    row("web-concurrency-0", *WEB, "--concurrency", "0", match="at least 1"),
    row("web-token-whitespace", *WEB, "--token", "   ", match="token is empty or holds whitespace"),
    row("web-token-short", *WEB, "--host", "0.0.0.0", "--token", "s3cret", match="fewer than 16"),
    row("web-token-env-short", *WEB, env={"VERACITY_WEB_TOKEN": "abc"}, match="fewer than 16"),
    row("web-token-file-missing", *WEB, "--token-file", "{tmp}/web/missing",
        match="cannot read the token file"),
    row("web-token-file-blank", *WEB, "--token-file", "{tmp}/web/blank-token",
        match="empty or holds whitespace"),
    row("web-token-and-file", *WEB, "--token", "0123456789abcdef0", "--token-file", "{tmp}/web/token",
        match="not both"),
    row("serve-pipeline-parallel-0", "serve", "--pipeline-parallel-size", "0",
        match="pipeline-parallel-size"),
    row("serve-data-parallel-0", "serve", "--data-parallel-size", "0", match="data-parallel-size"),
    row("index-search-k-0", "index", "search", "{tmp}/index/nostore", "Paris", "-k", "0",
        match="-k must be at least 1"),
    row("index-search-width-0", "index", "search", "{tmp}/index/nostore", "Paris", "--width", "0",
        match="--width must be at least 1"),
    row("index-info-truncated-faiss", "index", "info", "{tmp}/index/shortfaiss",
        match=r"shortfaiss/dense/index\.faiss is corrupt or unreadable \(.*read error in the file"),
    row("bench-retrieval-limit-0", "bench", "retrieval", "--index", "{tmp}/index/nostore", "--limit", "0",
        match="--limit must be at least 1"),
    row("bench-run-limit-0", *RUN, "--method", "direct", "--limit", "0",
        match="limit must be a positive number"),
    row("bench-run-ray-actors-0", *RUN, "--method", "direct", "--backend", "ray", "--ray-actors", "0",
        match="--ray-actors must be an integer of at least 1"),
    row("verify-ray-actors-0", *BATCH, *OUT, "--backend", "ray", "--ray-actors", "0",
        match="--ray-actors must be an integer of at least 1"),
    row("check-concurrency-0", *CHECK, "{tmp}/texts/good.txt", "--concurrency", "0", match="at least 1"),
    row("check-llm-concurrency-0", *CHECK, "{tmp}/texts/good.txt", "--llm-concurrency", "0",
        match="at least 1"),
    row("check-ray-actors-0", *CHECK_BATCH, "-o", "{tmp}/out/c.jsonl", "--backend", "ray", "--ray-actors",
        "0",
        match="--ray-actors must be an integer of at least 1"),
]

ROWS = (TEXTS + CLAIMS_FILES + OUTPUT_PATHS + PARAMS + CONCURRENCY + INDEX_DIRS + ENDPOINTS + MODELS
        + DATASETS + CONFIGS + INDEX_SOURCES + LABELS_AND_COMMANDS + FLAG_RANGES)


# -- the world every row runs in ------------------------------------------------------------------------
class _FakeEndpoint(BaseHTTPRequestHandler):
    """A stand-in OpenAI-compatible server: serves ``fake-model``; every completion is a valid direct
    verdict."""

    requests: list[str] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        type(self).requests.append(f"GET {self.path}")
        self._send({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    def do_POST(self) -> None:
        type(self).requests.append(f"POST {self.path}")
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        content = json.dumps({"explanation": "Stand-in verdict.", "label": "SUPPORTED"})
        self._send({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


class _OtherEndpoint(_FakeEndpoint):
    """The stand-in serving another model (``other-model``): a second endpoint that disagrees."""

    requests: list[str] = []

    def do_GET(self) -> None:
        type(self).requests.append(f"GET {self.path}")
        self._send({"object": "list", "data": [{"id": "other-model", "object": "model"}]})


@pytest.fixture(scope="module")
def other_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def fake_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def make_world(tmp: Path) -> None:
    """The files and folders the rows name."""
    def write(rel: str, data: str | bytes) -> None:
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)

    good = '{"id": "c1", "claim": "Paris is the capital of France."}\n'
    write("claims/good.jsonl", good)
    write("claims/empty.jsonl", "")
    write("claims/blank.jsonl", "\n  \n\n")
    write("claims/latin1.jsonl", b'{"id": "c1", "claim": "Caf\xe9 de Flore is in Paris."}\n')
    write("claims/notjson.jsonl", "Paris is the capital of France.\n")
    write("claims/array.jsonl", '["Paris is the capital of France."]\n')
    write("claims/noclaim.jsonl", '{"id": "c1", "text": "Paris is the capital of France."}\n')
    write("claims/emptyclaim.jsonl", '{"id": "c1", "claim": "   "}\n')
    write("claims/dups.jsonl", good + '{"id": "c1", "claim": "Berlin is the capital of Germany."}\n')
    write("claims/mixed.jsonl", good + "not json\n")
    write("claims/[/x].jsonl", good + "not json\n")
    write("claims/labelled.jsonl",
          '{"id": "c1", "claim": "Paris is the capital of France.", "label": "SUPPORTED"}\n')
    write("out/rag.jsonl", '{"id": "c0", "label": "SUPPORTED"}\n')
    write("out/rag.jsonl.manifest.json", json.dumps({"method": "rag", "params": {"k": 5}}))
    write("out/binary.jsonl", '{"id": "c0", "label": "SUPPORTED"}\n')
    write("out/binary.jsonl.manifest.json", json.dumps({"method": "direct", "params": {"roles": {}},
                                                        "label_space": "binary"}))
    write("out/notes.txt", "my notes\n")
    write("texts/good.txt", "Paris is the capital of France. It lies on the Seine.\n")
    write("texts/empty.txt", "")
    write("texts/blank.txt", "  \n\n")
    write("texts/binary.bin", b"\x7fELF\x02\x01\x00\x00")
    write("texts/latin1.txt", b"Caf\xe9 de Flore is in Paris.\n")
    write("texts/good.jsonl", '{"id": "t1", "text": "Paris is the capital of France."}\n')
    write("texts/empty.jsonl", "")
    write("texts/notext.jsonl", '{"id": "t1", "claim": "Paris is the capital of France."}\n')
    write("texts/dups.jsonl",
          '{"id": "t1", "text": "Paris is in France."}\n{"id": "t1", "text": "Rome is in Italy."}\n')
    write("out/checks.jsonl.parts/claims.jsonl.manifest.json", json.dumps({"method": "rag",
                                                                           "params": {"k": 5}}))
    write("index/notindex/readme.txt", "not an index\n")
    (tmp / "index/empty").mkdir(parents=True)
    write("index/badmanifest/manifest.json", "{oops")
    write("index/foreign/manifest.json", '{"foo": 1}\n')  # issue 29's recipe: --overwrite must keep keep.txt
    write("index/foreign/keep.txt", "precious\n")
    write("index/future/manifest.json", json.dumps({"kind": "veracity-index", "format_version": 99}))
    write("index/future/keep.txt", "precious\n")
    write("index/.stranger.building/notes.txt", "not ours\n")
    manifest = json.dumps({"kind": "veracity-index", "version": 1, "passages": 3})
    write("index/nostore/manifest.json", manifest)
    write("index/corruptstore/manifest.json", manifest)
    write("index/corruptstore/passages.sqlite", "not a database")
    write("config/bad.toml", 'dataset = "hover\n')
    write("config/unknown.toml", 'dataset = "hover"\nmethod = "direct"\ncolour = "red"\n')
    write("config/nomethod.toml", 'dataset = "hover"\n')
    write("config/badtype.toml", 'dataset = "hover"\nmethod = "direct"\nlimit = "ten"\n')
    write("config/badlabels.toml", 'dataset = "hover"\nmethod = "direct"\nlabels = "bad"\n')
    labelled = json.dumps(f"jsonl:{tmp}/claims/labelled.jsonl")
    write("config/badparam.toml", f'dataset = {labelled}\nmethod = "rag"\n[params]\nk = -3\n')
    write("config/latin1.toml", b'dataset = "h\xe9ver"\nmethod = "direct"\n')
    write("corpus/good.jsonl", '{"title": "Paris", "text": "Paris is the capital of France."}\n')
    write("corpus/empty.jsonl", "")
    write("corpus/notjson.jsonl", "Paris is the capital of France.\n")
    write("corpus/wrong.tsv", "id\ttitle\ttext\n1\tParis\tParis is the capital of France.\n")
    dump = write_wiki_dump(tmp / "corpus/enwiki-20190301-pages-articles-multistream.xml.bz2",
                           multistream=True)
    write("corpus/enwiki-20190301-pages-articles.xml.bz2", dump.read_bytes()[:-20])  # cut short
    write("corpus/enwiki-20190301-pages-articles-multistream-index.txt",
          "0:10:Zorbland\n40:11:Ottilie Marsh\n")
    (tmp / "weights/empty").mkdir(parents=True)
    write("web/token", "0123456789abcdef0123\n")
    write("web/blank-token", "   \n")
    import faiss
    import numpy as np

    flat = faiss.IndexFlatIP(8)
    flat.add(np.ones((50, 8), dtype=np.float32))
    (tmp / "index/shortfaiss/dense").mkdir(parents=True)
    faiss.write_index(flat, str(tmp / "index/shortfaiss/dense/index.faiss"))
    whole = (tmp / "index/shortfaiss/dense/index.faiss").read_bytes()
    (tmp / "index/shortfaiss/dense/index.faiss").write_bytes(whole[:len(whole) // 2])  # a copy cut short
    write("index/shortfaiss/manifest.json", json.dumps({"kind": "veracity-index", "format_version": 1,
                                                        "passages": 50,
                                                        "dense": {"faiss_file": "dense/index.faiss",
                                                                  "ntotal": 50}}))
    for folder in ("home", "data", "cwd", "runs"):
        (tmp / folder).mkdir(exist_ok=True)


def snapshot(tmp: Path) -> dict[str, str]:
    """Every path under ``tmp`` with a digest of its content (folders: ``dir``)."""
    out = {}
    for path in sorted(tmp.rglob("*")):
        rel = path.relative_to(tmp).as_posix()
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def spawned(monkeypatch):
    """Commands that would start a server or download something: recorded and refused."""
    real = subprocess.Popen
    seen: list[list[str]] = []

    class Guard(real):  # type: ignore[misc, valid-type]
        def __init__(self, args, *a, **kw):
            words = [str(x) for x in (args if isinstance(args, (list, tuple)) else [args])]
            if any("vllm" in w for w in words) or ("pip" in " ".join(words) and "download" in words):
                seen.append(words)
                raise OSError("bad-input test: refused to start " + " ".join(words[:4]))
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", Guard)
    return seen


def fill(args: list[str], tmp: Path, fake: str, other: str = "") -> list[str]:
    return [a.replace("{tmp}", str(tmp)).replace("{fake}", fake).replace("{other}", other).replace("{dead}",
                                                                                                   DEAD)
            for a in args]


def base_env(tmp: Path) -> dict[str, str | None]:
    env: dict[str, str | None] = {name: None for name in os.environ if name.startswith("VERACITY_")}
    env.update({"VERACITY_HOME": str(tmp / "home"), "VERACITY_DATA_DIR": str(tmp / "data"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_CACHE": str(tmp / "home" / "hf"),
                "NO_COLOR": "1", "COLUMNS": "200", "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "HTTP_PROXY": None, "HTTPS_PROXY": None, "ALL_PROXY": None, "http_proxy": None,
                "https_proxy": None,
                "all_proxy": None})
    return env


def invoke(case: Case, args: list[str], env: dict[str, str | None], cwd: Path) -> tuple[int, str, str]:
    if case.subprocess:
        full = {k: v for k, v in os.environ.items() if not k.startswith("VERACITY_") and k not in env}
        full.update({k: v for k, v in env.items() if v is not None})
        full["PYTHONPATH"] = str(ROOT)
        proc = subprocess.run([sys.executable, "-m", "veracity", *args], cwd=cwd, env=full,
                              capture_output=True,
                              text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    _register()
    result = CliRunner().invoke(cli, args, env=env, catch_exceptions=True)
    out, err = result.stdout, result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        err += "Traceback (escaped the command):\n" + "".join(traceback.format_exception(result.exception))
    return result.exit_code, out, err


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", ROWS)
def test_bad_input(case: Case, tmp_path, fake_endpoint, other_endpoint, spawned, monkeypatch):
    make_world(tmp_path)
    monkeypatch.chdir(tmp_path / "cwd")  # default output folders (bench-results/) land here
    env = base_env(tmp_path)
    env.update({k: fill([v], tmp_path, fake_endpoint, other_endpoint)[0] for k, v in case.env.items()})
    args = fill(case.args, tmp_path, fake_endpoint, other_endpoint)
    before = snapshot(tmp_path)
    _FakeEndpoint.requests.clear()
    _OtherEndpoint.requests.clear()
    t0 = time.monotonic()
    code, out, err = invoke(case, args, env, tmp_path / "cwd")
    elapsed = time.monotonic() - t0
    shown = f"$ veracity {' '.join(args)}\nexit {code}\n--- stdout\n{out}--- stderr\n{err}"

    assert "Traceback" not in out + err, shown
    assert not spawned, f"started {spawned}\n{shown}"
    assert elapsed < (FAST_S if not case.subprocess else 60), f"took {elapsed:.1f} s\n{shown}"
    after = snapshot(tmp_path)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if case.accepted:
        assert code == 0, f"accepted ({case.accepted}) but failed\n{shown}"
        assert set(changed) <= set(case.writes), f"wrote {changed}\n{shown}"
        return
    assert code != 0, shown
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    hints = [i for i, line in enumerate(lines) if line.startswith("hint:")]
    assert len(errors) == 1 and len(hints) == 1 and hints[0] == errors[0] + 1, \
        f"not one error + one hint\n{shown}"
    assert len(lines[hints[0]]) > len("hint: "), shown
    assert re.search(case.match, lines[errors[0]]), f"error line does not match {case.match!r}\n{shown}"
    assert not changed, f"a bad input wrote {changed}\n{shown}"
    if case.early:
        assert not _FakeEndpoint.requests + _OtherEndpoint.requests, \
            f"contacted the endpoint first: {_FakeEndpoint.requests + _OtherEndpoint.requests}\n{shown}"
    else:  # it got as far as the endpoint, and still wrote nothing there: no completion was asked for
        assert not [r for r in _FakeEndpoint.requests + _OtherEndpoint.requests
                    if r.startswith("POST")], shown


def test_the_matrix_covers_every_kind_of_input():
    """Each family of the issue's list has rows (the count is reported in BENCHMARKS.md's Reliability)."""
    families = {"claims files": CLAIMS_FILES, "output paths": OUTPUT_PATHS, "params": PARAMS,
                "concurrency": CONCURRENCY, "index dirs": INDEX_DIRS, "endpoints": ENDPOINTS,
                "models": MODELS,
                "datasets": DATASETS, "configs": CONFIGS, "index sources": INDEX_SOURCES, "texts": TEXTS}
    assert all(rows for rows in families.values())
    ids = [p.id for p in ROWS]
    assert len(ids) == len(set(ids))
    methods = {p.values[0].args[p.values[0].args.index("--method") + 1] for p in PARAMS
               if "--method" in p.values[0].args}
    from veracity.pipeline.methods import METHODS

    assert set(METHODS) <= methods


def test_every_number_flag_of_every_command_has_a_bad_value_row():
    """Issue 29 point 5: each integer / float option of each command is given one bad value by some row (the
    row
    names the command and the flag), so a new number flag without a range check shows up here."""
    import click

    _register()
    missing_rows = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, path + [name])
            return
        for param in command.params:
            if not isinstance(param, click.Option) or not isinstance(param.type, (click.types.IntParamType,
                                                                                   click.types.FloatParamType)):
                continue
            if param.name in NOT_RANGED.get(" ".join(path), ()):
                continue
            if not any(c.values[0].args[:len(path)] == path and set(param.opts) & set(c.values[0].args)
                       for c in ROWS):
                missing_rows.append(f"veracity {' '.join(path)} {param.opts[-1]}")

    walk(cli, [])
    assert not missing_rows, "number flags without a bad-value row: " + ", ".join(missing_rows)


# number flags every value of which is valid (no row needed), with the reason
# seeds of a Python random sample: any integer
NOT_RANGED = {"bench run": ("seed",), "bench throughput": ("seed",)}


def test_debug_shows_the_traceback_then_the_one_line_error(tmp_path):
    _register()
    env = base_env(tmp_path)
    res = CliRunner().invoke(cli, ["--debug", "methods", "show", "nope"], env=env)
    assert res.exit_code == 2 and "Traceback" in res.stderr
    assert res.stderr.splitlines()[-2:] == ["error: unknown method 'nope'",
                                             "hint: choose one of: direct, rag, mermaid, emulate, "
                                             "trification, zofia"]
    res = CliRunner().invoke(cli, ["methods", "show", "nope"], env=env)
    assert "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 2
    res = CliRunner().invoke(cli, ["methods", "show", "nope"], env={**env, "VERACITY_DEBUG": "1"})
    assert "Traceback" in res.stderr


def test_an_unexpected_error_is_one_line_naming_a_bug(monkeypatch, tmp_path):
    import veracity.cli.methods as methods_cli

    def broken(name, with_schema=True):
        raise KeyError("roles")

    monkeypatch.setattr(methods_cli, "method_record", broken)
    _register()
    res = CliRunner().invoke(cli, ["methods", "show", "rag"], env=base_env(tmp_path))
    assert res.exit_code == 1 and "Traceback" not in res.stderr
    assert res.stderr.splitlines() == [
        "error: unexpected KeyError in `veracity methods show`: 'roles'",
        "hint: this is a bug in veracity: run the same command as `veracity --debug ...` and report the "
        "traceback"]


def test_an_error_naming_brackets_is_printed_as_is(tmp_path):
    """A message holding ``[...]`` (a path, ``[Errno 13]``) is plain text, not rich markup."""
    from veracity.cli._common import fail

    _register()
    import click

    @click.command("boom")
    def boom() -> None:
        fail("cannot open [/sys/x] ([Errno 13] denied)", "see [cpu] extra")

    cli.add_command(boom)
    try:
        res = CliRunner().invoke(cli, ["boom"], env=base_env(tmp_path))
    finally:
        cli.commands.pop("boom")
    assert res.stderr.splitlines() == ["error: cannot open [/sys/x] ([Errno 13] denied)",
                                       "hint: see [cpu] extra"]


def test_a_group_without_a_command_still_shows_its_help(tmp_path):
    _register()
    res = CliRunner().invoke(cli, ["bench"], env=base_env(tmp_path))
    assert res.exit_code == 2 and "error:" not in res.stderr and "Commands:" in res.stderr
