"""benchmarks/configs/*.toml: every paper setting loads, resolves and selects the claims it says it does.

A config that names an unknown key, method, parameter, ablation, dataset or variant fails here, as does
one whose seeded sample misses a class of its dataset (its macro-F1 would mean nothing), one whose
reported numbers are not fractions, or one that benchmarks/PAPERS.md does not list. The data checks
read the shared evaluation files (skipped without them, failed under CI=true).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.index import missing, shared_data_dir
from veracity.bench.datasets import DATASETS, load_dataset
from veracity.bench.config import RunConfig, load_config
from veracity.pipeline.methods import ABLATIONS, METHODS, get_method

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "benchmarks" / "configs"
PAPERS_MD = REPO / "benchmarks" / "PAPERS.md"
CONFIGS = sorted(CONFIG_DIR.glob("*.toml"))
IDS = [p.stem for p in CONFIGS]
HOVER50 = [f"hover-50-{m}" for m in METHODS]  # one per method: a new method adds its own

# the settings the papers report (file stems); each must exist
REQUIRED = (
    [f"emulate-{d}" for d in ("factool-kbqa", "bingcheck", "factcheck-bench")]
    + [f"trification-{s}-{mode}" for s in ("hover-2hop", "hover-3hop", "hover-4hop", "feverous-s")
       for mode in ("static", "dynamic")]
    + [f"mermaid-{d}{a}" for d in ("factool-kbqa", "bingcheck", "factcheck-bench", "hover") for a in ("",
                                                                                                      "-no-memory")]
    + ["zofia-politifact"]
    + HOVER50
)
# keys of [paper] whose values are metrics: fractions in [0, 1] (a paper's 75.61 % is 0.7561)
METRIC_KEY = re.compile(r"(^|_)(f1|accuracy|precision|recall)(_|$)")


def selection(cfg: RunConfig) -> tuple:
    return (cfg.dataset, cfg.variant, tuple(sorted(cfg.hops)) if cfg.hops else None, cfg.limit, cfg.seed,
            cfg.label_map)


def test_every_required_setting_has_a_config():
    assert set(REQUIRED) <= set(IDS), f"missing configs: {sorted(set(REQUIRED) - set(IDS))}"


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_config_resolves(path: Path):
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    cfg = load_config(path)  # unknown keys, bad TOML, missing dataset / method: ConfigError
    spec = get_method(cfg.method)
    overrides = cfg.method_overrides()  # unknown ablation, or one of another method: ConfigError
    params = spec.make_params(overrides)  # unknown parameter names: ConfigError
    for name in cfg.ablations:
        _, param, value, _ = ABLATIONS[name]
        assert getattr(params, param) == value
    for key, value in cfg.params.items():
        role, dot, setting = key.partition(".")
        if dot:  # a role's budget or temperature: ROLE.max_tokens / ROLE.temperature
            assert params.roles[role][setting] == value, f"{key} not applied"
        else:
            assert getattr(params, key) == value, f"{key} not applied"

    assert cfg.dataset in DATASETS
    ds = DATASETS[cfg.dataset]
    assert "variant" in raw, "name the variant: the label convention must not depend on a default"
    assert cfg.variant in ds.variants, f"{cfg.dataset} has no variant {cfg.variant!r}"
    if cfg.hops is not None:
        assert ds.supports_hops and set(cfg.hops) <= {2, 3, 4}
    if cfg.search_mode is not None:
        assert cfg.search_mode in ("bm25", "dense", "hybrid")

    assert cfg.index is None, "leave index unset: the user passes --index"
    assert cfg.limit is not None and 1 <= cfg.limit <= 100, "a CPU-sized sample"
    assert cfg.seed is not None, "a seeded sample, so every run of the config sees the same claims"
    assert cfg.name == path.stem
    assert cfg.description and "local" in cfg.description.lower()
    if spec.needs_index:
        assert "wikipedia index" in cfg.description.lower()


@pytest.mark.parametrize("path", [p for p in CONFIGS if not p.stem.startswith("hover-50-")],
                         ids=[s for s in IDS if not s.startswith("hover-50-")])
def test_paper_numbers(path: Path):
    cfg = load_config(path)
    paper = cfg.paper
    assert isinstance(paper.get("source"), str) and paper["source"].strip(), "name the table / section"
    for key, value in paper.items():
        assert isinstance(value, (str, float)) and not isinstance(value, bool), f"{key}: a string or a float"
        if METRIC_KEY.search(key):
            assert isinstance(value, float) and 0.0 <= value <= 1.0, f"{key} = {value}: a fraction in [0, 1]"
    if cfg.method != "mermaid" or cfg.dataset != "hover":  # mermaid.txt gives no HoVer numbers
        assert any(METRIC_KEY.search(k) for k in paper) or "tool_calls_total" in paper, "no reported number"
    listed = PAPERS_MD.read_text(encoding="utf-8")
    assert f"{path.stem}.toml" in listed, "benchmarks/PAPERS.md must list this config"


def test_ablation_configs_match_their_base():
    """X-<ablation>.toml runs the claims of X.toml (X-static: of X-dynamic) with one more ablation."""
    configs = {p.stem: load_config(p) for p in CONFIGS}
    pairs = 0
    for stem, cfg in configs.items():
        for name in ABLATIONS:
            if not stem.endswith(f"-{name}"):
                continue
            base_stem = stem[: -len(name) - 1] + ("-dynamic" if name == "static" else "")
            base = configs.get(base_stem)
            assert base is not None, f"{stem}: no base config {base_stem}.toml"
            assert selection(cfg) == selection(base) and cfg.method == base.method
            assert cfg.ablations == base.ablations + [name]
            pairs += 1
    assert pairs >= 8


def test_hover50_is_one_claim_set_for_every_method():
    cfgs = [load_config(CONFIG_DIR / f"{stem}.toml") for stem in HOVER50]
    assert {c.method for c in cfgs} == set(METHODS)
    assert {selection(c) for c in cfgs} == {("hover", "dev", None, 50, 0, None)}
    assert all(not c.ablations and not c.params and not c.paper for c in cfgs)


def test_paper_configs_use_the_papers_parameters():
    """The values the papers state, pinned so that a change of a method's defaults does not move them."""
    for path in CONFIGS:
        cfg = load_config(path)
        if path.stem.startswith("hover-50-"):
            continue
        want = {"emulate": {"max_search_queries": 4, "max_search_results_per_query": 2},
                "trification": {"k": 10}, "mermaid": {"t_max": 5},
                "zofia": {"lambda_init": 0.8, "lambda_step": 0.1, "mmr_gamma": 0.5, "web_k": 10,
                          "wiki_sentences": 3, "theta_sim": 0.1}}[cfg.method]
        assert {k: cfg.params.get(k) for k in want} == want, path.name
        if cfg.method == "trification":
            static = "static" in cfg.ablations
            assert (cfg.search_mode == "bm25") == static, "static mode is BM25 over Wikipedia (Section 4.3)"
            assert static or cfg.params.get("max_modifications") == 3


