"""GPU memory in use, from ``nvidia-smi`` (none without an NVIDIA driver), for `bench throughput`'s levels."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any


def parse_nvidia_smi(text: str) -> dict[str, Any] | None:
    """``nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits`` ->
    {"used_mib", "total_mib", "devices": [{"index", "used_mib", "total_mib"}]}; None if nothing parses."""
    devices = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            devices.append({"index": int(parts[0]), "used_mib": float(parts[1]),
                            "total_mib": float(parts[2])})
        except ValueError:
            continue
    if not devices:
        return None
    return {"used_mib": sum(d["used_mib"] for d in devices),
            "total_mib": sum(d["total_mib"] for d in devices),
            "devices": devices, "source": "nvidia-smi"}


def gpu_memory() -> dict[str, Any] | None:
    """GPU memory in use on this machine (all NVIDIA GPUs), or None without a GPU."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used,memory.total",
                                  "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0:
                return parse_nvidia_smi(out.stdout)
        except (OSError, subprocess.SubprocessError):
            pass
    if not Path("/dev/nvidiactl").exists():  # no NVIDIA driver: do not pay for importing torch
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        devices = []
        for i in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(i)
            devices.append({"index": i, "used_mib": (total - free) / 2**20, "total_mib": total / 2**20})
        return {"used_mib": sum(d["used_mib"] for d in devices),
            "total_mib": sum(d["total_mib"] for d in devices),
                "devices": devices, "source": "torch.cuda.mem_get_info"}
    except Exception:  # torch missing or broken: no figure rather than a failed benchmark
        return None
