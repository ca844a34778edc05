"""`veracity bundle create|verify|install`: onto an air-gapped machine as a checked folder of files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from rich.markup import escape

from veracity.cli import interrupt
from veracity.cli._common import console, print_json
from veracity.cli.models import _PrepareDisplay
from veracity.config import load_settings


@click.group("bundle")
def bundle() -> None:
    """Move veracity onto an air-gapped machine: one folder of files, every sha256 checked on arrival.

    \b
    On the connected machine:
      veracity bundle create /media/disk/veracity-bundle --index ~/.veracity/indexes/demo
    On the offline machine (same platform and Python), in a fresh virtual environment:
      python /media/disk/veracity-bundle/install.py      # checks, pip --no-index, then `bundle install`
      veracity bundle verify /media/disk/veracity-bundle  # check only
    """


@bundle.command("create")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--model", "models", multiple=True, metavar="NAME",
              help="A prepared model to carry (repeatable; default: the default model).")
@click.option("--index", "indexes", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help="An index folder to carry (repeatable).")
@click.option("--gpu", is_flag=True, help="The GPU extra (vllm, faiss-gpu) instead of the CPU one.")
@click.option("--extra", "extras", multiple=True, metavar="NAME", help="Another extra of veracity, e.g. ray.")
@click.option("--python", "python", metavar="X.Y", help="Wheels for another Python version (wheels only).")
@click.option("--platform", "platform", metavar="TAG",
              help="Wheels for another platform, a pip tag such as manylinux_2_28_x86_64 (wheels only).")
@click.option("--llama-cpp", "llama_cpp", default="auto", show_default=True,
              type=click.Choice(["auto", "source", "binary", "both", "none"]),
              help="The llama.cpp engine: its pinned source, the binary built here, both (auto: both when "
                   "built here), or none.")
@click.option("--no-wheels", is_flag=True,
              help="Models and indexes only (for a machine veracity is on already).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest's summary as JSON.")
def create(out: Path, models: tuple[str, ...], indexes: tuple[Path, ...], gpu: bool, extras: tuple[str, ...],
           python: str | None, platform: str | None, llama_cpp: str, no_wheels: bool, as_json: bool) -> None:
    """Write a bundle into OUT: wheels (pip download), models, indexes, llama.cpp, manifest.json.

    Needs the package index (for the wheels and the llama.cpp source). The size is printed before anything
    is copied. Resumable: run it again and files already there with the right sha256 are kept.

    \b
    Examples:
      veracity bundle create /work/bundle --model qwen2.5-coder-1.5b-instruct --index ~/.veracity/indexes/demo
      veracity bundle create /work/bundle-py312 --python 3.12 --platform manylinux_2_28_x86_64
    """
    from veracity.bundle.create import BundleOptions, create_bundle, plan_bundle
    from veracity.bundle.manifest import human

    settings = load_settings()
    options = BundleOptions(out=out, models=list(models), indexes=list(indexes), gpu=gpu, extras=list(extras),
                            python=python, platform=platform, llama_cpp=llama_cpp, wheels=not no_wheels)
    plan = plan_bundle(settings, options)  # every bad option is one line before anything is fetched
    console.print(f"bundle for {plan.target['sys_platform']} {plan.target['machine']}, Python "
                  f"{plan.target['python']}: {plan.requirement if not no_wheels else 'no wheels'}; models "
                  f"{', '.join(m['name'] for m in plan.models) or 'none'}; indexes "
                  f"{', '.join(i['name'] for i in plan.indexes) or 'none'}; llama.cpp "
                  f"{'+'.join(k for k in ('source', 'binary') if plan.llama_cpp.get(k)) or 'none'}; "
                  f"{human(plan.copy_bytes)} of local files to copy", highlight=False, markup=False)
    interrupt.keep(f"the bundle at {out} is unfinished (it has no manifest.json until the end); run the same "
                   "command again: it keeps the files already there with the right sha256")
    with _PrepareDisplay() as display:
        manifest = create_bundle(settings, options, progress=lambda s: display.message(escape(s)),
                                 bar=display.bar, plan=plan)
    summary = {"bundle": str(out), "files": len(manifest["files"]), "bytes": manifest["total_bytes"],
               "target": manifest["target"], "timings": manifest["timings"]}
    if as_json:
        print_json(summary)
        return
    console.print(f"[green]bundle ready[/] at {out}: {len(manifest['files'])} files, "
                  f"{human(manifest['total_bytes'])} ({manifest['timings']['total']:.0f} s)", highlight=False)
    console.print(f"on the offline machine: python {out}/install.py   (in a fresh virtual environment)",
                  highlight=False)


@bundle.command("verify")
@click.argument("root", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--files-only", is_flag=True,
              help="Check the files only, not whether this machine can install it.")
def verify(root: Path, files_only: bool) -> None:
    """Check bundle DIR without installing: its manifest, this machine's platform and Python, every sha256.

    \b
    Example:
      veracity bundle verify /media/disk/veracity-bundle
    """
    from veracity.bundle.manifest import human, verify_bundle

    interrupt.keep("the check stopped; nothing was changed: run the same command again")
    with _PrepareDisplay() as display:
        manifest = verify_bundle(root, check_machine=not files_only, bar=display.bar)
    console.print(f"[green]ok[/] {root}: {len(manifest['files'])} files, {human(manifest['total_bytes'])}, "
                  "every sha256 as its manifest says", highlight=False)


@bundle.command("install")
@click.argument("root", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--index-dir", type=click.Path(path_type=Path), default=None,
              help="Where the bundle's indexes go (default: $VERACITY_HOME/indexes).")
@click.option("--no-engine", is_flag=True, help="Leave the llama.cpp engine out.")
@click.option("--no-packages", is_flag=True, hidden=True)  # the bundle's install.py installed them
@click.option("--checked", is_flag=True, hidden=True)  # the bundle's install.py checked every sha256 just now
def install(root: Path, index_dir: Path | None, no_engine: bool, no_packages: bool, checked: bool) -> None:
    """Install bundle DIR here: check every file, then packages (pip --no-index), models, indexes, engine.

    Nothing is installed unless every check passes; nothing is fetched. Ends with `veracity doctor`.
    On a machine without veracity yet, run `python DIR/install.py` instead (it does the same).

    \b
    Example:
      veracity bundle install /media/disk/veracity-bundle
    """
    from veracity.bundle.install import install_bundle

    settings = load_settings()
    interrupt.keep(f"nothing from {root} is registered until all its files are in place (models and indexes "
                   "are "
                   "staged under hidden names, removed when stopped); run the same command again to finish")
    with _PrepareDisplay() as display:
        done = install_bundle(settings, root, packages=not no_packages, checked=checked, engine=not no_engine,
                              index_dir=index_dir, progress=lambda s: display.message(escape(s)),
                              bar=display.bar)
    console.print(f"[green]installed[/] from {done['bundle']}: models {', '.join(done['models']) or 'none'}; "
                  f"indexes {', '.join(done['indexes']) or 'none'}", highlight=False)
    if done["engine"]:
        console.print(done["engine"], highlight=False)
    console.print("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in done["timings"].items()),
                  highlight=False)
    # doctor in a fresh process: the packages may have been installed after this one started
    rc = subprocess.call([sys.executable, "-m", "veracity", "doctor"])
    if rc != 0:
        raise SystemExit(rc)


COMMANDS = [bundle]

