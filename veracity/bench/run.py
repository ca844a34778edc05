"""`veracity bench run`: one method over one dataset, scored, into a resumable run directory.

The run itself (:func:`bench_run`); its parts live by job: the run configuration
(:mod:`veracity.bench.config`), the run manifest (:mod:`veracity.bench.manifest`), scoring
(:mod:`veracity.bench.scoring`), the report (:mod:`veracity.bench.report`) and ``bench compare``
(:mod:`veracity.bench.compare`); their public names are importable from here as well.

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

Evidence setting (``evidence``, :data:`veracity.pipeline.evidence.EVIDENCE_SETTINGS`): ``open`` (default:
the index), ``gold`` (each claim sees only its own gold passages: HoVer's supporting-fact paragraphs,
FEVEROUS-S's gold sentences, a claims file's ``evidence`` lists, see :mod:`veracity.bench.datasets.gold`;
claims whose gold evidence is incomplete are left out of the selection, a dataset without gold evidence
is refused in one line before anything starts) or ``none`` (closed book). ``gold`` and ``none`` read no
index (``index`` is ignored with a warning). run.json, metrics.json, report.md and ``bench compare``
show the setting; a run is resumed only with the same one.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Callable

from veracity.bench.config import RunConfig
from veracity.bench.datasets import load_dataset
from veracity.bench.manifest import (PREDICTIONS_FILE, RUN_FILE, _versions, _write_json, describe_endpoint,
                                     evidence_meaning, leakage_check, read_run)
from veracity.bench.report import finalize
from veracity.config import Settings
from veracity.errors import ConfigError, EndpointBusyError, EndpointError, endpoint_stop_hint
from veracity.pipeline.labels import label_space
from veracity.pipeline.results import RunManifest, ServedModel


def bench_run(cfg: RunConfig, out_dir: Path | str, *, settings: Settings | None = None,
              data_dir: str | None = None,
              progress: bool = False, llm: Any = None, on_result: Callable[[dict[str, Any]],
                                                                           None] | None = None,
              on_warning: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``cfg`` into ``out_dir`` (resuming what is there) and return its metrics.

    The claims run on the verifier config's backend: in this process (``local``) or as a Ray Data pipeline
    (``ray``, with its address and actors: :mod:`veracity.pipeline.backends.ray`); each session in run.json
    records its backend. A run started on one backend resumes on the other. ``settings`` (default: the
    verifier config's) replace the config's settings (its limits and endpoint stay as the config has them).

    The label space is the dataset's declared one unless ``cfg.labels`` says otherwise (then
    ``on_warning`` gets a line saying so, default :func:`warnings.warn`; the report says it too).
    ``llm`` replaces the endpoint (tests pass a scripted stand-in). An EndpointError stops the run after
    the results so far are scored; it is re-raised with the run directory in its message.
    """
    from veracity.pipeline.api import Verifier

    settings = settings or cfg.verifier.settings
    out_dir = Path(out_dir).expanduser()
    dataset = load_dataset(cfg.dataset, data_dir or settings.data_dir, limit=cfg.limit, seed=cfg.seed,
                           hops=cfg.hops,
                           variant=cfg.variant, label_map=cfg.label_map, evidence=cfg.evidence,
                           sample=cfg.sample,
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
    # the run directory is the run's state directory (MERMAID keeps its evidence memory there): runs do
    # not feed each other, and resuming a run keeps its state
    # (the endpoint and model are the config's: RunConfig.of filled them in from the settings, once)
    config = cfg.verifier.replace(labels=space.name, state_dir=out_dir, settings=settings,
                                  index=cfg.index if cfg.evidence == "open" else None)
    overrides = dict(config.method.params)
    verifier = Verifier.from_config(config, llm=llm)
    try:
        for c, g in dataset.claims:  # each prediction carries its gold label (Verdict.to_dict)
            c.meta["gold_label"] = g.value
        # the batch's checks, before the endpoint or any write: the claims, their gold evidence, and the
        # predictions file's resume guard (the same method, parameters, label space and evidence setting)
        _, claims = verifier.prepare_many([c for c, _ in dataset.claims], out_dir / PREDICTIONS_FILE, None)
        leakage = leakage_check(verifier.searcher, dataset, cfg.allow_leakage, cfg.evidence)
        if llm is not None:
            model = {"endpoint": None, "model": getattr(llm, "model", type(llm).__name__),
                     "server": {"managed": False}}
        else:
            url, served = verifier.resolve_endpoint()
            model = describe_endpoint(url, served, settings)
        out_dir.mkdir(parents=True, exist_ok=True)
        run = previous or {
            "config": cfg.record(),
            "identity": cfg.identity(),
            "created_at": time.time(),
            "sessions": [],
        }
        runs_on = (ServedModel.of(llm) if llm is not None else
                   ServedModel(model["model"], model["endpoint"], settings.temperature, settings.seed))
        run.update({
            "dataset": {**dataset.manifest(), "data_dir": str(data_dir or settings.data_dir or "") or None},
            # the run's record, as the predictions' manifest has it (one type, built in one place)
            "manifest": RunManifest.of(verifier.engine, out_dir / PREDICTIONS_FILE).record(runs_on),
            "evidence_meaning": evidence_meaning(cfg.evidence, dataset.gold),
            "method_overrides": overrides,
            "order": cfg.order,
            "model": model,
            "leakage": leakage,
            "concurrency": verifier.concurrency,
            "llm_concurrency": verifier.llm_concurrency,
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
            stats = verifier.verify_many(claims, out=out_dir / PREDICTIONS_FILE, progress=progress,
                                         on_result=on_result)
            session.update(done=stats.done, failed=[list(f) for f in stats.failed])
        except EndpointError as exc:
            stopped = exc
            st = getattr(exc, "stats", None)
            session.update(done=getattr(st, "done", 0), stopped=str(exc))
        finally:
            session["elapsed_s"] = time.perf_counter() - t0
            run["sessions"].append(session)
            applied = verifier.engine.calibration_record()
            if applied is not None:  # the served model's name is known once the client started
                run["manifest"].setdefault("confidence", {})["calibration"] = applied
            _write_json(out_dir / RUN_FILE, run)
        metrics = finalize(out_dir, dataset)
        if stopped is not None:
            kind = EndpointBusyError if isinstance(stopped, EndpointBusyError) else EndpointError
            raise kind(f"{stopped}; {metrics['n_predicted']} of {metrics['n_claims']} claims are scored in "
                       f"{out_dir}",
                       hint=endpoint_stop_hint(stopped))
        metrics["failed"] = session["failed"]
        return metrics
    finally:
        verifier.close()
