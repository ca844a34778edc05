"""The shared run options are generated from VerifierConfig (issue 30 point 2): one flag, default and help per
setting, and the values go back into a config unchanged."""

from __future__ import annotations

import click
import pytest

from veracity.cli._common import config_options
from veracity.cli.check import check
from veracity.cli.verify import verify
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.methods import METHODS


def _by_name(cmd: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in cmd.params}


@pytest.mark.parametrize("cmd", [verify, check], ids=["verify", "check"])
def test_every_config_option_is_on_the_command_as_the_config_declares_it(cmd):
    params = _by_name(cmd)
    for name, opt in VerifierConfig.options():
        p = params[name]
        assert p.opts == [opt.flag] and p.help == opt.help, name
        default = VerifierConfig.option_default(name)
        if opt.type is bool:
            assert p.is_flag, name  # off unless given (checked by parsing below)
        elif default is not None:
            assert p.default == default, name


def test_method_choices_are_the_registry():
    assert list(_by_name(verify)["method"].type.choices) == list(METHODS)


def test_a_help_override_changes_only_the_text_and_an_unknown_name_is_refused():
    @click.command()
    @config_options("endpoint", "state_dir", help={"endpoint": "Where the model is."})
    def cmd(endpoint, state_dir):
        pass

    params = _by_name(cmd)
    assert params["endpoint"].help == "Where the model is." and params["endpoint"].opts == ["--endpoint"]
    assert isinstance(params["state_dir"].type, click.Path) and not params["state_dir"].type.file_okay
    with pytest.raises(ValueError, match="no option for"):
        config_options("nope")


def test_the_values_make_the_config():
    ctx = verify.make_context("verify", ["x", "--method", "direct", "--labels", "binary", "--evidence", "none",
                                         "--concurrency", "3", "--param", "judge.max_tokens=64"])
    assert ctx.params["cache"] is False and ctx.params["backend"] == "local"
    names = {name for name, _ in VerifierConfig.options()} - {"params"}
    config = VerifierConfig.from_options({k: v for k, v in ctx.params.items() if k in names})
    assert (config.method.name, config.method.labels, config.evidence.setting, config.execution.concurrency) == (
        "direct", "binary", "none", 3)


def test_bench_help_lists_the_registries_as_they_are(monkeypatch):
    from click.testing import CliRunner

    from veracity.bench.datasets.registry import DATASETS
    from veracity.cli.bench_run import run_cmd
    from veracity.cli.bench_throughput import throughput_cmd

    monkeypatch.setitem(METHODS, "newmethod", METHODS["direct"])
    monkeypatch.setitem(DATASETS, "newset", DATASETS["hover"])
    run_help = " ".join(CliRunner().invoke(run_cmd, ["--help"], terminal_width=1000).output.split())
    assert "zofia or newmethod." in run_help and "liar, newset, or jsonl:PATH." in run_help
    tp_help = " ".join(CliRunner().invoke(throughput_cmd, ["--help"], terminal_width=1000).output.split())
    assert "Verification method: direct, rag, mermaid, emulate, trification, zofia or newmethod." in tp_help