TRIFICATION = [p for p in CONFIGS if p.stem.startswith("trification-")]


@pytest.mark.parametrize("path", TRIFICATION, ids=[p.stem for p in TRIFICATION])
def test_trification_configs_carry_every_setting(path: Path):
    """Every Trification parameter and every role's budget is in [params], so a change of the method's
    defaults cannot move a paper setting (issue 14); the ablation flags agree with the ablations
    (test_config_resolves checks the values after the ablations are applied)."""
    from veracity.pipeline.params import param_infos

    cfg = load_config(path)
    spec = get_method("trification")
    names = {i.name for i in param_infos(spec.params_cls)}
    budgets = {f"{r.short}.max_tokens" for r in spec.roles}
    plain = {k for k in cfg.params if "." not in k}
    assert names - plain == set(), f"settings left to defaults: {sorted(names - plain)}"
    assert budgets - set(cfg.params) == set(), \
        f"role budgets left to defaults: {sorted(budgets - set(cfg.params))}"
    assert cfg.params["static"] == ("static" in cfg.ablations)
    assert cfg.params["no_refine"] == ("no-refine" in cfg.ablations)
    assert cfg.params["no_refine_think"] == ("no-refine-think" in cfg.ablations)


def test_trification_config_check_catches_a_missing_setting(tmp_path: Path):
    good = (CONFIG_DIR / "trification-hover-2hop-dynamic.toml").read_text(encoding="utf-8")
    assert "\nsearch_synthesis = true" in good
    bad = tmp_path / "trification-bad.toml"
    bad.write_text(good.replace("\nsearch_synthesis = true", "\n"), encoding="utf-8")
    with pytest.raises(AssertionError, match="search_synthesis"):
        test_trification_configs_carry_every_setting(bad)


