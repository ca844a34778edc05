"""The web app's Prometheus metrics (text exposition format 0.0.4), kept in memory.

- ``veracity_http_requests_total{method, route, status}``: requests by route template (never the raw path,
  so user input cannot grow the label set), and ``veracity_http_request_duration_seconds`` (histogram).
- ``veracity_claims_total{label}``: claims verified (single checks and batch jobs), by verdict label;
  ``veracity_claim_failures_total``: claims whose check failed.
- ``veracity_claim_duration_seconds`` (histogram): time to verify one claim.
- ``veracity_checks_in_flight`` and ``veracity_jobs_active`` (gauges).
"""

from __future__ import annotations

import threading
from collections import defaultdict

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CLAIM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, le in enumerate(self.buckets):
            if value <= le:
                self.counts[i] += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out = [f'{name}_bucket{{{labels}{sep}le="{_num(le)}"}} {c}' for le, c in zip(self.buckets,
                                                                                     self.counts,
                                                                                     strict=True)]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {self.sum:.6f}", f"{name}_count{braces} {self.count}"]
        return out


def _num(x: float) -> str:
    return repr(float(x))


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.request_seconds: dict[tuple[str, str], _Histogram] = {}
        self.claims: dict[str, int] = defaultdict(int)
        self.failures = 0
        self.claim_seconds = _Histogram(CLAIM_BUCKETS)

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            hist = self.request_seconds.setdefault((method, route), _Histogram(REQUEST_BUCKETS))
            hist.observe(seconds)

    def claim(self, label: str | None, seconds: float) -> None:
        """One claim verified (``label``) or failed (None), in ``seconds``."""
        with self._lock:
            if label is None:
                self.failures += 1
            else:
                self.claims[label] += 1
                self.claim_seconds.observe(seconds)

    def render(self, checks_in_flight: int = 0, jobs_active: int = 0) -> str:
        with self._lock:
            out = ["# HELP veracity_http_requests_total HTTP requests by method, route template and status.",
                   "# TYPE veracity_http_requests_total counter"]
            for (method, route, status), n in sorted(self.requests.items()):
                out.append(f'veracity_http_requests_total{{method="{_esc(method)}",route="{_esc(route)}",'
                           f'status="{status}"}} {n}')
            out += ["# HELP veracity_http_request_duration_seconds Time to answer a request.",
                    "# TYPE veracity_http_request_duration_seconds histogram"]
            for (method, route), hist in sorted(self.request_seconds.items()):
                out += hist.lines("veracity_http_request_duration_seconds",
                                  f'method="{_esc(method)}",route="{_esc(route)}"')
            out += ["# HELP veracity_claims_total Claims verified, by verdict label.",
                    "# TYPE veracity_claims_total counter"]
            for label, n in sorted(self.claims.items()):
                out.append(f'veracity_claims_total{{label="{_esc(label)}"}} {n}')
            out += ["# HELP veracity_claim_failures_total Claims whose check failed.",
                    "# TYPE veracity_claim_failures_total counter",
                    f"veracity_claim_failures_total {self.failures}",
                    "# HELP veracity_claim_duration_seconds Time to verify one claim.",
                    "# TYPE veracity_claim_duration_seconds histogram"]
            out += self.claim_seconds.lines("veracity_claim_duration_seconds")
            out += ["# HELP veracity_checks_in_flight Single checks running now.",
                    "# TYPE veracity_checks_in_flight gauge", f"veracity_checks_in_flight {checks_in_flight}",
                    "# HELP veracity_jobs_active Batch jobs queued or running.",
                    "# TYPE veracity_jobs_active gauge", f"veracity_jobs_active {jobs_active}"]
        return "\n".join(out) + "\n"
