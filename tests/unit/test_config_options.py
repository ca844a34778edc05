"""The shared run options are generated from VerifierConfig (issue 30 point 2): one flag, default and help per
setting, and the values go back into a config unchanged."""

from __future__ import annotations

from pathlib import Path

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
    ctx = verify.make_context("verify", ["x", "--method", "direct", "--labels", "binary", "--evidence",
                                         "none",
                                         "--concurrency", "3", "--param", "judge.max_tokens=64"])
    assert ctx.params["cache"] is False and ctx.params["backend"] == "local"
    names = {name for name, _ in VerifierConfig.options()} - {"params"}
    config = VerifierConfig.from_options({k: v for k, v in ctx.params.items() if k in names})
    assert (config.method.name, config.method.labels, config.evidence.setting,
            config.execution.concurrency) == (
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


@pytest.mark.usefixtures("ray_importable")
def test_the_run_options_are_validated_at_their_edges(tmp_path):
    """The config's validation rules one by one, each at its edge, with the one line (and hint) a user
    sees."""
    from pathlib import Path

    from veracity.config import Settings
    from veracity.errors import ConfigError
    from veracity.pipeline.config import (DEFAULT_RAY_ACTORS, check_address, check_concurrency,
                                          check_min_confidence,
                                          check_ray_options)

    def refused(call, *args) -> ConfigError:
        with pytest.raises(ConfigError) as err:
            call(*args)
        assert "\n" not in str(err.value)
        return err.value

    check_concurrency(1, 1)
    err = refused(check_concurrency, 0, 1)
    assert str(err) == ("claims in flight (--concurrency, $VERACITY_CONCURRENCY) must be an integer of "
                        "at least 1, got 0")
    assert err.hint == "e.g. --concurrency 16"
    err = refused(check_concurrency, 4, 0)
    assert str(err).startswith("LLM requests in flight (--llm-concurrency, $VERACITY_LLM_CONCURRENCY)")
    assert err.hint == "e.g. --llm-concurrency 256"
    for bad in (True, 2.0, "3", None):
        refused(check_concurrency, bad, 1)
        refused(check_concurrency, 1, bad)

    for ok in ("auto", " auto ", "10.0.0.5:6379", "head:1", "head:65535", "ray://head", "ray://head:10001"):
        assert check_address(ok) == ok.strip(), ok
    for bad, problem in ((":6379", "no host name"), ("head", "no host name"), ("ray://", "no host name"),
                         ("head:0", "port '0' is not a number from 1 to 65535"), ("head:65536",
                                                                                  "port '65536'"),
                         ("head:x", "port 'x'"), ("a b:1", "not HOST:PORT"), ("ray://a/b:1",
                                                                              "not HOST:PORT")):
        err = refused(check_address, bad)
        assert str(err).startswith(f"--ray-address {bad!r} is not a Ray address: {problem}"), (bad, str(err))
        assert "auto" in err.hint and "HOST:PORT" in err.hint
    assert check_ray_options(None, None) == (None, DEFAULT_RAY_ACTORS)
    assert check_ray_options("  ", 3) == (None, 3) and check_ray_options("auto", 1) == ("auto", 1)
    for bad in (0, True, 1.5):
        err = refused(check_ray_options, None, bad)
        assert str(err) == f"--ray-actors must be an integer of at least 1, got {bad!r}"
    refused(check_ray_options, "head:0", 2)

    assert check_min_confidence(None) is None and check_min_confidence(0) == 0.0
    assert check_min_confidence(1) == 1.0 and check_min_confidence("0.5") == 0.5
    for bad in (1.01, -0.01, True, "x", float("nan"), [0.5]):
        err = refused(check_min_confidence, bad)
        assert str(err) == f"--min-confidence must be a number from 0 to 1, got {bad!r}"

    settings = Settings(home=tmp_path / "home")
    config = VerifierConfig.of(settings=settings, backend=" Local ", labels="2way", state_dir="~/state",
                               exclude_titles=["a"], method="direct", evidence="none")
    ex, method, evidence = config.execution, config.method, config.evidence
    assert (ex.backend, method.labels, method.name, evidence.setting) == ("local", "binary", "direct", "none")
    assert ex.state_dir == Path("~/state").expanduser() and evidence.exclude_titles == ("a",)
    assert method.params == {} and ex.concurrency == settings.concurrency
    assert ex.llm_concurrency == settings.llm_concurrency
    assert VerifierConfig.of(settings=settings, concurrency=3,
                             llm_concurrency=5).execution.llm_concurrency == 5
    err = refused(lambda: VerifierConfig.of(settings=settings, backend="spark"))
    assert (str(err) == "unknown backend 'spark'"
            and err.hint == "use --backend local (the default) or --backend ray")
    err = refused(lambda: VerifierConfig.of(settings=settings, ray_address="auto"))
    assert (str(err) == "--ray-address applies to --backend ray only"
            and err.hint == "add --backend ray, or drop --ray-address")
    err = refused(lambda: VerifierConfig.of(settings=settings, ray_address="auto", ray_actors=2))
    assert str(err) == "--ray-address and --ray-actors apply to --backend ray only"
    assert err.hint == "add --backend ray, or drop --ray-address and --ray-actors"
    ray = VerifierConfig.of(settings=settings, backend="RAY", ray_address=" ").execution
    assert (ray.backend, ray.ray_address, ray.ray_actors) == ("ray", None, DEFAULT_RAY_ACTORS)
    refused(lambda: VerifierConfig.of(settings=settings, concurrency=0))
    refused(lambda: VerifierConfig.of(settings=settings, min_confidence=2))


@pytest.mark.usefixtures("ray_importable")
def test_each_refusal_says_the_fix_word_for_word_and_each_part_checks_its_own_values(tmp_path, monkeypatch):
    """The hints of the rules above word for word, Ray missing, and the execution part checking its limits
    and backend on its own (not only through VerifierConfig)."""
    import sys

    from veracity.errors import ConfigError
    from veracity.pipeline.config import (RAY_HINT, ExecutionConfig, check_address, check_min_confidence,
                                          check_ray_options, require_ray)

    def refused(call, *args) -> ConfigError:
        with pytest.raises(ConfigError) as err:
            call(*args)
        return err.value

    assert refused(check_address, "head:0").hint == (
        "use auto (the cluster `ray start` runs on this machine), HOST:PORT of the head node (e.g. "
        "10.0.0.5:6379), or leave it out to start a local Ray instance")
    assert str(refused(check_address, "ray://head:0")) == (
        "--ray-address 'ray://head:0' is not a Ray address: port '0' is not a number from 1 to 65535")
    assert refused(check_ray_options, None, 0).hint == "e.g. --ray-actors 2"
    assert refused(check_min_confidence, 2).hint == ("e.g. --min-confidence 0.8 (a verdict less sure than "
                                                     "that becomes NOT_ENOUGH_INFO)")
    assert check_min_confidence(0.25) == 0.25 and check_min_confidence("1") == 1.0
    # Ray not installed: one line naming the extra, before anything else of --backend ray is done
    with monkeypatch.context() as without_ray:
        without_ray.setitem(sys.modules, "ray", None)
        err = refused(require_ray)
        assert str(err) == ("--backend ray needs the optional extra veracity[ray], which is not installed "
                            "(ray)")
        assert err.hint == RAY_HINT == ("pip install 'veracity[ray]' (Ray Data 2.60 or newer), or use "
                                        "--backend local")
        assert str(refused(lambda: ExecutionConfig(backend="ray"))) == str(err)
        assert str(refused(check_ray_options, "auto", 2)) == str(err)
    # the execution part alone: a limit given is checked even when the other is left to the settings
    for kw in ({"concurrency": 0}, {"llm_concurrency": 0}, {"concurrency": 2, "llm_concurrency": -1}):
        refused(lambda kw=kw: ExecutionConfig(**kw))
    assert ExecutionConfig(concurrency=5).llm_concurrency is None  # left to the settings, resolved later
    assert ExecutionConfig(llm_concurrency=5).concurrency is None
    # ... by VerifierConfig: each limit left out is the settings', each one given is kept
    from veracity.config import Settings

    settings = Settings(home=tmp_path / "home", concurrency=7, llm_concurrency=9)
    for given, limits in (({}, (7, 9)), ({"concurrency": 3}, (3, 9)), ({"llm_concurrency": 5}, (7, 5)),
                          ({"concurrency": 3, "llm_concurrency": 5}, (3, 5))):
        ex = VerifierConfig.of(settings=settings, **given).execution
        assert (ex.concurrency, ex.llm_concurrency) == limits, given
    part = ExecutionConfig(concurrency=3)
    assert VerifierConfig(execution=part, settings=settings).execution.llm_concurrency == 9
    assert part.llm_concurrency is None  # the part given is not changed: it may be shared
    # the calibration setting: auto unless off, in any case
    from veracity.pipeline.config import check_calibration

    assert check_calibration(" OFF ") == "off" and check_calibration(None) == "auto"
    assert str(refused(check_calibration, "on")) == "unknown --calibration 'on'"
    assert ExecutionConfig(backend=None).backend == "local"
    assert ExecutionConfig(backend=" RAY ").backend == "ray"
    ray = ExecutionConfig(backend="ray", ray_address=" auto ", ray_actors=3)
    assert (ray.ray_address, ray.ray_actors) == ("auto", 3)
    # the state folder: "~" is the home folder, whether it comes as text or as a Path (--state-dir=~/s: the
    # shell leaves that "~" alone)
    for given in ("~/s", Path("~/s")):
        assert ExecutionConfig(state_dir=given).state_dir == Path.home() / "s"
    assert ExecutionConfig(state_dir=tmp_path).state_dir == tmp_path and ExecutionConfig().state_dir is None
