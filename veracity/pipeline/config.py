"""The run configuration: every setting of a run in one frozen, picklable object, validated once.

``VerifierConfig`` holds the method and its parameters, the label space, the evidence setting, the index,
the model endpoint(s) and model, the two concurrency limits (claims in flight, LLM requests in flight),
the backend and its Ray options, the state directory, the response cache, the retrieval mode and the
process-wide :class:`~veracity.config.Settings` (home, API key, timeouts, temperature, seed). Building one
checks everything that can be checked without a server, in the order a user meets it (backend, limits,
method, parameters, label space, evidence, endpoint), each a one-line :class:`~veracity.errors.ConfigError`.
Everything that runs claims is built from it alone: :class:`~veracity.pipeline.engine.Engine` (and the
:class:`~veracity.pipeline.api.Verifier` facade), ``bench run``, ``bench throughput``, the web app and each
Ray actor (the config is what travels to the actor).

The commands' shared options are generated from it: each field's ``metadata["cli"]`` is an :class:`Option`
(flag, help, metavar), and ``veracity.cli._common.config_options`` turns the fields a command names into
click options; :meth:`VerifierConfig.from_options` takes their values back. Adding a run setting is one
field here (with its ``Option``) plus the code that uses it.
"""

from __future__ import annotations

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


def _opt(default: Any, option: Option) -> Any:
    return field(default=default, metadata={"cli": option})


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
                          hint="use auto (the cluster `ray start` runs on this machine), HOST:PORT of the head "
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
                          hint="e.g. --min-confidence 0.8 (a verdict less sure than that becomes NOT_ENOUGH_INFO)")
    return p


def _method_names() -> str:
    from veracity.pipeline.methods import METHODS

    return ", ".join(METHODS)


