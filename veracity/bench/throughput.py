"""`veracity bench throughput`: end-to-end throughput of one method, claims in flight = 1, 4, 16, 64, ...

Each concurrency level verifies its own claims with the whole agentic pipeline (retrieval, every LLM
call, memory) and reports, per level:

- client side: claims/min, LLM tokens/s (prompt, completion, total), LLM calls per claim, per-claim
  latency p50 / p95, failed claims;
- server side, from the endpoint's Prometheus ``/metrics`` (scraped before and after the level, and
  polled every ``poll_interval_s`` during it for the gauges): prefix-cache hit rate, running and
  waiting requests (mean / max), mean time to first token and per output token, KV-cache usage,
  requests and tokens the server processed (see :func:`veracity.bench.prom.server_figures`). vLLM reports
  them all; llama-server (a managed one runs with ``--metrics``) the prefix cache, running and deferred
  requests, time per output token and tokens, the rest n/a (:func:`veracity.bench.prom.llama_figures`);
- GPU memory used (max over the level) when this machine has an NVIDIA GPU.

A level's concurrency is the number of claims in flight; the LLM request limit stays at its default
(``Settings.llm_concurrency``, 256 = vLLM's default ``--max-num-seqs``), so what varies is the claims
in flight and the server's batch is never capped by the client.

Levels are independent: the claims of the levels (and of the warm-up) are disjoint slices of one seeded
sample, so vLLM's prefix cache never sees a claim's prompts twice, and each level's folder is its state
directory, so it gets a fresh run state (MERMAID: a fresh evidence memory in ``c0004/memory/``).
Prompts still share their instructions, which is the prefix cache's normal, intended use. The server's
cache outlives a benchmark: claims an earlier run sent (same dataset and seed) may still be cached there,
so pass another ``seed`` for claims the server has not seen.

The output directory holds ``report.json``, ``report.md``, ``scaling.png`` and one folder per level
(``c0004/results.jsonl`` with every verdict and trace, ``c0004/memory/evidence.sqlite`` where used). The
reports
are rewritten after every level, so an interrupted benchmark keeps the levels it finished.

The server may serve other clients at the same time; its counters then include their work. A level
whose server finished more requests than the benchmark made is flagged in the report.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from veracity.bench.metrics import efficiency_summary
from veracity.bench.gpu import gpu_memory
from veracity.bench.levels import default_claims_per_level, level_dir_name, plan_level_sizes
from veracity.bench.prom import metrics_url, server_figures
from veracity.bench.sampling import MetricsProbe, Sampler
from veracity.bench.throughput_report import write_reports
from veracity.config import Settings, split_endpoints
from veracity.errors import ConfigError, EndpointError
from veracity.pipeline.config import VerifierConfig

DEFAULT_LEVELS = (1, 4, 16, 64)
SETTLE_S = 0.5

Notify = Callable[[str], None]


# -- the benchmark ----------------------------------------------------------------------------------
@dataclass
class ThroughputConfig:
    """A throughput benchmark: the run's ``verifier`` config (method, parameters and index, checked once when
    it is built; :meth:`of` builds it from them) and the benchmark's own settings."""

    verifier: VerifierConfig
    levels: list[int] = field(default_factory=lambda: list(DEFAULT_LEVELS))
    dataset: str = "hover"
    data_dir: str | None = None
    claims_per_level: int | None = None
    seed: int = 0
    warmup: int = 1  # claims verified (at concurrency 1) before the first level, not reported
    poll_interval_s: float = 0.5

    @classmethod
    def of(cls, *, method: str, params: dict[str, Any] | None = None, index: Any = None,
           **rest: Any) -> "ThroughputConfig":
        """From the method, its parameters and the index (a directory, or an open searcher) and the
        benchmark's settings (``rest``)."""
        return cls(verifier=VerifierConfig.of(method=method, params=params or {}, index=index), **rest)


