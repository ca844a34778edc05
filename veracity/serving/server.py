"""Managed servers: the entry points the commands use, gathered from the modules that do each job.

- :mod:`~veracity.serving.hardware`: what the machine has (vLLM installed, a GPU, usable cores);
- :mod:`~veracity.serving.engines`: one :class:`~veracity.serving.engines.base.ServingEngine` per server
program
  (vLLM; the argv, environment and model files each needs);
- :mod:`~veracity.serving.spec`: :class:`ServerSpec`, what to serve, checked before anything starts;
- :mod:`~veracity.serving.launch`: start one server, wait until it serves, stop it, its status;
- :mod:`~veracity.serving.state`: the state files (``<home>/run/<name>.json``) that let ``veracity serve
  --status`` / ``--stop`` and every command find and reuse a server;
- :mod:`~veracity.serving.process`: process groups (the server runs in its own session; its engine core
  and workers are ended with it), ports, the log;
- :mod:`~veracity.serving.replicas`: ``veracity serve --replicas N``, a managed set on consecutive ports;
- :mod:`~veracity.serving.managed`: :func:`ensure_endpoint`, the server commands use when no endpoint is
  configured (reused across invocations until ``veracity serve --stop``).
"""

from __future__ import annotations

from veracity.serving.engines.vllm import build_command, build_env
from veracity.serving.hardware import cuda_available, default_model_for_hardware, vllm_variant
from veracity.serving.launch import health, orphans, server_status, start_server, stop_server, wait_ready
from veracity.serving.managed import ensure_endpoint, resolve_model_path_or_none
from veracity.serving.process import free_port, group_members, pid_alive, port_in_use, tail, terminate_group
from veracity.serving.replicas import (
    check_replica_ports,
    device_groups,
    replica_name,
    replica_names,
    replica_statuses,
    start_replicas,
    stop_replicas,
)
from veracity.serving.spec import DEFAULT_PORT, ServerSpec
from veracity.serving.state import DEFAULT_NAME, ServerState, read_state, state_path

__all__ = [
    "DEFAULT_NAME", "DEFAULT_PORT", "ServerSpec", "ServerState", "build_command", "build_env",
    "check_replica_ports", "cuda_available", "default_model_for_hardware", "device_groups", "ensure_endpoint",
    "free_port", "group_members", "health", "orphans", "pid_alive", "port_in_use", "read_state",
    "replica_name", "replica_names", "replica_statuses", "resolve_model_path_or_none", "server_status",
    "start_replicas", "start_server", "state_path", "stop_replicas", "stop_server", "tail", "terminate_group",
    "vllm_variant", "wait_ready",
]
