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