def _resolve_endpoint(settings: Settings) -> tuple[str, str]:
    from veracity.serving.server import ensure_endpoint, health

    url, model = ensure_endpoint(settings, settings.model)
    served = health(url, timeout=10.0)
    if served is None:
        raise EndpointError(f"the model endpoint {url} does not answer",
                            hint="start a server with `veracity serve --detach`, or pass the right "
                                 "--endpoint")
    if not served:
        raise EndpointError(f"the model endpoint {url} serves no model", hint="start vLLM with --model")
    if model and model not in served:
        raise EndpointError(f"the endpoint {url} serves {', '.join(served)}, not {model}",
                            hint=f"pass --model {served[0]}")
    return url, model or served[0]


def _level_record(concurrency: int, claims: list[Any], stats: Any, rows: list[dict[str, Any]], wall_s: float,
                  server: dict[str, Any], gpu: list[dict[str, Any]], level_dir: str,
                  stopped: str | None) -> dict[str, Any]:
    eff = efficiency_summary(rows, wall_s)
    done = len(rows)
    per_s = (lambda x: x / wall_s if wall_s > 0 else 0.0)  # noqa: E731
    record = {
        "concurrency": concurrency,
        "claims": len(claims),
        "done": done,
        "failed": len(stats.failed) if stats is not None else 0,
        "failed_claims": [list(f) for f in stats.failed] if stats is not None else [],
        "not_run": len(claims) - done - (len(stats.failed) if stats is not None else 0),
        "stopped": stopped,
        "wall_s": wall_s,
        "claims_per_min": 60.0 * done / wall_s if wall_s > 0 else 0.0,
        "prompt_tokens": eff["prompt_tokens"],
        "completion_tokens": eff["completion_tokens"],
        "prompt_tokens_per_s": per_s(eff["prompt_tokens"]),
        "completion_tokens_per_s": per_s(eff["completion_tokens"]),
        "tokens_per_s": per_s(eff["prompt_tokens"] + eff["completion_tokens"]),
        "llm_calls": eff["llm_calls"],
        "llm_calls_per_claim": eff["llm_calls_per_claim"] if done else None,
        "tokens_per_claim": eff["tokens_per_claim"] if done else None,
        "tool_calls_per_claim": eff["tool_calls_per_claim"] if done else None,
        "latency_mean_s": eff["latency_mean_s"] if done else None,
        "latency_p50_s": eff["latency_p50_s"] if done else None,
        "latency_p95_s": eff["latency_p95_s"] if done else None,
        "server": server,
        "gpu_memory_used_max_mib": max((g["used_mib"] for g in gpu), default=None),
        "gpu_memory_total_mib": gpu[-1]["total_mib"] if gpu else None,
        "claim_ids": [c.id for c in claims],
        "dir": level_dir,
    }
    calls = [c for r in rows for c in ((r.get("trace") or {}).get("llm_calls") or [])]
    reported = [c for c in calls if isinstance(c.get("cached_prompt_tokens"), int)]
    prompt = sum(c.get("prompt_tokens") or 0 for c in reported)
    record["own_prefix_cache_hit_rate"] = (sum(c["cached_prompt_tokens"] for c in reported)
                                           / prompt) if prompt else None
    finished = server.get("requests_finished")
    record["other_traffic"] = bool(finished is not None and not record["failed"]
                                   and finished > eff["llm_calls"])
    return record


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


