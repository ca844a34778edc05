"""benchmarks/load_test.py: the figures it reports from a round's results file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("load_test", ROOT / "benchmarks" / "load_test.py")
load_test = importlib.util.module_from_spec(spec)
spec.loader.exec_module(load_test)


def test_quantiles_interpolate_between_sorted_latencies():
    values = [4.0, 1.0, 3.0, 2.0]
    assert load_test.quantile(values, 0.5) == pytest.approx(2.5)
    assert load_test.quantile(values, 0.99) == pytest.approx(3.97)
    assert load_test.quantile([7.0], 0.99) == 7.0


def test_a_fallback_is_a_traced_failed_role_or_the_binary_rule():
    rec = lambda *kinds: {"trace": {"events": [{"kind": k} for k in kinds]}}  # noqa: E731
    assert load_test.fell_back(rec("direct.agent_failed"))
    assert load_test.fell_back(rec("tool.search", "label_space.forced"))
    assert not load_test.fell_back(rec("tool.search"))
    assert load_test.fell_back({"trace": {"events": [{"kind": "mermaid.final", "fallback": "no verdict"}]}})
    assert not load_test.fell_back({"trace": {}})
