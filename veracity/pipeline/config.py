"""The run configuration: every setting of a run in one frozen, picklable object, resolved and checked once.

:class:`VerifierConfig` is four typed parts and the process-wide :class:`~veracity.config.Settings` (home,
API key, timeouts, temperature, seed):

- :class:`ExecutionConfig`: how the claims run: the two concurrency limits (claims in flight, LLM requests in
  flight), the backend and its Ray options, the state directory;
- :class:`MethodConfig`: what verifies them: the method, its parameters (resolved once into the method's
  parameters object), the label space, the abstention threshold and the calibration setting;
- :class:`EvidenceConfig`: what they are checked against: the evidence setting, the index, the retrieval
  mode and the titles left out;
- :class:`EndpointConfig`: which model answers: the endpoint URL(s), the model name, the response cache.

Each part checks its own values when it is built, once, where the value enters (a flag, a config file, a
web request, the Python API); :meth:`VerifierConfig.of` builds the parts from flat keywords in the order a
user meets them (backend, limits, method, parameters, label space, evidence, endpoint), each mistake a
one-line :class:`~veracity.errors.ConfigError`. :meth:`VerifierConfig.replace` rebuilds only the parts whose
settings change, so a later layer (the web app's per-request method, a throughput level's concurrency, the
managed endpoint once it is resolved) never checks the untouched settings again. Everything that runs claims
is built from it alone: :class:`~veracity.pipeline.engine.Engine` (and the
:class:`~veracity.pipeline.api.Verifier` facade), ``bench run``, ``bench throughput``, the web app and each
Ray actor (the config is what travels to the actor).

The commands' shared options are generated from it: each part field's ``metadata["cli"]`` is an
:class:`Option` (flag, help, metavar), named on the command line by its flat name (``metadata["flat"]``, else
the field's name: ``--method`` is :attr:`MethodConfig.name`); ``veracity.cli._common.config_options`` turns
the
flat names a command names into click options; :meth:`VerifierConfig.from_options` takes their values back.
Adding a run setting is one field in its part (with its ``Option``) plus the code that uses it.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from veracity.config import Settings, split_endpoints
from veracity.errors import ConfigError
from veracity.pipeline.methods import DEFAULT_METHOD

BACKENDS = ("local", "ray")
DEFAULT_RAY_ACTORS = 2


@dataclass(frozen=True)
class Option:
    """How a config field appears on the command line."""

    flag: str
    help: str
    metavar: str | None = None
    type: Any = None  # click type (None: a string); ``bool`` makes a flag
    multiple: bool = False
    show_default: bool = False
    cli_default: Any = None  # what the flag's default shows (None: the field's own default)
    directory: bool = False  # a Path that must be a directory (shown as DIRECTORY)
    registry: str | None = None  # "methods": the choices are the METHODS registry's names, read at run time


def _opt(default: Any, option: Option, flat: str | None = None) -> Any:
    return field(default=default, metadata={"cli": option, **({"flat": flat} if flat else {})})


def check_concurrency(concurrency: Any, llm_concurrency: Any) -> None:
    """Both limits at least 1 (a ConfigError naming the bad one), checked before any server is contacted."""
    for what, flag, env, value in (("claims in flight", "concurrency", "VERACITY_CONCURRENCY", concurrency),
                                   ("LLM requests in flight", "llm-concurrency", "VERACITY_LLM_CONCURRENCY",
                                    llm_concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} (--{flag}, ${env}) must be an integer of at least 1, got {value!r}",
                              hint=f"e.g. --{flag} {16 if flag == 'concurrency' else 256}")


RAY_EXTRA = "veracity[ray]"
RAY_HINT = "pip install 'veracity[ray]' (Ray Data 2.60 or newer), or use --backend local"


def require_ray() -> Any:
    """The ``ray`` module (with Ray Data), or a one-line ConfigError naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--backend ray needs the optional extra {RAY_EXTRA}, which is not installed "
                          f"({exc.name or exc})", hint=RAY_HINT) from None
    return ray


