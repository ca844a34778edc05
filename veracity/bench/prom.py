"""Prometheus text format (what vLLM serves at ``/metrics``), parsed, and vLLM's figures read from it.

:func:`parse_prometheus` turns the exposition text into :class:`Metrics`: samples with labels, plus the
``# TYPE`` of each family. Lookups never raise on a missing name; they return None, so a server that
lacks a metric (another vLLM version, a CPU build) shows "n/a" instead of failing.

Counters: the client library appends ``_total`` to a counter's sample name (``vllm:prefix_cache_hits``
is served as ``vllm:prefix_cache_hits_total``), so :meth:`Metrics.counter` accepts either spelling.
Histograms: :meth:`Metrics.histogram` gathers ``_sum``, ``_count`` and ``_bucket`` of a family.
Label filters only constrain labels a series has: ``{"model_name": "m"}`` selects the series of model
``m`` and also series without a ``model_name`` label; matching series are summed (e.g. the ``engine``
of a data-parallel server, the ``finished_reason`` of ``vllm:request_success``).

:func:`server_figures` computes what ``veracity bench throughput`` reports for one level from a
snapshot before it, one after it, and the gauge polls in between.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE_RE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})?\s+(\S+)(?:\s+(\S+))?\s*$")
_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass
class Histogram:
    """One histogram family summed over its matching series: ``buckets`` are (upper bound, cumulative
    count)."""

    sum: float
    count: float
    buckets: list[tuple[float, float]] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def minus(self, earlier: "Histogram") -> "Histogram":
        """The observations made between ``earlier`` and this one (a counter reset gives None figures)."""
        before = dict(earlier.buckets)
        return Histogram(self.sum - earlier.sum, self.count - earlier.count,
                         [(le, c - before.get(le, 0.0)) for le, c in self.buckets])

    def quantile(self, q: float) -> float | None:
        """Prometheus-style ``histogram_quantile``: linear interpolation inside the bucket holding rank q."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        prev_le, prev_c = 0.0, 0.0
        for le, c in sorted(self.buckets):
            if c >= rank:
                if math.isinf(le):
                    return prev_le  # above the largest finite bound: its bound is all that is known
                if c == prev_c:
                    return le
                return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
            prev_le, prev_c = le, c
        return None


def _unescape(value: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _ESCAPES[m.group(0)], value)


def _parse_labels(text: str) -> tuple[tuple[str, str], ...] | None:
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL_RE.match(text, pos)
        if m is None:
            return None
        out.append((m.group(1), _unescape(m.group(2))))
        pos = m.end()
    return tuple(sorted(out))


def _parse_value(text: str) -> float | None:
    try:
        return float(text)  # accepts +Inf, -Inf, NaN
    except ValueError:
        return None


