"""The engine interface: what differs between serving a model with vLLM and with another server."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from veracity.config import Settings
from veracity.serving.spec import ServerSpec


class ServingEngine(Protocol):
    name: str  # as on the command line: "vllm", "llama.cpp"
    label: str  # in messages: "vLLM", "llama.cpp"

    def installed(self, settings: Settings) -> str:
        """'<distribution or binary> <version>' of the installed engine; a ServerError with the install
        hint when it is missing (checked before anything starts)."""

    def on_gpu(self) -> bool:
        """Whether this engine will run on a GPU here."""

    def model_path(self, settings: Settings, model: str) -> Path:
        """What the engine loads for ``model`` (a weights folder, a GGUF file); a ModelError with the
        command that prepares it when it is missing."""

    def command(self, settings: Settings, spec: ServerSpec, model_path: Path, *, on_gpu: bool,
                bind: dict[str, str] | None = None) -> list[str]:
        """The argv that starts the server; ``bind`` is the replica's :meth:`bind_cpus` environment."""

    def env(self, spec: ServerSpec, *, on_gpu: bool) -> dict[str, str]:
        """The server's whole environment."""

    def bind_cpus(self, cores: list[int]) -> dict[str, str]:
        """Environment that keeps a CPU replica on ``cores`` (one entry: its value is what state files
        record as the replica's devices)."""