async def abench_throughput(cfg: ThroughputConfig, out_dir: Path | str, *, settings: Settings | None = None,
                            llm: Any = None, probe: Any = "auto", progress: bool = False,
                            notify: Notify | None = None, warn: Notify | None = None) -> dict[str, Any]:
    """Run every level of ``cfg`` into ``out_dir``; return the report (also written as report.json/.md).

    ``llm`` replaces the endpoint (tests pass a scripted stand-in); ``probe`` is what reads the server's
    metrics (``"auto"``: the endpoint's /metrics; None: no server figures; tests pass a fake with an
    async ``scrape()``). An EndpointError stops the benchmark after writing the levels finished so far.
    """
    from veracity.bench.datasets import load_dataset
    from veracity.pipeline.api import Verifier, open_index

    settings = settings or Settings()
    notify = notify or (lambda s: None)
    warnings: list[str] = []

    def warn_(msg: str) -> None:
        warnings.append(msg)
        (warn or notify)(msg)

    # options, method and dataset first: a mistake is reported before any server or index is touched
    levels = list(cfg.levels)
    if cfg.warmup < 0:
        raise ConfigError(f"--warmup must be 0 or more, got {cfg.warmup}", hint="e.g. --warmup 1")
    if cfg.poll_interval_s <= 0:
        raise ConfigError("the metrics poll interval must be positive")
    spec = cfg.verifier.method.spec  # method and parameters were checked when the config was built
    out_dir = Path(out_dir).expanduser()
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"{out_dir} exists and is not empty",
                          hint="pass a new --out directory (benchmarks do not resume)")
    wanted = cfg.warmup + (sum(cfg.claims_per_level or default_claims_per_level(c) for c in levels))
    dataset = load_dataset(cfg.dataset, cfg.data_dir or settings.data_dir, limit=wanted, seed=cfg.seed)
    available = len(dataset.claims)
    warmup_n = min(cfg.warmup, max(0, available - len(levels)))
    sizes, capped = plan_level_sizes(levels, available - warmup_n, cfg.claims_per_level)
    if capped:
        warn_(f"the dataset has {dataset.total} claims: levels cut to {', '.join(map(str, sizes))} claims "
              "so that no claim is reused")
    claims = [c for c, _ in dataset.claims]
    warm_claims, rest = claims[:warmup_n], claims[warmup_n:]
    slices, start = [], 0
    for n in sizes:
        slices.append(rest[start:start + n])
        start += n

    # the index before the endpoint: a wrong --index is reported without starting or waiting for a server
    searcher = None
    own_searcher = False
    index = cfg.verifier.evidence.index
    if spec.needs_index or index is not None:
        searcher = open_index(index, settings)
        own_searcher = searcher is not index
    if llm is None:
        try:
            url, model = _resolve_endpoint(settings)
        except BaseException:
            if own_searcher and hasattr(searcher, "close"):
                searcher.close()
            raise
    else:
        url, model = None, getattr(llm, "model", type(llm).__name__)
    if probe == "auto":
        # server-side figures are one server's: with several endpoints (a pool) they would describe a part
        # of the load only, so none are read (measure one replica with --endpoint for them)
        several = bool(url) and len(split_endpoints(url)) > 1
        if several:
            warn_("several endpoints: vLLM's /metrics figures are per server, so none are read here "
                   "(pass one endpoint to measure a replica's server-side figures)")
        probe = MetricsProbe(metrics_url(url)) if url and not several else None
    gpu_now = gpu_memory()

    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "kind": "veracity-bench-throughput",
        "method": spec.name,
        "params": dict(cfg.verifier.method.params),
        "dataset": dataset.name if not cfg.dataset.startswith("jsonl:") else cfg.dataset,
        "dataset_sha256": dataset.sha256,
        "seed": cfg.seed,
        "levels_requested": levels,
        "claims_per_level": sizes,
        "warmup_claims": warmup_n,
        "disjoint": True,
        "disjointness": "each level verifies its own claims (disjoint slices of one seeded sample, warm-up "
                        "excluded) with a fresh run state in its own folder (e.g. a fresh evidence memory): "
                        "no "
                        "level repeats a claim's prompts to the prefix cache or inherits memory from another",
        "llm_concurrency": settings.llm_concurrency,
        "endpoint": url,
        "model": model,
        "metrics_url": getattr(probe, "url", None),
        "index_dir": str(getattr(searcher, "index_dir", "") or "") or None,
        "gpu": gpu_now,
        "poll_interval_s": cfg.poll_interval_s,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "status": "running",
        "warnings": warnings,
        "levels": [],
    }
    write_reports(out_dir, report)

    # verdicts in the dataset's label space, as `bench run` gives them, on the open index and the endpoint
    run = cfg.verifier.replace(labels=dataset.label_space.name, index=searcher, endpoint=url, model=model,
                               settings=settings)

    def verifier_for(level_dir: Path, concurrency: int) -> Any:
        # claims in flight vary (only the execution part is built again); LLM requests in flight stay at the
        # default; the level's folder is its state dir
        return Verifier.from_config(run.replace(concurrency=concurrency, state_dir=level_dir), llm=llm)

    stopped: EndpointError | None = None
    warned: set[str] = set()
    try:
        if warm_claims:
            notify(f"warm-up: {len(warm_claims)} claim(s) at concurrency 1 (not reported)")
            v = verifier_for(out_dir / "warmup", 1)
            try:
                await v.averify_many(warm_claims, out=out_dir / "warmup" / "results.jsonl", concurrency=1)
            except EndpointError as exc:
                stopped = exc
            finally:
                v.close()
        for i, (concurrency, level_claims) in enumerate(zip(levels, slices, strict=True)):
            if stopped is not None:
                break
            name = level_dir_name(concurrency)
            level_dir = out_dir / name
            notify(f"level {i + 1}/{len(levels)}: concurrency {concurrency}, {len(level_claims)} claims")
            sampler = Sampler(probe, cfg.poll_interval_s, warn_, gpu=gpu_now is not None, warned=warned)
            before = await sampler.snapshot()
            v = verifier_for(level_dir, concurrency)
            stats, why = None, None
            sampler.start()
            t0 = time.perf_counter()
            try:
                stats = await v.averify_many(level_claims, out=level_dir / "results.jsonl",
                                             concurrency=concurrency,
                                             progress=progress)
            except EndpointError as exc:
                stats, why, stopped = getattr(exc, "stats", None), str(exc), exc
            finally:
                wall = stats.elapsed_s if stats is not None and stats.elapsed_s else time.perf_counter() - t0
                await sampler.stop()
                v.close()
            if probe is not None:  # let the server's counters take in the level's last requests
                await asyncio.sleep(min(SETTLE_S, cfg.poll_interval_s))
            after = await sampler.snapshot()
            if sampler.poll_errors and (sampler.polls or before is not None or after is not None):
                warn_(f"level {concurrency}: {sampler.poll_errors} of "
                      f"{sampler.poll_errors + len(sampler.polls)} "
                      "metrics polls failed")
            rows = _read_rows(level_dir / "results.jsonl")
            figures = server_figures(before, after, sampler.polls, model=model if probe is not None else None)
            record = _level_record(concurrency, level_claims, stats, rows, wall, figures, sampler.gpu_samples,
                                   name, why)
            if record["other_traffic"]:
                warn_(f"level {concurrency}: the server finished {figures['requests_finished']:.0f} "
                      "requests, this "
                      f"benchmark made {record['llm_calls']}: other clients were using it, its figures "
                      "include their work")
            report["levels"].append(record)
            write_reports(out_dir, report)
            if stopped is not None:
                break
        report["status"] = "stopped" if stopped is not None else "complete"
    except BaseException:
        report["status"] = "interrupted"
        raise
    finally:
        report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        write_reports(out_dir, report)
        if probe is not None and hasattr(probe, "aclose"):
            await probe.aclose()
        if own_searcher and hasattr(searcher, "close"):
            searcher.close()
    if stopped is not None:
        raise EndpointError(f"{stopped}; the {len(report['levels'])} level(s) run so far are in {out_dir}",
                            hint="restart the server and run the benchmark again with a new --out")
    return report


def bench_throughput(cfg: ThroughputConfig, out_dir: Path | str, **kw: Any) -> dict[str, Any]:
    """Synchronous :func:`abench_throughput`."""
    return asyncio.run(abench_throughput(cfg, out_dir, **kw))