class Metrics:
    """Samples of one scrape; every lookup returns None when the metric is not there."""

    def __init__(self, samples: Iterable[Sample] = (), types: Mapping[str, str] | None = None,
                 bad_lines: int = 0):
        self.samples: list[Sample] = list(samples)
        self.types: dict[str, str] = dict(types or {})
        self.bad_lines = bad_lines
        self._by_name: dict[str, list[Sample]] = {}
        for s in self.samples:
            self._by_name.setdefault(s.name, []).append(s)

    def __len__(self) -> int:
        return len(self.samples)

    def names(self) -> set[str]:
        return set(self._by_name)

    def has(self, name: str) -> bool:
        """Whether a metric family (or sample name) is there: a counter's ``_total`` and a histogram's
        ``_sum`` / ``_count`` samples count for their family."""
        return any(n in self._by_name or n in self.types for n in (name, name + "_total", name + "_sum",
                                                                   name + "_count"))

    def series(self, name: str, labels: Mapping[str, str] | None = None) -> list[Sample]:
        """Samples called ``name`` whose labels agree with ``labels`` (see the module docstring)."""
        want = dict(labels or {})
        out = []
        for s in self._by_name.get(name, []):
            have = s.label_dict
            if all(have.get(k, v) == v for k, v in want.items()):
                out.append(s)
        return out

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """Sum of the matching samples of ``name``; None when there are none."""
        found = self.series(name, labels)
        return sum(s.value for s in found) if found else None

    def gauge(self, *names: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The first of ``names`` that is present (newer name first, older spellings after)."""
        for name in names:
            v = self.value(name, labels)
            if v is not None:
                return v
        return None

    def counter(self, *names: str, labels: Mapping[str, str] | None = None) -> float | None:
        """A counter by its family name or its sample name (``_total`` suffix optional); first present
        wins."""
        for name in names:
            base = name[:-len("_total")] if name.endswith("_total") else name
            for candidate in (base + "_total", base):
                v = self.value(candidate, labels)
                if v is not None:
                    return v
        return None

    def histogram(self, *names: str, labels: Mapping[str, str] | None = None) -> Histogram | None:
        """The first of ``names`` with ``_sum`` and ``_count`` samples, buckets summed by bound."""
        for name in names:
            total = self.value(name + "_sum", labels)
            count = self.value(name + "_count", labels)
            if total is None or count is None:
                continue
            buckets: dict[float, float] = {}
            for s in self.series(name + "_bucket", labels):
                le = _parse_value(s.label_dict.get("le", ""))
                if le is not None:
                    buckets[le] = buckets.get(le, 0.0) + s.value
            return Histogram(total, count, sorted(buckets.items()))
        return None


def parse_prometheus(text: str) -> Metrics:
    """Parse Prometheus text exposition; malformed lines are counted in ``bad_lines`` and skipped."""
    samples: list[Sample] = []
    types: dict[str, str] = {}
    bad = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3].strip()
            continue
        m = _SAMPLE_RE.match(line)
        if m is None:
            bad += 1
            continue
        labels = _parse_labels(m.group(2)) if m.group(2) is not None else ()
        value = _parse_value(m.group(3))
        if labels is None or value is None:
            bad += 1
            continue
        samples.append(Sample(m.group(1), labels, value))
    return Metrics(samples, types, bad)


# -- where /metrics lives ----------------------------------------------------------------------------
def metrics_url(endpoint: str) -> str:
    """``http://host:port/v1`` (or without /v1) -> ``http://host:port/metrics``."""
    url = endpoint.rstrip("/")
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    if url.endswith("/v1"):
        url = url[:-3]
    return url + "/metrics"


def scrape(url: str, timeout_s: float = 5.0) -> Metrics:
    """GET ``url`` and parse it; raises ``OSError``-like httpx errors and ValueError for a non-200 reply."""
    import httpx

    resp = httpx.get(url, timeout=timeout_s)
    if resp.status_code != 200:
        raise ValueError(f"{url} answered {resp.status_code}")
    return parse_prometheus(resp.text)


# -- vLLM's figures ------------------------------------------------------------------------------------
# Names, newest first; older vLLM releases used the later spellings.
PREFIX_QUERIES = ("vllm:prefix_cache_queries",)
PREFIX_HITS = ("vllm:prefix_cache_hits",)
PREFIX_HIT_RATE_GAUGE = ("vllm:gpu_prefix_cache_hit_rate", "vllm:cpu_prefix_cache_hit_rate")  # vLLM v0
RUNNING = ("vllm:num_requests_running",)
WAITING = ("vllm:num_requests_waiting",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc")
TTFT = ("vllm:time_to_first_token_seconds",)
TPOT = ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds")
QUEUE_TIME = ("vllm:request_queue_time_seconds",)
E2E = ("vllm:e2e_request_latency_seconds",)
PROMPT_TOKENS = ("vllm:prompt_tokens",)
GENERATION_TOKENS = ("vllm:generation_tokens",)
REQUESTS_DONE = ("vllm:request_success",)
PREEMPTIONS = ("vllm:num_preemptions",)
# llama-server (``--metrics``, which a managed one is started with): no labels, no histograms; prompt tokens
# read afresh and reused from its prompt cache, tokens generated and the slots' time generating them, the
# requests being processed and those deferred (waiting for a slot)
LLAMA_PROMPT = ("llamacpp:prompt_tokens",)
LLAMA_PROMPT_CACHED = ("llamacpp:prompt_tokens_cached",)
LLAMA_GENERATED = ("llamacpp:tokens_predicted",)
LLAMA_GENERATING_S = ("llamacpp:tokens_predicted_seconds",)
LLAMA_RUNNING = ("llamacpp:requests_processing",)
LLAMA_WAITING = ("llamacpp:requests_deferred",)


def _delta(before: Metrics | None, after: Metrics | None, names: Sequence[str],
           labels: Mapping[str, str] | None) -> float | None:
    if before is None or after is None:
        return None
    a, b = after.counter(*names, labels=labels), before.counter(*names, labels=labels)
    if a is None or b is None or a < b:  # missing, or the server restarted in between
        return None
    return a - b


def _hist_delta(before: Metrics | None, after: Metrics | None, names: Sequence[str],
                labels: Mapping[str, str] | None) -> Histogram | None:
    if before is None or after is None:
        return None
    a, b = after.histogram(*names, labels=labels), before.histogram(*names, labels=labels)
    if a is None or b is None or a.count < b.count:
        return None
    return a.minus(b)


def _gauge_stats(polls: Sequence[Metrics], names: Sequence[str], labels: Mapping[str, str] | None
                 ) -> tuple[float | None, float | None]:
    values = [v for v in (p.gauge(*names, labels=labels) for p in polls) if v is not None]
    if not values:
        return None, None
    return statistics.fmean(values), max(values)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def llama_figures(before: Metrics | None, after: Metrics | None, polls: Sequence[Metrics] = ()
                  ) -> dict[str, Any]:
    """llama-server's view of one benchmark level, in :func:`server_figures`' keys; what it does not report
    (time to first token, queue time, request latency, finished requests, KV-cache use, preemptions) is
    None. Its prompt counters are the prefix cache: every prompt token is either read afresh or reused
    (``prompt_tokens_cached``); its time per output token is the slots' generating time over the tokens."""
    gauges = list(polls) + ([after] if after is not None else [])
    fresh = _delta(before, after, LLAMA_PROMPT, None)
    hits = _delta(before, after, LLAMA_PROMPT_CACHED, None)
    queries = _sum(fresh, hits)
    generated = _delta(before, after, LLAMA_GENERATED, None)
    running_mean, running_max = _gauge_stats(gauges, LLAMA_RUNNING, None)
    waiting_mean, waiting_max = _gauge_stats(gauges, LLAMA_WAITING, None)
    hit_rate = _ratio(hits, queries)
    return {
        **vllm_figures(None, None),  # every figure's key, None where llama-server has no counterpart
        "scraped": before is not None and after is not None,
        "polls": len(polls),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": hit_rate,
        "prefix_cache_hit_rate_source": "counters" if hit_rate is not None else None,
        "requests_running_mean": running_mean,
        "requests_running_max": running_max,
        "requests_waiting_mean": waiting_mean,
        "requests_waiting_max": waiting_max,
        "tpot_mean_s": _ratio(_delta(before, after, LLAMA_GENERATING_S, None), generated),
        "prompt_tokens": queries,
        "generation_tokens": generated,
    }


def server_figures(before: Metrics | None, after: Metrics | None, polls: Sequence[Metrics] = (),
                   model: str | None = None) -> dict[str, Any]:
    """The server's view of one benchmark level; every figure is None when the server does not expose it.
    vLLM's metrics, or llama-server's (:func:`llama_figures`) where those are what it serves.

    Counter and histogram figures are deltas between ``before`` and ``after``; gauges (running and
    waiting requests, KV-cache usage) are the mean and maximum over ``polls`` (``after`` is added so a
    level shorter than one poll interval still has a value). ``model`` restricts to that model's series.
    """
    if after is not None and after.has(LLAMA_GENERATED[0]) and not after.has(GENERATION_TOKENS[0]):
        return llama_figures(before, after, polls)
    return vllm_figures(before, after, polls, model)


def vllm_figures(before: Metrics | None, after: Metrics | None, polls: Sequence[Metrics] = (),
                 model: str | None = None) -> dict[str, Any]:
    """vLLM's view of one benchmark level (:func:`server_figures`); with neither scrape, every key with
    None (``scraped`` False)."""
    labels = {"model_name": model} if model else None
    gauges = list(polls) + ([after] if after is not None else [])
    queries = _delta(before, after, PREFIX_QUERIES, labels)
    hits = _delta(before, after, PREFIX_HITS, labels)
    hit_rate = _ratio(hits, queries)
    hit_rate_source = "counters" if hit_rate is not None else None
    if hit_rate is None and after is not None:  # older servers: a gauge over the server's recent window
        hit_rate = after.gauge(*PREFIX_HIT_RATE_GAUGE, labels=labels)
        hit_rate_source = "gauge" if hit_rate is not None else None
    ttft = _hist_delta(before, after, TTFT, labels)
    tpot = _hist_delta(before, after, TPOT, labels)
    queue = _hist_delta(before, after, QUEUE_TIME, labels)
    e2e = _hist_delta(before, after, E2E, labels)
    running_mean, running_max = _gauge_stats(gauges, RUNNING, labels)
    waiting_mean, waiting_max = _gauge_stats(gauges, WAITING, labels)
    kv_mean, kv_max = _gauge_stats(gauges, KV_USAGE, labels)
    return {
        "scraped": before is not None and after is not None,
        "polls": len(polls),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": hit_rate,
        "prefix_cache_hit_rate_source": hit_rate_source,
        "requests_running_mean": running_mean,
        "requests_running_max": running_max,
        "requests_waiting_mean": waiting_mean,
        "requests_waiting_max": waiting_max,
        "kv_cache_usage_mean": kv_mean,
        "kv_cache_usage_max": kv_max,
        "ttft_mean_s": ttft.mean if ttft else None,
        "ttft_p50_s": ttft.quantile(0.5) if ttft else None,
        "ttft_p95_s": ttft.quantile(0.95) if ttft else None,
        "tpot_mean_s": tpot.mean if tpot else None,
        "queue_time_mean_s": queue.mean if queue else None,
        "request_latency_mean_s": e2e.mean if e2e else None,
        "requests_finished": _delta(before, after, REQUESTS_DONE, labels),
        "prompt_tokens": _delta(before, after, PROMPT_TOKENS, labels),
        "generation_tokens": _delta(before, after, GENERATION_TOKENS, labels),
        "preemptions": _delta(before, after, PREEMPTIONS, labels),
    }