# methods whose paper configs carry every setting explicitly: each declared parameter and each role's
# budget and temperature (so a change of a default never moves a paper setting)
EXPLICIT = ("emulate", "mermaid")


@pytest.mark.parametrize("path", [p for p in CONFIGS if p.stem.split("-")[0] in EXPLICIT],
                         ids=[s for s in IDS if s.split("-")[0] in EXPLICIT])
def test_emulate_and_mermaid_configs_set_every_setting(path: Path):
    from veracity.pipeline.params import ROLE_SETTINGS, param_infos

    cfg = load_config(path)
    spec = get_method(cfg.method)
    want = {i.name for i in param_infos(spec.params_cls)} | {f"{r.short}.{s}" for r in spec.roles
                                                             for s in ROLE_SETTINGS}
    missing = sorted(want - set(cfg.params))
    assert not missing, f"{path.name} leaves to the defaults: {', '.join(missing)}"
    for name in cfg.ablations:  # the ablation's parameter is written with its ablated value
        _, param, value, _ = ABLATIONS[name]
        assert cfg.params[param] == value, f"{param} must read {value} in an ablation config"
    if cfg.method == "emulate":  # §4 Implementation: every agent at temperature 1
        assert {cfg.params[f"{r.short}.temperature"] for r in spec.roles} == {1.0}
    if cfg.method == "mermaid":  # memory carried claim to claim: the dataset's order, one claim in flight
        assert cfg.order == "dataset", "MERMAID configs run in the dataset's order"
        if cfg.params["memory"]:
            assert cfg.verifier.execution.concurrency == 1, \
                "with memory, one claim in flight: updates visible to the next claim"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    path = shared_data_dir()
    if path is None or not path.is_dir():
        missing("benchmark data (../shared/data) not found; set VERACITY_DATA_DIR")
    return path


@pytest.mark.parametrize("path", CONFIGS, ids=IDS)
def test_config_selects_claims(path: Path, data_dir: Path):
    cfg = load_config(path)
    ds = load_dataset(cfg.dataset, data_dir, limit=cfg.limit, seed=cfg.seed, hops=cfg.hops,
                      variant=cfg.variant,
                      label_map=cfg.label_map)
    assert len(ds) == min(cfg.limit, ds.total) > 0
    present = {gold for _, gold in ds.claims}
    assert present == set(ds.labels), \
        f"the sample lacks {sorted(set(ds.labels) - present)}: macro-F1 would be meaningless"
    if cfg.hops:
        assert {c.meta["hops"] for c, _ in ds.claims} <= set(cfg.hops)


def test_the_checks_catch_bad_configs(tmp_path: Path):
    """The checks above are not vacuous: the mistakes they guard against raise."""
    from veracity.errors import ConfigError, DataError

    good = (CONFIG_DIR / "emulate-factool-kbqa.toml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(good.replace("[params]", "[params]\nmax_queries = 4"), encoding="utf-8")
    with pytest.raises(ConfigError, match="no parameter max_queries"):
        get_method("emulate").make_params(load_config(bad).method_overrides())
    bad.write_text(good.replace('method = "emulate"', 'method = "emulate"\nablations = ["no-memory"]'),
                   encoding="utf-8")
    with pytest.raises(ConfigError, match="ablation of mermaid"):
        load_config(bad).method_overrides()
    bad.write_text(good.replace('variant = "official"', 'variant = "kbqa"'), encoding="utf-8")
    cfg = load_config(bad)
    with pytest.raises(DataError, match="no variant 'kbqa'"):
        load_dataset(cfg.dataset, tmp_path, variant=cfg.variant)


def test_the_class_check_catches_a_one_class_sample(data_dir: Path):
    # bingcheck's "emulate" variant is 98 % supported: its seeded 50-claim sample has no refuted claim
    cfg = dataclasses.replace(load_config(CONFIG_DIR / "emulate-bingcheck.toml"), variant="emulate")
    ds = load_dataset(cfg.dataset, data_dir, limit=cfg.limit, seed=cfg.seed, variant=cfg.variant)
    assert {gold for _, gold in ds.claims} != set(ds.labels)
