"""The endpoint's Prometheus ``/metrics`` scraped (:class:`MetricsProbe`) and sampled while a
`bench throughput` level runs (:class:`Sampler`: the gauges every poll interval, GPU memory every few
seconds)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from veracity.bench.gpu import gpu_memory
from veracity.bench.prom import Metrics, parse_prometheus

GPU_SAMPLE_EVERY_S = 2.0
Notify = Callable[[str], None]


class MetricsProbe:
    """Scrapes the endpoint's Prometheus ``/metrics``; ``scrape`` raises on any failure."""

    def __init__(self, url: str, timeout_s: float = 5.0):
        self.url = url
        self.timeout_s = timeout_s
        self._client: Any = None

    async def scrape(self) -> Metrics:
        import httpx

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s)
        resp = await self._client.get(self.url)
        if resp.status_code != 200:
            raise ValueError(f"answered HTTP {resp.status_code}")
        metrics = parse_prometheus(resp.text)
        if not len(metrics):
            raise ValueError("returned no Prometheus samples")
        return metrics

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class Sampler:
    """Snapshots around one level and gauge polls (and GPU memory) while it runs."""

    def __init__(self, probe: Any, interval_s: float, warn: Notify, gpu: bool, warned: set[str]):
        self.probe = probe
        self.interval_s = interval_s
        self.warn = warn
        self.gpu = gpu
        self.polls: list[Metrics] = []
        self.poll_errors = 0
        self.gpu_samples: list[dict[str, Any]] = []
        self.warned = warned  # shared by the levels: an unreachable /metrics is reported once
        self._task: asyncio.Task | None = None

    async def snapshot(self) -> Metrics | None:
        if self.probe is None:
            return None
        try:
            return await self.probe.scrape()
        except Exception as exc:
            if "unreachable" not in self.warned:
                self.warned.add("unreachable")
                self.warn(f"cannot read {getattr(self.probe, 'url', 'the server metrics')} "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:160]}): "
                          "server-side figures are n/a")
            return None

    async def _poll(self) -> None:
        last_gpu = 0.0
        while True:
            await asyncio.sleep(self.interval_s)
            if self.probe is not None:
                try:
                    self.polls.append(await self.probe.scrape())
                except Exception:
                    self.poll_errors += 1
            if self.gpu and time.monotonic() - last_gpu >= GPU_SAMPLE_EVERY_S:
                last_gpu = time.monotonic()
                sample = await asyncio.to_thread(gpu_memory)
                if sample is not None:
                    self.gpu_samples.append(sample)

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
