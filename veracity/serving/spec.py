"""What to serve and how: :class:`ServerSpec`, checked before anything starts. The engine's name is
checked against the engines registry by :func:`veracity.serving.engines.check_spec` (the engines build
their commands from a ServerSpec, so this module does not import them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from veracity.errors import ConfigError
from veracity.serving.structured import STRUCTURED_BACKENDS

DEFAULT_PORT = 8000


@dataclass
class ServerSpec:
    model: str  # registry name (or a path) -- also the served model name
    engine: str = "vllm"  # a name in veracity.serving.engines.ENGINES (checked by engines.check_spec)
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    structured_backend: str = "xgrammar"
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    quantization: str | None = None
    dtype: str | None = None
    cpu_kv_cache_gib: float = 4.0
    max_num_seqs: int | None = None
    # one sequence at a time and every prompt read afresh (no prefix/prompt cache): the only way a server
    # gives the same reply to the same request every time. A batched sequence's logits depend on what is
    # decoded beside it, and a prompt read from the cache ends on logits computed by another kernel path
    # than a fresh read (at temperature 1, SmolLM2 on llama-server sampled a sentence from a fresh prompt
    # and "Claim" from the same prompt cached: tests/integration/test_methods_end_to_end.py)
    repeatable: bool = False
    extra_args: list[str] = field(default_factory=list)
    engine_why: str = ""  # why this engine (EngineChoice.why), kept in the state file for `serve --status`

    def validate(self) -> None:
        """Every setting but the engine's name (:func:`veracity.serving.engines.check_spec` checks all)."""
        if self.structured_backend not in STRUCTURED_BACKENDS:
            raise ConfigError(
                f"unknown structured-output backend {self.structured_backend!r}",
                hint=f"choose one of {', '.join(STRUCTURED_BACKENDS)}",
            )
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range", hint="use a port between 1024 and 65535")
        if self.gpu_memory_utilization is not None and not 0.05 <= self.gpu_memory_utilization <= 1.0:
            raise ConfigError("--gpu-memory-utilization must be between 0.05 and 1.0",
                              hint="0.9 is vLLM's default")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1", hint="1 means no parallelism")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ConfigError(f"--max-model-len must be >= 1, got {self.max_model_len}",
                              hint="leave it out for the model's own context length, e.g. --max-model-len "
                                   "4096")
        if self.max_num_seqs is not None and self.max_num_seqs < 1:
            raise ConfigError(f"--max-num-seqs must be >= 1, got {self.max_num_seqs}",
                              hint="vLLM's default is 256")
        if self.repeatable and self.max_num_seqs not in (None, 1):
            raise ConfigError(f"--repeatable runs one sequence at a time; --max-num-seqs {self.max_num_seqs} "
                              "contradicts it", hint="leave out --max-num-seqs (or give 1)")
        if not self.cpu_kv_cache_gib > 0:
            raise ConfigError(f"--kv-cache-gib must be more than 0, got {self.cpu_kv_cache_gib:g}",
                              hint="e.g. --kv-cache-gib 4")
        if self.cpu_kv_cache_gib != int(self.cpu_kv_cache_gib):
            # vLLM-CPU reads VLLM_CPU_KVCACHE_SPACE as an integer and dies at start-up on "1.5"
            raise ConfigError(f"--kv-cache-gib must be a whole number of GiB, got {self.cpu_kv_cache_gib:g}",
                              hint="vLLM-CPU takes whole GiB only, e.g. --kv-cache-gib 2")

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/v1"