@dataclass(frozen=True)
class VerifierConfig:
    """Every setting of a run (see the module's docstring). ``concurrency`` / ``llm_concurrency`` left as
    None take the settings' (``$VERACITY_CONCURRENCY`` / ``$VERACITY_LLM_CONCURRENCY``)."""

    method: str = _opt(DEFAULT_METHOD, Option("--method", "Verification method (see the METHODS registry).",
                                                      show_default=True, registry="methods"))
    params: Mapping[str, Any] = field(default_factory=dict, metadata={"cli": Option(
        "--param", "Method parameter, repeatable, e.g. --param t_max=3 --param executor.max_tokens=512.",
        metavar="KEY=VALUE", multiple=True)})
    labels: str = _opt("3way", Option(
        "--labels", "Label space: 3way (SUPPORTED / REFUTED / NOT_ENOUGH_INFO) or binary (SUPPORTED / REFUTED: "
        "the verdict is one of the two, and an unconfirmed claim is REFUTED).", metavar="binary|3way",
        show_default=True))
    evidence: str = _opt("open", Option(
        "--evidence", "Evidence: open (search the index), none (closed book: the model's own knowledge, searches "
        "return nothing) or gold (with -i: each line's own \"evidence\" list of {title, text} passages, no index).",
        metavar="open|gold|none", show_default=True))
    index: Any = _opt(None, Option("--index", "Index directory (default: $VERACITY_INDEX or "
                                   "~/.veracity/indexes/demo).", type=Path))
    endpoint: str | None = _opt(None, Option(
        "--endpoint", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: $VERACITY_ENDPOINT or "
        "the managed local server)."))
    model: str | None = _opt(None, Option("--model", "Model name on the endpoint (default: the one it serves)."))
    concurrency: int | None = _opt(None, Option(
        "--concurrency", "Claims in flight at once (default: $VERACITY_CONCURRENCY or 16).", type=int))
    llm_concurrency: int | None = _opt(None, Option(
        "--llm-concurrency", "LLM requests in flight at once, for one claim or many (default: "
        "$VERACITY_LLM_CONCURRENCY or 256, vLLM's default --max-num-seqs).", type=int))
    backend: str = _opt("local", Option(
        "--backend", "Run the batch in this process (local) or as a Ray Data pipeline of actors (ray; needs pip "
        "install 'veracity[ray]').", metavar="local|ray", show_default=True))
    ray_address: str | None = _opt(None, Option(
        "--ray-address", "--backend ray: the Ray cluster to run on: auto (the one `ray start` runs here) or the "
        "head node's HOST:PORT (default: start a local Ray instance).", metavar="auto|HOST:PORT"))
    ray_actors: int | None = _opt(None, Option(
        "--ray-actors", "--backend ray: actors in the pool, each opening the index once and keeping --concurrency "
        "claims in flight (default 2).", metavar="N", type=int))
    state_dir: Any = _opt(None, Option(
        "--state-dir", "Where a method keeps state across claims and runs, e.g. MERMAID's evidence memory in "
        "DIR/memory/ (default: $VERACITY_HOME, ~/.veracity).", type=Path, directory=True))
    cache: bool = _opt(False, Option("--cache", "Reuse cached model replies (on-disk response cache).", type=bool))
    min_confidence: float | None = _opt(None, Option(
        "--min-confidence", "Abstain below this confidence (0-1): such a verdict becomes NOT_ENOUGH_INFO, marked "
        "abstained, with the label it would have given (default: never abstain).", metavar="P", type=float))
    calibration: str = _opt("auto", Option(
        "--calibration", "Confidence calibration: auto (apply the map `veracity bench calibrate` stored for the "
        "model, method and label space, when there is one) or off (the model's own probabilities).",
        metavar="auto|off", show_default=True))
    search_mode: str | None = None
    exclude_titles: tuple[str, ...] = ()
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        from veracity.pipeline.labels import label_space
        from veracity.pipeline.methods import get_method
        from veracity.pipeline.evidence import evidence_setting

        put = object.__setattr__  # normalised values of a frozen object, set once here
        put(self, "backend", self._check_backend())
        put(self, "concurrency", self.settings.concurrency if self.concurrency is None else self.concurrency)
        put(self, "llm_concurrency",
            self.settings.llm_concurrency if self.llm_concurrency is None else self.llm_concurrency)
        check_concurrency(self.concurrency, self.llm_concurrency)
        spec = get_method(self.method)  # unknown: one line naming the known ones
        put(self, "method", spec.name)
        put(self, "params", dict(self.params or {}))
        params = spec.make_params(self.params)  # a bad name or value: one line naming the parameter
        space = label_space(self.labels)  # a bad name: one line
        put(self, "labels", space.name)
        spec.check_label_space(params, space)
        if self.evidence not in ("custom",):
            put(self, "evidence", evidence_setting(self.evidence))  # a bad name: one line
        if self.endpoint is not None:  # one URL or a comma-separated list: malformed or empty fails here
            split_endpoints(self.endpoint)
        put(self, "exclude_titles", tuple(self.exclude_titles))
        put(self, "min_confidence", check_min_confidence(self.min_confidence))
        put(self, "calibration", check_calibration(self.calibration))
        if self.state_dir is not None and not hasattr(self.state_dir, "open"):
            put(self, "state_dir", Path(self.state_dir).expanduser())

    def _check_backend(self) -> str:
        """``local`` or ``ray``; Ray options without ``ray``, a bad count or address, or ``ray`` without the
        extra installed: one line each, before any index or server."""
        name = str(self.backend or "local").strip().lower()
        if name not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r}",
                              hint="use --backend local (the default) or --backend ray")
        if name == "local":
            given = [flag for flag, v in (("--ray-address", self.ray_address), ("--ray-actors", self.ray_actors))
                     if v is not None]
            if given:
                raise ConfigError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --backend "
                                  "ray only", hint="add --backend ray, or drop " + " and ".join(given))
            return name
        address, actors = check_ray_options(self.ray_address, self.ray_actors)
        object.__setattr__(self, "ray_address", address)
        object.__setattr__(self, "ray_actors", actors)
        return name

    # -- what the config says, resolved ---------------------------------------------------------------
    @property
    def spec(self) -> Any:
        """The method's :class:`~veracity.pipeline.methods.base.MethodSpec`."""
        from veracity.pipeline.methods import get_method

        return get_method(self.method)

    def method_params(self) -> Any:
        """The method's parameters object (checked when the config was built)."""
        return self.spec.make_params(self.params)

    @property
    def label_space(self) -> Any:
        from veracity.pipeline.labels import label_space

        return label_space(self.labels)

    @property
    def run_state_dir(self) -> Path:
        """Where the method's run state lives: ``state_dir``, else ``$VERACITY_HOME``."""
        return Path(self.state_dir) if self.state_dir is not None else self.settings.home

    def replace(self, **changes: Any) -> "VerifierConfig":
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- the command line -------------------------------------------------------------------------------
    @classmethod
    def options(cls, *names: str) -> list[tuple[str, Option]]:
        """(field name, its :class:`Option`) of the named fields (all with one when none are named), the
        method list filled in from the registry."""
        out = []
        for f in dataclasses.fields(cls):
            opt = f.metadata.get("cli")
            if opt is None or (names and f.name not in names):
                continue
            if "{methods}" in opt.help:
                opt = dataclasses.replace(opt, help=opt.help.format(methods=_method_names()))
            out.append((f.name, opt))
        return out

    @classmethod
    def from_options(cls, values: Mapping[str, Any], **more: Any) -> "VerifierConfig":
        """A config from the values of the generated options (None: the field's default) and ``more``."""
        known = {f.name for f in dataclasses.fields(cls)}
        given = {k: v for k, v in {**values, **more}.items() if k in known and v is not None}
        return cls(**given)


__all__ = ["BACKENDS", "Option", "VerifierConfig", "check_address", "check_concurrency", "check_ray_options",
           "require_ray"]