def check_address(address: str) -> str:
    """``auto``, ``HOST:PORT`` or ``ray://HOST[:PORT]`` as given, else a one-line ConfigError."""
    text = address.strip()
    if text == "auto":
        return text
    rest = text.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if text.startswith("ray://") and not sep:
        host, port = rest, "10001"
    problem = None
    if not host or any(c.isspace() for c in text) or "/" in rest:
        problem = "no host name" if not host else "not HOST:PORT"
    elif not port.isdigit() or not 0 < int(port) < 65536:
        problem = f"port {port!r} is not a number from 1 to 65535"
    if problem:
        raise ConfigError(f"--ray-address {address!r} is not a Ray address: {problem}",
                          hint="use auto (the cluster `ray start` runs on this machine), HOST:PORT of the "
                               "head "
                               "node (e.g. 10.0.0.5:6379), or leave it out to start a local Ray instance")
    return text


def check_ray_options(address: str | None, actors: int | None) -> tuple[str | None, int]:
    """(address or None, actors) of ``--backend ray``: a bad count or address is one line, and so is Ray
    not installed."""
    if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
        raise ConfigError(f"--ray-actors must be an integer of at least 1, got {actors!r}",
                          hint=f"e.g. --ray-actors {DEFAULT_RAY_ACTORS}")
    addr = check_address(address) if address is not None and str(address).strip() else None
    require_ray()
    return addr, actors or DEFAULT_RAY_ACTORS


def check_calibration(value: Any) -> str:
    from veracity.pipeline.calibration import check_calibration as check

    return check(value)


def check_min_confidence(value: Any) -> float | None:
    """``--min-confidence``: None, or a number from 0 to 1 (a ConfigError otherwise)."""
    if value is None:
        return None
    try:
        p = float(value)
    except (TypeError, ValueError):
        p = float("nan")
    if isinstance(value, bool) or not 0.0 <= p <= 1.0:
        raise ConfigError(f"--min-confidence must be a number from 0 to 1, got {value!r}",
                          hint="e.g. --min-confidence 0.8 (a verdict less sure than that becomes "
                               "NOT_ENOUGH_INFO)")
    return p


def _method_names() -> str:
    from veracity.pipeline.methods import METHODS

    return ", ".join(METHODS)


def _put(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # a normalised value of a frozen part, set once when it is built


@dataclass(frozen=True)
class ExecutionConfig:
    """How the claims run. ``concurrency`` / ``llm_concurrency`` left as None take the settings'
    (``$VERACITY_CONCURRENCY`` / ``$VERACITY_LLM_CONCURRENCY``): :meth:`VerifierConfig.of` fills them in."""

    concurrency: int | None = _opt(None, Option(
        "--concurrency", "Claims in flight at once (default: $VERACITY_CONCURRENCY or 16).", type=int))
    llm_concurrency: int | None = _opt(None, Option(
        "--llm-concurrency", "LLM requests in flight at once, for one claim or many (default: "
        "$VERACITY_LLM_CONCURRENCY or 256, vLLM's default --max-num-seqs).", type=int))
    backend: str = _opt("local", Option(
        "--backend", "Run the batch in this process (local) or as a Ray Data pipeline of actors (ray; needs "
                     "pip "
        "install 'veracity[ray]').", metavar="local|ray", show_default=True))
    ray_address: str | None = _opt(None, Option(
        "--ray-address", "--backend ray: the Ray cluster to run on: auto (the one `ray start` runs here) or "
                         "the "
        "head node's HOST:PORT (default: start a local Ray instance).", metavar="auto|HOST:PORT"))
    ray_actors: int | None = _opt(None, Option(
        "--ray-actors", "--backend ray: actors in the pool, each opening the index once and keeping "
                        "--concurrency "
        "claims in flight (default 2).", metavar="N", type=int))
    state_dir: Any = _opt(None, Option(
        "--state-dir", "Where a method keeps state across claims and runs, e.g. MERMAID's evidence memory in "
        "DIR/memory/ (default: $VERACITY_HOME, ~/.veracity).", type=Path, directory=True))

    def __post_init__(self) -> None:
        _put(self, "backend", self._check_backend())  # the backend first: Ray not installed is one line
        if self.concurrency is not None or self.llm_concurrency is not None:
            check_concurrency(16 if self.concurrency is None else self.concurrency,
                              256 if self.llm_concurrency is None else self.llm_concurrency)
        if self.state_dir is not None:  # "~" is the home folder whether the folder comes as text or a Path
            _put(self, "state_dir", Path(self.state_dir).expanduser())

    def _check_backend(self) -> str:
        """``local`` or ``ray``; Ray options without ``ray``, a bad count or address, or ``ray`` without the
        extra installed: one line each, before any index or server."""
        name = str(self.backend or "local").strip().lower()
        if name not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}",
                              hint="use --backend local (the default) or --backend ray")
        if name == "local":
            given = [flag for flag, v in (("--ray-address", self.ray_address), ("--ray-actors",
                                                                                self.ray_actors))
                     if v is not None]
            if given:
                raise ConfigError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to "
                                  "--backend "
                                  "ray only", hint="add --backend ray, or drop " + " and ".join(given))
            return name
        address, actors = check_ray_options(self.ray_address, self.ray_actors)
        _put(self, "ray_address", address)
        _put(self, "ray_actors", actors)
        return name


