"""llama.cpp's ``llama-server``: serves a prepared model's GGUF as it is (no conversion), on CPU.

The binary is found at ``$VERACITY_LLAMA_SERVER``, else ``<home>/engines/llama.cpp/bin/llama-server``
(what ``veracity engines install llama.cpp`` builds), else ``llama-server`` on ``PATH``. Slots
(``-np``, requests decoded together) and threads (``-t``) follow the hardware: a thread per usable core
(per replica: its share), and twice as many slots as threads, at least 4 (``--max-num-seqs`` overrides).
Each slot gets the model's CPU context cap (``-c`` is slots x context: llama.cpp splits it over slots).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from veracity.config import Settings
from veracity.errors import ServerError
from veracity.models.registry import MODELS
from veracity.offline import child_env
from veracity.serving import hardware
from veracity.serving.spec import ServerSpec

BINARY = "llama-server"
# OpenMP's own binding: llama.cpp's compute threads are OpenMP threads (GGML_OPENMP), so a replica's
# share of the cores binds them the way VLLM_CPU_OMP_THREADS_BIND does for vLLM
BIND_VAR = "GOMP_CPU_AFFINITY"


def engine_dir(settings: Settings) -> Path:
    return settings.home / "engines" / "llama.cpp"


def find_binary(settings: Settings) -> Path | None:
    """The llama-server to run, or None when there is none."""
    given = os.environ.get("VERACITY_LLAMA_SERVER")
    if given:
        return Path(given)
    built = engine_dir(settings) / "bin" / BINARY
    if built.exists():
        return built
    on_path = shutil.which(BINARY)
    return Path(on_path) if on_path else None


def binary_missing(settings: Settings) -> bool:
    """Whether no llama-server is there to run (none found, or the one named does not exist)."""
    binary = find_binary(settings)
    return binary is None or not binary.exists()


def slot_dir(settings: Settings, port: int) -> Path:
    """The folder of a managed llama-server's slot files (``--slot-save-path``; created here: llama-server
    refuses a folder that does not exist)."""
    path = settings.run_dir / f"slots-{port}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def slots_and_threads(spec: ServerSpec, cores: int) -> tuple[int, int]:
    threads = max(1, cores)
    slots = 1 if spec.repeatable else spec.max_num_seqs or max(4, 2 * threads)
    return slots, threads


class LlamaCppEngine:
    name = "llama.cpp"
    label = "llama.cpp"

    def installed(self, settings: Settings) -> str:
        binary = find_binary(settings)
        if binary is None or not binary.exists():
            where = f" ({binary} does not exist)" if binary is not None else ""
            raise ServerError(f"llama.cpp's llama-server is not installed{where}",
                              hint="run `veracity engines install llama.cpp` (builds it from the "
                                   "llama-cpp-python "
                                   "sources on the package index; about 10 min on 2 cores), or set "
                                   "VERACITY_LLAMA_SERVER to a llama-server binary")
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServerError(f"{binary} does not run: {exc}",
                              hint="build it again with "
                                   "`veracity engines install llama.cpp --force`") from exc
        if out.returncode != 0:
            line = next((ln for ln in (out.stderr + out.stdout).splitlines()[::-1] if ln.strip()),
                        "no output")
            raise ServerError(f"{binary} --version failed: {line.strip()[:200]}",
                              hint="build it again with `veracity engines install llama.cpp --force`")
        version = next((ln.split(":", 1)[1].strip() for ln in (out.stderr + out.stdout).splitlines()
                        if ln.startswith("version:")), "?")  # e.g. "0.5.0-dev (build 1, commit 0c1e570)"
        return f"llama-server {version}"

    def on_gpu(self) -> bool:
        return False  # the build veracity installs is CPU-only

    def model_path(self, settings: Settings, model: str) -> Path:
        from veracity.models.prepare import resolve_gguf, served_gguf

        return served_gguf(settings, resolve_gguf(settings, model),
                           lambda line: print(f"veracity: {line}", file=sys.stderr, flush=True))

    def command(self, settings: Settings, spec: ServerSpec, model_path: Path, *, on_gpu: bool,
                bind: dict[str, str] | None = None) -> list[str]:
        binary = find_binary(settings) or Path(BINARY)
        bound = (bind or {}).get(BIND_VAR)
        cores = len(bound.split(",")) if bound else len(hardware.usable_cpus())
        slots, threads = slots_and_threads(spec, cores)
        info = MODELS.get(spec.model)
        per_slot = spec.max_model_len or (min(info.context_length, info.cpu_max_model_len) if info else 4096)
        return [
            str(binary),
            "--model", str(model_path),
            "--alias", spec.model,
            "--host", spec.host,
            "--port", str(spec.port),
            "--ctx-size", str(per_slot * slots),
            "--parallel", str(slots),
            "--threads", str(threads),
            # an HTTP thread for every slot's connection and four more (llama-server's own default): with
            # fewer, a client holding every slot on keep-alive connections left /v1/models unanswered for
            # seconds to minutes (4 of 73 probes past 5 s with 2 threads and 4 busy slots, 0 of 93 with 8;
            # benchmarks/llama_http_threads.py), so health probes and a second command timed out
            "--threads-http", str(max(slots + 4, threads)),
            "--no-webui",
            # Prometheus /metrics (tokens, prompt-cache reuse, busy and deferred requests), which `bench
            # throughput` reads for its server-side figures (veracity.bench.prom)
            "--metrics",
            # slot files: a text's shared prefix copied from the slot that processed it into the idle others
            # (LLMClient.share_prefix; one file per server, in a folder per port)
            "--slot-save-path", str(slot_dir(settings, spec.port)),
            # repeatable (ServerSpec.repeatable): every prompt read afresh, nothing kept in RAM to reuse
            *(["--no-cache-prompt", "--cache-ram", "0"] if spec.repeatable else []),
            *spec.extra_args,
        ]

    def env(self, spec: ServerSpec, *, on_gpu: bool) -> dict[str, str]:
        env = child_env()
        env.pop("VERACITY_LLAMA_SERVER", None)
        # OpenMP's threads spin at every barrier by default; on a machine whose cores are shared (load 33
        # on 2 cores here) a descheduled thread makes the other spin out its time slice at each of the
        # hundreds of barriers per token: SmolLM2 decoded 0.35-0.38 tokens/s spinning and 31.9-37.8
        # sleeping (DEVELOPERS.md). A user's own setting wins.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        return env

    def bind_cpus(self, cores: list[int]) -> dict[str, str]:
        return {BIND_VAR: ",".join(str(c) for c in cores)}


LLAMA_CPP = LlamaCppEngine()
