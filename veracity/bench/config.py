"""A benchmark run's configuration: what is bench's own (the dataset and how claims are drawn from it, the
ablations, the leakage guard, names for tables, the paper's numbers) and the run's
:class:`~veracity.pipeline.config.VerifierConfig` (method and parameters, evidence, index, endpoint, model,
limits, backend), which checks every run setting once, as it does for ``verify`` and the web app.

``benchmarks/configs/*.toml`` and ``bench run``'s flags are flat (``method = "rag"``, ``concurrency = 1``
beside ``dataset = "hover"``): :meth:`RunConfig.of` sorts the keys into the two parts (:data:`RUN_KEYS`
are the VerifierConfig's), and :meth:`RunConfig.record` writes them flat again into ``run.json``.

The label space is bench's to default: ``labels`` left out means the dataset's declared one (known once
the dataset is read), so :attr:`RunConfig.labels` keeps what was asked and the run's VerifierConfig gets
the resolved space when the run starts.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veracity.bench.datasets.load import ORDER_MODES, SAMPLE_MODES
from veracity.config import Settings
from veracity.errors import ConfigError
from veracity.pipeline.config import VerifierConfig
from veracity.pipeline.labels import THREE_WAY

# the flat keys (config file and flags) that are run settings: VerifierConfig fields
RUN_KEYS = ("method", "params", "labels", "evidence", "index", "concurrency", "llm_concurrency",
            "search_mode",
            "min_confidence", "calibration")
# their types in a hand-written config file (VerifierConfig checks values, not what TOML made of them)
_STR = ("method", "labels", "evidence", "search_mode")
_INT = ("concurrency", "llm_concurrency")


@dataclass
class RunConfig:
    """Everything that defines a benchmark run: bench's own settings and the run's ``verifier`` config
    (build one from flat keys with :meth:`of`; the schema of ``benchmarks/configs/*.toml``)."""

    dataset: str
    verifier: VerifierConfig
    variant: str | None = None
    hops: list[int] | None = None
    limit: int | None = None
    seed: int | None = 0
    # how --limit draws: "random" (seeded) or "balanced" (class- and hop-balanced, seeded)
    sample: str = "random"
    # the order claims are run in: "sample" (as drawn: shuffled when --limit samples) or "dataset" (the drawn
    # claims in the file's order; with concurrency 1, what each claim leaves in a method's run state, e.g.
    # MERMAID's memory, is there for the next one: the setting of MERMAID's memory ablation)
    order: str = "sample"
    label_map: str | None = None
    # the label space asked for (None: the dataset's declared one); checked by `verifier`
    labels: str | None = None
    ablations: list[str] = field(default_factory=list)  # folded into the verifier's method parameters
    allow_leakage: bool = False
    name: str | None = None  # a label for tables (default: the run directory's name)
    description: str | None = None
    # the paper's reported numbers (source, metric: value)
    paper: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_types()
        if isinstance(self.hops, int):
            self.hops = [self.hops]
        self.ablations = [a.strip().lstrip("-") for a in self.ablations]
        if self.order not in ORDER_MODES:
            raise ConfigError(f"unknown run order {self.order!r}",
                              hint="use --order sample (the sample's order) or dataset (the dataset file's "
                                   "order)")
        if self.sample not in SAMPLE_MODES:
            raise ConfigError(f"unknown sample mode {self.sample!r}",
                              hint="use --sample random (a seeded random sample) or balanced "
                                   "(class-balanced)")

    @classmethod
    def of(cls, *, settings: Settings | None = None, endpoint: str | None = None, model: str | None = None,
           backend: str | None = None, ray_address: str | None = None, ray_actors: int | None = None,
           **flat: Any) -> "RunConfig":
        """A RunConfig from flat keys (a config file's, the flags'): :data:`RUN_KEYS` and the backend options
        build the VerifierConfig (each bad value one line, in the order a user meets them), the rest are
        bench's. ``settings`` (default: the environment's) fill what is not given, e.g. the limits."""
        flat = {k: v for k, v in flat.items() if v is not None}
        run = {k: flat.pop(k) for k in RUN_KEYS if k in flat}
        _check_run_types(run)
        labels = run.pop("labels", None)
        out = cls(**cls._bench_part(flat), labels=labels, verifier=None)  # type: ignore[arg-type]  # bench's checks first
        params = dict(run.pop("params", None) or {})
        method = run.get("method")
        if out.ablations and method is not None:
            from veracity.pipeline.methods import ablation_params, get_method

            get_method(method)  # an unknown method is named before its ablations
            params.update(ablation_params(method, out.ablations))
        settings = settings or Settings()
        out.verifier = VerifierConfig.of(
            **run, params=params, labels=labels if labels is not None else THREE_WAY.name,
            endpoint=endpoint if endpoint is not None else settings.endpoint,
            model=model if model is not None else settings.model,
            backend=backend or "local", ray_address=ray_address, ray_actors=ray_actors, settings=settings)
        if labels is not None:
            out.labels = out.verifier.method.labels  # the canonical name
        return out

    @classmethod
    def _bench_part(cls, flat: dict[str, Any]) -> dict[str, Any]:
        known = {f.name for f in dataclasses.fields(cls)} - {"verifier", "labels"}
        unknown = sorted(set(flat) - known)
        if unknown:  # a caller's mistake (a config file's keys are checked by load_config)
            raise ConfigError(f"unknown run setting(s) {', '.join(unknown)}",
                              hint=f"valid keys: {', '.join(sorted(known | set(RUN_KEYS)))}")
        return flat

    def _check_types(self) -> None:
        """Each value of the right type (a config file is hand-written): one line naming the key."""
        for key in ("dataset", "variant", "sample", "order", "label_map", "labels", "name", "description"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise _bad_type(key, "a string", value)
        for key in ("limit", "seed"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise _bad_type(key, "an integer", value)
        hops = self.hops
        if hops is not None and not (isinstance(hops, int) and not isinstance(hops, bool)) and not (
                isinstance(hops, list) and all(isinstance(h, int) and not isinstance(h, bool) for h in hops)):
            raise _bad_type("hops", "an integer or a list of integers", hops)
        if not isinstance(self.ablations, list) or not all(isinstance(a, str) for a in self.ablations):
            raise _bad_type("ablations", "a list of strings", self.ablations)
        if not isinstance(self.allow_leakage, bool):
            raise _bad_type("allow_leakage", "true or false", self.allow_leakage)
        if not isinstance(self.paper, dict):
            raise _bad_type("paper", "a table", self.paper)

    # -- the run settings, read from the verifier config --------------------------------------------------
    method = property(lambda self: self.verifier.method.name)
    evidence = property(lambda self: self.verifier.evidence.setting)
    index = property(lambda self: self.verifier.evidence.index)
    search_mode = property(lambda self: self.verifier.evidence.search_mode)

    @property
    def params(self) -> dict[str, Any]:
        """The method's parameter overrides: the config's ``params`` and its ablations' (checked)."""
        return dict(self.verifier.method.params)

    def method_overrides(self) -> dict[str, Any]:
        return self.params

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with bench settings and/or run settings (:data:`RUN_KEYS`, the backend options) changed."""
        run = {k: changes.pop(k) for k in list(changes) if k in RUN_KEYS or k in ("backend", "ray_address",
                                                                                 "ray_actors")}
        if "labels" in run:
            changes["labels"] = run["labels"]
            run["labels"] = run["labels"] if run["labels"] is not None else THREE_WAY.name
        verifier = self.verifier.replace(**run) if run else self.verifier
        out = dataclasses.replace(self, verifier=verifier, **changes)
        if "labels" in run and out.labels is not None:
            out.labels = verifier.method.labels
        return out

    def record(self) -> dict[str, Any]:
        """The flat form ``run.json`` keeps under ``config`` (the keys a config file has)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "verifier"}
        flat = self.verifier.flat()
        for key in RUN_KEYS:  # the run settings, from the verifier config (the label space: as asked)
            if key != "labels":
                out[key] = flat[key]
        out["index"] = str(out["index"]) if out["index"] is not None else None
        return json.loads(json.dumps(out, default=str))

    def identity(self) -> dict[str, Any]:
        """What a resumed run must share with the run it continues (predictions must not mix). The evidence
        setting is part of it unless ``open`` (so runs from before evidence settings resume as before)."""
        extra = {"evidence": self.evidence} if self.evidence != "open" else {}
        if self.sample != "random":
            extra["sample"] = self.sample
        if self.order != "sample":  # memory carried between claims makes the order part of the result
            extra["order"] = self.order
        return {
            "dataset": self.dataset, "variant": self.variant,
                "hops": sorted(self.hops) if self.hops else None,
            "limit": self.limit, "seed": self.seed, "label_map": self.label_map, "method": self.method,
            "params": json.loads(json.dumps(self.method_overrides(), sort_keys=True, default=str)),
            "search_mode": self.search_mode,
            **extra,
        }


def _bad_type(key: str, want: str, value: Any) -> ConfigError:
    return ConfigError(f"{key} must be {want}, got {value!r}",
                       hint=f"fix `{key}` in the config (or its flag); "
                            "`veracity bench run --help` lists them")


def _check_run_types(run: dict[str, Any]) -> None:
    for key in _STR:
        if key in run and not isinstance(run[key], str):
            raise _bad_type(key, "a string", run[key])
    if "index" in run and not isinstance(run["index"], (str, Path)):
        raise _bad_type("index", "a string", run["index"])
    for key in _INT:
        if key in run and (isinstance(run[key], bool) or not isinstance(run[key], int)):
            raise _bad_type(key, "an integer", run[key])
    if "params" in run and not isinstance(run["params"], dict):
        raise _bad_type("params", "a table of method parameters", run["params"])


def config_keys() -> list[str]:
    """The keys a config file may hold."""
    return sorted(({f.name for f in dataclasses.fields(RunConfig)} - {"verifier"}) | set(RUN_KEYS))


CONFIG_BYTES = 1 << 20  # a run config is a few hundred bytes of TOML


def load_config(path: Path | str, *, settings: Settings | None = None, endpoint: str | None = None,
                model: str | None = None, backend: str | None = None, ray_address: str | None = None,
                ray_actors: int | None = None, **overrides: Any) -> RunConfig:
    """A RunConfig from a TOML file; ``overrides`` (not None) replace its values; ``params`` given there are
    added to the file's."""
    from veracity.reading import read_file_limited

    path = Path(path)
    try:
        data, more = read_file_limited(path, CONFIG_BYTES)  # a device or a pipe is read with a bound
        if more:
            raise ConfigError(f"{path} is larger than {CONFIG_BYTES >> 20} MiB: not a run config",
                              hint="see benchmarks/configs/ for examples")
        raw = tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}", hint="see benchmarks/configs/ for examples")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint="see benchmarks/configs/ for examples")
    known = config_keys()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}",
                          hint=f"valid keys: {', '.join(known)}")
    for key in ("dataset", "method"):
        if key not in raw and overrides.get(key) is None:
            raise ConfigError(f"{path}: missing {key!r}", hint=f"add {key} = \"...\"")
    more_params = overrides.pop("params", None)
    raw.update({k: v for k, v in overrides.items() if v is not None and v != () and v != []})
    if more_params:
        if not isinstance(raw.get("params", {}), dict):
            raise _bad_type("params", "a table of method parameters", raw["params"])
        raw["params"] = {**raw.get("params", {}), **more_params}
    return RunConfig.of(settings=settings, endpoint=endpoint, model=model, backend=backend,
                        ray_address=ray_address, ray_actors=ray_actors, **raw)


__all__ = ["RUN_KEYS", "RunConfig", "config_keys", "load_config"]