@dataclass(frozen=True)
class MethodConfig:
    """What verifies the claims: the method, its parameter overrides (``params``; :attr:`parsed` is the
    method's parameters object, built and checked once here), the label space and the confidence settings."""

    name: str = _opt(DEFAULT_METHOD, Option("--method", "Verification method (see the METHODS registry).",
                                            show_default=True, registry="methods"), flat="method")
    params: Mapping[str, Any] = field(default_factory=dict, metadata={"cli": Option(
        "--param", "Method parameter, repeatable, e.g. --param t_max=3 --param executor.max_tokens=512.",
        metavar="KEY=VALUE", multiple=True)})
    labels: str = _opt("3way", Option(
        "--labels", "Label space: 3way (SUPPORTED / REFUTED / NOT_ENOUGH_INFO) or binary (SUPPORTED / "
                    "REFUTED: "
        "the verdict is one of the two, and an unconfirmed claim is REFUTED).", metavar="binary|3way",
        show_default=True))
    min_confidence: float | None = _opt(None, Option(
        "--min-confidence", "Abstain below this confidence (0-1): such a verdict becomes NOT_ENOUGH_INFO, "
                            "marked "
        "abstained, with the label it would have given (default: never abstain).", metavar="P", type=float))
    calibration: str = _opt("auto", Option(
        "--calibration", "Confidence calibration: auto (apply the map `veracity bench calibrate` stored for "
                         "the "
        "model, method and label space, when there is one) or off (the model's own probabilities).",
        metavar="auto|off", show_default=True))
    parsed: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from veracity.pipeline.labels import label_space
        from veracity.pipeline.methods import get_method

        spec = get_method(self.name)  # unknown: one line naming the known ones
        _put(self, "name", spec.name)
        _put(self, "params", dict(self.params or {}))
        parsed = spec.make_params(self.params)  # a bad name or value: one line naming the parameter
        space = label_space(self.labels)  # a bad name: one line
        _put(self, "labels", space.name)
        spec.check_label_space(parsed, space)
        _put(self, "parsed", parsed)
        _put(self, "min_confidence", check_min_confidence(self.min_confidence))
        _put(self, "calibration", check_calibration(self.calibration))

    @property
    def spec(self) -> Any:
        """The method's :class:`~veracity.pipeline.methods.base.MethodSpec`."""
        from veracity.pipeline.methods import get_method

        return get_method(self.name)

    @property
    def label_space(self) -> Any:
        """The :class:`~veracity.pipeline.labels.LabelSpace` (its name was checked when the part was
        built)."""
        from veracity.pipeline.labels import LABEL_SPACES

        return LABEL_SPACES[self.labels]


