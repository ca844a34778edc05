"""State files of managed servers: ``<home>/run/<name>.json`` (pid, endpoint, model, engine, log path), so
``veracity serve --status`` / ``--stop`` and every command that needs a model can find and reuse them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from veracity.config import Settings

DEFAULT_NAME = "default"


@dataclass
class ServerState:
    name: str
    pid: int
    endpoint: str
    model: str
    model_path: str
    port: int
    log_path: str
    started_at: float
    command: list[str]
    variant: str
    replica: int = 1  # 1-based position in a managed set (``serve --replicas``)
    replicas: int = 1  # size of the set it was started in
    # the GPUs (CUDA_VISIBLE_DEVICES) or CPU cores (VLLM_CPU_OMP_THREADS_BIND) it got
    devices: str | None = None
    engine: str = "vllm"  # which engine serves it (state files written before engines had names: vLLM)
    engine_why: str = ""  # why that engine (the flag, VERACITY_ENGINE, the defaults file or the hardware)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @property
    def repeatable(self) -> bool:
        """Started with ``serve --repeatable`` (ServerSpec.repeatable), read from its command: llama.cpp's
        prompt cache or vLLM's prefix cache off."""
        return "--no-cache-prompt" in self.command or "--no-enable-prefix-caching" in self.command


def state_path(settings: Settings, name: str = DEFAULT_NAME) -> Path:
    return settings.run_dir / f"{name}.json"


def read_state(settings: Settings, name: str = DEFAULT_NAME) -> ServerState | None:
    path = state_path(settings, name)
    try:
        return ServerState(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)  # a corrupt state file names no server we can manage
        return None
