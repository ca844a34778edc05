"""Run at start-up in every process of a managed vLLM-CPU server (this folder is first on its
``PYTHONPATH``: veracity/serving/engines/vllm.py ``build_env``; vLLM on CPU spawns its engine core and
worker, which inherit it).

vLLM passes each decoding step between its engine core and its worker through shared-memory queues whose
readers busy-wait (``sched_yield`` in a loop) for up to a second after their last read before they sleep on
a socket (``SpinCondition(busy_loop_s=1)`` in ``vllm/distributed/device_communicators/shm_broadcast.py``).
On a GPU that saves microseconds per step. On a CPU the engine core spins on one core for the whole of the
worker's forward pass, which needs those cores: SmolLM2 on 2 cores, one request of 100 tokens took 19.5
CPU-s at 9.9 tokens/s spinning and 10.8 CPU-s at 9.3 tokens/s without; 8 requests 34.8 CPU-s at 45 tokens/s
and 18.0 at 45 (BENCHMARKS.md, "vLLM-CPU's spinning queue readers"). Here the readers go straight to the
socket (``busy_loop_s`` 0); where the installed vLLM has no such parameter, nothing is changed.

Any other ``sitecustomize`` further on the path (a user's, or the test run's network audit) is then run,
as it would have been without this one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import os
import sys

_MODULE = "vllm.distributed.device_communicators.shm_broadcast"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _no_busy_wait(module) -> None:
    """SpinCondition's ``busy_loop_s`` default set to 0 (its callers leave it at the default)."""
    init = getattr(getattr(module, "SpinCondition", None), "__init__", None)
    try:
        params = list(inspect.signature(init).parameters.values())
    except (TypeError, ValueError):
        return
    with_default = [p for p in params if p.default is not inspect.Parameter.empty]
    if not with_default or with_default[-1].name != "busy_loop_s" or init.__kwdefaults__:
        return  # another vLLM: leave it as it is
    init.__defaults__ = (*init.__defaults__[:-1], 0.0)


class _Finder:
    """Finds the queue module as the path finder would and patches it once it has run."""

    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _no_busy_wait(module)

        loader.exec_module = exec_module
        return spec


def _chain() -> None:
    """The next ``sitecustomize`` on the path, run as Python would have run it."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_veracity_next_sitecustomize"] = module
    spec.loader.exec_module(module)


sys.meta_path.insert(0, _Finder())
_chain()