@dataclass(frozen=True)
class EvidenceConfig:
    """What the claims are checked against: the evidence setting (``open``, ``gold``, ``none``, or ``custom``
    for a caller's per-claim retriever), the index (a directory or an open searcher; None: the default one),
    the retrieval mode and the titles no search may return."""

    setting: str = _opt("open", Option(
        "--evidence", "Evidence: open (search the index), none (closed book: the model's own knowledge, "
                      "searches "
        "return nothing) or gold (with -i: each line's own \"evidence\" list of {title, text} passages, no "
        "index).",
        metavar="open|gold|none", show_default=True), flat="evidence")
    index: Any = _opt(None, Option("--index", "Index directory (default: $VERACITY_INDEX or "
                                   "~/.veracity/indexes/demo).", type=Path))
    search_mode: str | None = None
    exclude_titles: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from veracity.pipeline.evidence import evidence_setting

        if self.setting != "custom":
            _put(self, "setting", evidence_setting(self.setting))  # a bad name: one line
        _put(self, "exclude_titles", tuple(self.exclude_titles))


@dataclass(frozen=True)
class EndpointConfig:
    """Which model answers: the endpoint (one URL or a comma-separated list; None: ``$VERACITY_ENDPOINT`` or
    the managed server, resolved by the engine), the model name on it, and the on-disk response cache."""

    url: str | None = _opt(None, Option(
        "--endpoint", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: "
                      "$VERACITY_ENDPOINT or "
        "the managed local server)."), flat="endpoint")
    model: str | None = _opt(None, Option("--model",
                                          "Model name on the endpoint (default: the one it serves)."))
    cache: bool = _opt(False, Option("--cache", "Reuse cached model replies (on-disk response cache).",
                                     type=bool))

    def __post_init__(self) -> None:
        if self.url is not None:  # one URL or a comma-separated list: malformed or empty fails here
            split_endpoints(self.url)


# the parts in the order their settings are checked (the order a user meets them); each setting's flat name
PARTS: tuple[tuple[str, type], ...] = (("execution", ExecutionConfig), ("method", MethodConfig),
                                       ("evidence", EvidenceConfig), ("endpoint", EndpointConfig))
# the flat settings in their --help / record order (the order of the one flat class they came from)
FLAT_ORDER = ("method", "params", "labels", "evidence", "index", "endpoint", "model", "concurrency",
              "llm_concurrency", "backend", "ray_address", "ray_actors", "state_dir", "cache",
              "min_confidence",
              "calibration", "search_mode", "exclude_titles")


def _flat_fields() -> dict[str, tuple[str, dataclasses.Field]]:
    """flat name -> (part, the part's field)."""
    out = {}
    for part, cls in PARTS:
        for f in dataclasses.fields(cls):
            if f.init:
                out[f.metadata.get("flat", f.name)] = (part, f)
    return {name: out[name] for name in FLAT_ORDER}


FLAT_FIELDS = _flat_fields()


