"""Each run setting is checked once, where it enters (issue 41 point 3): the run's config is four typed parts,
a later layer that changes one part builds that part again and leaves the others as they were checked."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from tests.unit.scripted_llm import ScriptedLLM
from veracity.config import Settings
from veracity.errors import ConfigError
from veracity.pipeline.config import (EndpointConfig, EvidenceConfig, ExecutionConfig, MethodConfig,
                                      VerifierConfig)
from veracity.pipeline.methods.base import MethodSpec
from veracity.pipeline.methods.direct import DirectJudgement


@pytest.fixture
def made_params(monkeypatch):
    """How many times a method's parameters are built (and checked)."""
    calls: list[str] = []
    real = MethodSpec.make_params

    def counted(self, overrides=None):
        calls.append(self.name)
        return real(self, overrides)

    monkeypatch.setattr(MethodSpec, "make_params", counted)
    return calls


def test_the_config_is_four_typed_parts_built_from_flat_settings():
    c = VerifierConfig.of(method="rag", params={"k": 3}, labels="binary", evidence="none",
                          endpoint="127.0.0.1:9",
                          model="m", concurrency=2, llm_concurrency=8, cache=True, min_confidence=0.5,
                          settings=Settings(home="/tmp/h"))
    assert isinstance(c.execution, ExecutionConfig) and isinstance(c.method, MethodConfig)
    assert isinstance(c.evidence, EvidenceConfig) and isinstance(c.endpoint, EndpointConfig)
    assert (c.method.name, c.method.labels, c.method.parsed.k, c.method.label_space.name) == ("rag", "binary",
                                                                                              3,
                                                                                              "binary")
    assert (c.evidence.setting, c.endpoint.url, c.endpoint.model, c.endpoint.cache) == ("none", "127.0.0.1:9",
                                                                                        "m",
                                                                                        True)
    assert (c.execution.concurrency, c.execution.llm_concurrency) == (2, 8)
    flat = c.flat()
    assert flat["method"] == "rag" and flat["evidence"] == "none" and flat["endpoint"] == "127.0.0.1:9"
    with pytest.raises(TypeError, match="unknown setting"):
        VerifierConfig.of(nope=1)


def test_the_limits_left_out_are_the_settings_and_a_bad_one_is_one_line_at_entry(monkeypatch):
    monkeypatch.setenv("VERACITY_CONCURRENCY", "5")
    assert VerifierConfig.of().execution.concurrency == 5
    monkeypatch.setenv("VERACITY_CONCURRENCY", "0")
    with pytest.raises(ConfigError,
                       match=r"claims in flight \(--concurrency, \$VERACITY_CONCURRENCY\)") as info:
        VerifierConfig.of()
    assert "\n" not in str(info.value) and info.value.hint == "e.g. --concurrency 16"
    with pytest.raises(ConfigError, match="LLM requests in flight"):
        VerifierConfig.of(concurrency=2, llm_concurrency=0)


def test_replace_builds_only_the_parts_it_changes(made_params):
    c = VerifierConfig.of(method="rag", params={"k": 3})
    assert made_params == ["rag"]
    d = c.replace(concurrency=3, endpoint="http://127.0.0.1:9/v1", model="m", index="/x", state_dir="/tmp/s")
    assert made_params == ["rag"]  # the method part was not built (nor checked) again
    assert d.method is c.method and d.execution.concurrency == 3 and d.endpoint.url == "http://127.0.0.1:9/v1"
    e = d.replace(labels="binary")
    assert made_params == ["rag", "rag"] and e.execution is d.execution and e.endpoint is d.endpoint
    with pytest.raises(ConfigError, match="is not a valid URL"):
        c.replace(endpoint="ftp://x")


def test_the_engine_and_its_claims_use_the_config_as_checked(made_params, monkeypatch):
    """The engine takes the parameters object and the label space the config resolved: no claim builds or
    checks them again (the label space was re-resolved on every claim)."""
    import veracity.pipeline.engine as engine_mod
    from veracity.pipeline.api import Verifier

    resolved: list[object] = []
    real = engine_mod.label_space_of
    monkeypatch.setattr(engine_mod, "label_space_of", lambda v: resolved.append(v) or real(v))
    llm = ScriptedLLM({"direct.judge": lambda m: DirectJudgement(explanation="e", label="SUPPORTED")})
    v = Verifier(method="direct", evidence="none", labels="binary", llm=llm)
    try:
        stats = v.verify_many(["Paris is in France.", "Rome is in Italy.", "Oslo is in Norway."])
    finally:
        v.close()
    assert stats.done == 3 and made_params == ["direct"] and resolved == []


def test_a_per_call_limit_is_checked_by_the_execution_part():
    from veracity.pipeline.api import Verifier

    v = Verifier(method="direct", evidence="none", llm=ScriptedLLM({}))
    try:
        with pytest.raises(ConfigError, match=r"claims in flight \(--concurrency"):
            v.verify_many(["Paris is in France."], concurrency=0)
    finally:
        v.close()


def test_bench_run_takes_the_endpoint_from_its_config_once():
    from veracity.bench.config import RunConfig

    cfg = RunConfig.of(dataset="hover", method="direct", settings=Settings(endpoint="http://127.0.0.1:9/v1",
                                                                           model="m"))
    assert (cfg.verifier.endpoint.url, cfg.verifier.endpoint.model) == ("http://127.0.0.1:9/v1", "m")
    assert cfg.replace(limit=3).verifier is cfg.verifier


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_web_token_is_checked_once_by_the_app_config(monkeypatch, tmp_path):
    import veracity.web.common as common
    from veracity.cli import _register, cli

    checked: list[str] = []
    real = common.check_token
    monkeypatch.setattr(common, "check_token", lambda t: checked.append(t) or real(t))
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path / "home"))
    _register()
    token = common.new_token()
    checked.clear()
    # a good token and a missing index: the app's config (and its token check) is made before the index
    result = CliRunner().invoke(cli, ["web", "--token", token, "--port", str(_free_port()),
                                      "--index", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "does not exist" in result.output
    assert checked == [token]
    result = CliRunner().invoke(cli, ["web", "--token", "short", "--port", str(_free_port())])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert (result.exit_code != 0 and lines[0].startswith("error: the token has 5 characters")
            and len(lines) == 2)


def test_a_job_is_checked_when_it_is_posted_and_the_runner_reuses_that_verifier(made_params, tmp_path):
    from tests.unit.test_web_api import NDJSON, claims_jsonl, make, wait_job

    client, _ = make(tmp_path)
    with client:
        bad = client.post("/v1/jobs?method=rag&params=%7B%22t_max%22%3A%203%7D", headers=NDJSON,
                          content=claims_jsonl(2))
        assert bad.status_code == 400 and "t_max" in bad.json()["error"]
        made_params.clear()
        resp = client.post("/v1/jobs?method=rag&labels=binary", headers=NDJSON, content=claims_jsonl(2))
        assert resp.status_code == 201, resp.text
        assert wait_job(client, resp.json()["id"])["state"] == "done"
    assert made_params == ["rag"]  # checked once, at the POST; the runner took the same Verifier
