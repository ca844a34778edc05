"""The default method (issue 30 point 6): one constant, used by the CLI, the Python API, the web API and
the page."""

from __future__ import annotations

from click.testing import CliRunner

from tests.unit.scripted_llm import ScriptedLLM, keep_every_passage
from tests.unit.test_web_api import make, rag_reply
from veracity.cli.verify import verify
from veracity.pipeline.api import Verifier
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.methods import DEFAULT_METHOD, METHODS
from veracity.web.routes.checks import VerifyRequest
from veracity.web.routes.texts import CheckTextRequest


def test_the_default_is_rag_the_method_benchmarks_measure_best():
    # benchmarks/BENCHMARKS.md, "Every method beyond HoVer gold" with qwen2.5-coder-1.5b-instruct
    assert DEFAULT_METHOD == "rag" and DEFAULT_METHOD in METHODS


def test_config_api_and_request_models_default_to_it():
    assert VerifierConfig().method.name == DEFAULT_METHOD
    v = Verifier(llm=ScriptedLLM({}), evidence="none")
    try:
        assert v.config.method.name == DEFAULT_METHOD
    finally:
        v.close()
    assert VerifyRequest(claim="Paris is big.").method == DEFAULT_METHOD
    assert CheckTextRequest(text="Paris is big.").method == DEFAULT_METHOD


def test_verify_help_shows_it():
    out = CliRunner().invoke(verify, ["--help"], terminal_width=200).output
    assert f"[default: {DEFAULT_METHOD}]" in out and "[default: mermaid]" not in out


def test_the_page_preselects_it_and_a_request_without_a_method_runs_it(tmp_path):
    client, _ = make(tmp_path, llm=ScriptedLLM({"rag.select": keep_every_passage, "rag.judge": rag_reply}))
    with client:
        assert client.get("/v1/methods").json()["default_method"] == DEFAULT_METHOD
        reply = client.post("/v1/verify", json={"claim": "Paris is big."})
        assert reply.status_code == 200, reply.text
        assert reply.json()["method"] == DEFAULT_METHOD