@dataclass(frozen=True)
class VerifierConfig:
    """Every setting of a run in four typed parts (see the module's docstring). Build one from flat keywords
    with :meth:`of` (``VerifierConfig.of(method="rag", concurrency=4)``) or from the generated options with
    :meth:`from_options`; change one with :meth:`replace`."""

    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    evidence: EvidenceConfig = field(default_factory=EvidenceConfig)
    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        ex = self.execution  # the limits left out are the settings': resolved once, here
        if ex.concurrency is None or ex.llm_concurrency is None:
            concurrency = self.settings.concurrency if ex.concurrency is None else ex.concurrency
            llm_concurrency = (self.settings.llm_concurrency if ex.llm_concurrency is None
                               else ex.llm_concurrency)
            check_concurrency(concurrency, llm_concurrency)  # $VERACITY_CONCURRENCY=0 enters here
            ex = copy.copy(ex)  # the given part may be shared: this config's own copy, resolved
            _put(ex, "concurrency", concurrency)
            _put(ex, "llm_concurrency", llm_concurrency)
            _put(self, "execution", ex)

    @classmethod
    def of(cls, *, settings: Settings | None = None, **flat: Any) -> "VerifierConfig":
        """A config from flat settings (:data:`FLAT_ORDER`; left out: the part's default), each part built and
        checked once, in the order a user meets them."""
        unknown = sorted(set(flat) - set(FLAT_FIELDS))
        if unknown:
            raise TypeError(f"VerifierConfig.of: unknown setting(s) {', '.join(unknown)}")
        settings = settings if settings is not None else Settings()
        parts = {part: cls._part(part, flat) for part, _ in PARTS}
        return cls(**parts, settings=settings)

    @staticmethod
    def _part(part: str, flat: Mapping[str, Any], base: Any = None) -> Any:
        kinds = dict(PARTS)
        given = {f.name: flat[name] for name, (p, f) in FLAT_FIELDS.items() if p == part and name in flat}
        if base is not None:
            return dataclasses.replace(base, **given)
        return kinds[part](**given)

    def replace(self, *, settings: Settings | None = None, **flat: Any) -> "VerifierConfig":
        """A copy with flat settings changed: only the parts they belong to are built (and checked) again."""
        unknown = sorted(set(flat) - set(FLAT_FIELDS))
        if unknown:
            raise TypeError(f"VerifierConfig.replace: unknown setting(s) {', '.join(unknown)}")
        touched = {p for name, (p, _) in FLAT_FIELDS.items() if name in flat}
        parts = {part: self._part(part, flat, getattr(self, part)) if part in touched else getattr(self, part)
                 for part, _ in PARTS}
        return VerifierConfig(**parts, settings=settings if settings is not None else self.settings)

    def flat(self) -> dict[str, Any]:
        """Every setting under its flat name (what a record or a flat config file holds)."""
        return {name: getattr(getattr(self, part), f.name) for name, (part, f) in FLAT_FIELDS.items()}

    # -- what the config says, resolved ---------------------------------------------------------------
    @property
    def run_state_dir(self) -> Path:
        """Where the method's run state lives: ``state_dir``, else ``$VERACITY_HOME``."""
        state_dir = self.execution.state_dir
        return Path(state_dir) if state_dir is not None else self.settings.home

    # -- the command line -------------------------------------------------------------------------------
    @classmethod
    def options(cls, *names: str) -> list[tuple[str, Option]]:
        """(flat name, its :class:`Option`) of the named settings (all with one when none are named), the
        method list filled in from the registry."""
        out = []
        for name, (_, f) in FLAT_FIELDS.items():
            opt = f.metadata.get("cli")
            if opt is None or (names and name not in names):
                continue
            if "{methods}" in opt.help:
                opt = dataclasses.replace(opt, help=opt.help.format(methods=_method_names()))
            out.append((name, opt))
        return out

    @classmethod
    def option_default(cls, name: str) -> Any:
        """The default of the flat setting ``name`` (None when it has none of its own)."""
        f = FLAT_FIELDS[name][1]
        return f.default if f.default is not dataclasses.MISSING else None

    @classmethod
    def from_options(cls, values: Mapping[str, Any], **more: Any) -> "VerifierConfig":
        """A config from the values of the generated options (None: the setting's default) and ``more``."""
        given = {k: v for k, v in {**values, **more}.items() if (k in FLAT_FIELDS or k == "settings")
                 and v is not None}
        return cls.of(**given)


__all__ = ["BACKENDS", "EndpointConfig", "EvidenceConfig", "ExecutionConfig", "FLAT_ORDER", "MethodConfig",
           "Option", "VerifierConfig", "check_address", "check_concurrency", "check_ray_options",
           "require_ray"]
